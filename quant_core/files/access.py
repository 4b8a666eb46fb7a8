"""Where the reader's bytes come from: files on disk (inside the allowed folders, regular
files only, read a bounded range at a time) or an upload's bytes in memory.

Every path the reader opens passes the caller's ``PathGuard`` first (``AllowedRoots`` is
the plain rule: resolved, symlinks and ``..`` included, the path must lie inside one of
the roots; a server passes its own, e.g. the dashboard's model roots). Then, as the
dashboard's ``io.regular`` does for its readers:

1. the type of what the path leads to is checked before opening (a named pipe would block
   ``open`` until a writer appears, a device never ends);
2. it is opened with ``O_NONBLOCK`` (a pipe swapped in meanwhile opens at once) and its
   type checked again with ``fstat``, which gives the size every read is bounded by.

Reads are ``os.pread`` of exactly the range asked; a range past the end is a
``QuantizedFileError`` naming the file, never a short read.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = [
    "AllowedRoots",
    "Blob",
    "FileLocation",
    "Location",
    "MemoryLocation",
    "PathGuard",
    "QuantizedFileError",
    "file_kind",
    "open_blob",
    "read_json",
]


class QuantizedFileError(ValueError):
    """A quantized file or folder that cannot be read as it claims; ``str(err)`` names the
    file, the tensor where there is one, and the problem."""


@runtime_checkable
class PathGuard(Protocol):
    """Decides which paths may be read: ``check(path)`` returns the path resolved (links
    followed) when it may be read, else raises ``ValueError`` saying why."""

    def check(self, path: Path) -> Path: ...


@dataclass(frozen=True)
class AllowedRoots:
    """The plain allowed-folders rule: a path may be read when, resolved (symlinks and
    ``..``), it lies inside one of ``roots`` (absolute folders, resolved here too)."""

    roots: tuple[Path, ...]

    def __post_init__(self) -> None:
        if isinstance(self.roots, str | Path) or not all(
            isinstance(r, str | Path) for r in self.roots
        ):
            raise TypeError(f"roots must be a tuple of paths, got {self.roots!r}")
        resolved = []
        for root in self.roots:
            path = Path(root)
            if not path.is_absolute():
                raise ValueError(f"an allowed root must be an absolute path, got {str(root)!r}")
            resolved.append(path.resolve())
        object.__setattr__(self, "roots", tuple(resolved))

    def check(self, path: Path) -> Path:
        try:
            resolved = Path(path).resolve()
        except (OSError, RuntimeError, ValueError) as err:
            raise QuantizedFileError(f"{Path(path).name}: not a usable path ({err})") from err
        if not any(resolved.is_relative_to(root) for root in self.roots):
            allowed = ", ".join(str(r) for r in self.roots) or "none"
            raise QuantizedFileError(
                f"{Path(path).name} is outside the allowed folders ({allowed}); it is not read"
            )
        return resolved


class _Unrestricted:
    """No guard: any path, resolved."""

    def check(self, path: Path) -> Path:
        return Path(path).resolve()


UNRESTRICTED: PathGuard = _Unrestricted()


@dataclass(frozen=True)
class FileLocation:
    """A file to read again later: its resolved ``path``, the ``size`` and modification
    time it had when listed (a file changed since is refused, not misread), and the name
    messages use."""

    path: Path
    size: int
    mtime_ns: int
    shown: str


class Blob:
    """Bytes to read by range: ``size`` and ``read(offset, n)`` (exactly ``n`` bytes, or a
    ``QuantizedFileError`` naming ``shown``)."""

    def __init__(self, shown: str, size: int, fd: int | None = None, data: bytes | None = None):
        self.shown = shown
        self.size = size
        self._fd = fd
        self._data = None if data is None else memoryview(data)

    def read(self, offset: int, n: int, what: str = "") -> bytes:
        """Bytes ``[offset, offset + n)``; ``what`` (``"tensor 'x'"``) goes into the message
        when the range leaves the file."""
        if offset < 0 or n < 0 or offset + n > self.size:
            where = f" for {what}" if what else ""
            raise QuantizedFileError(
                f"{self.shown}: bytes {offset:,}..{offset + n:,}{where} lie past the end of "
                f"the file ({self.size:,} bytes): truncated or a lying header"
            )
        if self._data is not None:
            return bytes(self._data[offset : offset + n])
        if self._fd is None:
            raise RuntimeError("a Blob holds a file descriptor or bytes")
        parts: list[bytes] = []
        got = 0
        while got < n:
            part = os.pread(self._fd, min(n - got, 1 << 26), offset + got)
            if not part:
                raise QuantizedFileError(
                    f"{self.shown}: the file ended at byte {offset + got:,} while reading "
                    f"{n:,} bytes (it changed while being read)"
                )
            parts.append(part)
            got += len(part)
        return b"".join(parts)


def describe(path: Path) -> str:
    """What ``path`` is, in words (``"a named pipe (FIFO)"``), links followed."""
    try:
        return file_kind(os.stat(path).st_mode)
    except OSError:
        return "not readable"


def file_kind(mode: int) -> str:
    """What a ``st_mode`` describes, in words: ``"a regular file"``, ``"a named pipe
    (FIFO)"``, ``"a character device"``, ``"a block device"``, ``"a socket"``, ``"a
    folder"``, or ``"a special file"``."""
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return kind
    return "a special file"


