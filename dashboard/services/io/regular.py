"""Files on disk are opened only when they are regular files, and read a bounded number of
bytes at a time.

Why: a named pipe (FIFO) named like a model file blocks ``open`` until a writer appears
and then a read until it writes, forever if none does; a device (``/dev/zero``) never
ends; a socket cannot be opened at all. A page that read one would never finish, and the
session's thread would be stuck with it.

``open_regular(path, shown)``:

1. checks the type of what ``path`` leads to, links followed (``os.stat``), before
   opening anything: opening some devices has effects of its own;
2. opens it without blocking (``O_NONBLOCK``: a FIFO then opens at once instead of waiting
   for a writer; no effect on a regular file) and without taking a terminal
   (``O_NOCTTY``);
3. checks the type again on what it opened (``os.fstat``), so a file swapped for a pipe
   between 1 and 2 is refused too, and takes the size from there.

Libraries that read a path themselves (``safetensors.safe_open``) are given
``RegularFile.path``: on Linux ``/proc/self/fd/N``, which opens the very file checked in 3
whatever the path names by then; elsewhere the path itself.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from quant_core.files.access import file_kind

from .common import LoadError, short

__all__ = ["RegularFile", "file_kind", "open_regular", "read_at_most"]

_PROC_FD = Path("/proc/self/fd")


@dataclass(frozen=True)
class RegularFile:
    """A regular file opened for reading: ``fd`` (open while its ``open_regular`` block
    lasts), ``size`` in bytes when it was opened, and ``path``, what a library that opens
    files by name should open to read this same file."""

    fd: int
    size: int
    path: Path


def _refuse_unless_regular(mode: int, shown: str) -> None:
    if not stat.S_ISREG(mode):
        raise LoadError(f"{shown} is {file_kind(mode)}, not a regular file; it is not read")


@contextmanager
def open_regular(path: str | os.PathLike[str], shown: str) -> Iterator[RegularFile]:
    """``path`` opened read-only as described in the module's docstring, closed when the
    block ends. ``LoadError`` naming ``shown`` (the name to show, not the path) when it
    does not exist, cannot be opened, or is not a regular file."""
    path = Path(path)
    try:
        _refuse_unless_regular(os.stat(path).st_mode, shown)
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise LoadError(f"cannot read {shown}: {err.strerror or short(err)}") from err
    try:
        try:
            info = os.fstat(fd)
        except OSError as err:
            raise LoadError(f"cannot read {shown}: {err.strerror or short(err)}") from err
        _refuse_unless_regular(info.st_mode, shown)
        pinned = _PROC_FD / str(fd)
        yield RegularFile(fd, info.st_size, pinned if pinned.exists() else path)
    finally:
        os.close(fd)


def read_at_most(fd: int, n: int, offset: int = 0) -> bytes:
    """Up to ``n`` bytes of the open file ``fd`` from byte ``offset`` (fewer only at its
    end), without moving its position. ``OSError`` as ``os.pread`` raises it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    parts: list[bytes] = []
    got = 0
    while got < n:
        part = os.pread(fd, min(n - got, 1 << 24), offset + got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)