@contextmanager
def open_blob(path: Path, guard: PathGuard, shown: str | None = None) -> Iterator[Blob]:
    """``path`` (checked by ``guard``) opened as described in the module docstring."""
    resolved = guard.check(path)
    name = shown or Path(path).name
    try:
        mode = os.stat(resolved).st_mode
        if not stat.S_ISREG(mode):
            raise QuantizedFileError(
                f"{name} is {file_kind(mode)}, not a regular file; it is not read"
            )
        flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
        fd = os.open(resolved, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise QuantizedFileError(f"cannot read {name}: {err.strerror or err}") from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise QuantizedFileError(
                f"{name} is {file_kind(info.st_mode)}, not a regular file; it is not read"
            )
        yield Blob(name, info.st_size, fd=fd)
    finally:
        os.close(fd)


def locate(path: Path, guard: PathGuard, shown: str | None = None) -> FileLocation:
    """The ``FileLocation`` of a regular file ``path`` inside the guard's folders."""
    resolved = guard.check(path)
    name = shown or Path(path).name
    with open_blob(resolved, guard, name):
        try:
            st = os.stat(resolved)
        except OSError as err:
            raise QuantizedFileError(f"cannot read {name}: {err.strerror or err}") from err
    return FileLocation(resolved, st.st_size, st.st_mtime_ns, name)


@dataclass(frozen=True, eq=False)
class MemoryLocation:
    """An upload's bytes, read in memory; ``shown``: its file name."""

    data: bytes
    shown: str

    @property
    def size(self) -> int:
        return len(self.data)


Location = FileLocation | MemoryLocation


@contextmanager
def reopen(location: Location, guard: PathGuard) -> Iterator[Blob]:
    """The listed file opened again (``QuantizedFileError`` when it changed since), or
    the upload's bytes."""
    if isinstance(location, MemoryLocation):
        yield Blob(location.shown, len(location.data), data=location.data)
        return
    with open_blob(location.path, guard, location.shown) as blob:
        try:
            mtime = os.stat(location.path).st_mtime_ns
        except OSError as err:
            raise QuantizedFileError(f"cannot read {location.shown}: {err}") from err
        if blob.size != location.size or mtime != location.mtime_ns:
            raise QuantizedFileError(
                f"{location.shown} changed since it was listed ({location.size:,} -> "
                f"{blob.size:,} bytes): open it again"
            )
        yield blob


def read_json(path: Path, guard: PathGuard, max_bytes: int) -> object:
    """The JSON value in ``path`` (inside the guard's folders), read whole once its size is
    known to be at most ``max_bytes``: a ``QuantizedFileError`` naming the file for one
    larger, not UTF-8, not JSON, or nested past the parser's recursion limit."""
    location = locate(path, guard)
    if location.size > max_bytes:
        raise QuantizedFileError(
            f"{location.shown} is {location.size:,} bytes, over the {max_bytes:,}-byte limit"
        )
    with reopen(location, guard) as blob:
        raw = blob.read(0, blob.size)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise QuantizedFileError(f"{location.shown} is not valid JSON ({str(err)[:120]})") from None
