"""``.safetensors``: the ``safetensors`` library validates the header and reads the tensors;
this module adds the limits and says in plain words what is wrong with a refused file.

One reader for every ``.safetensors`` file: an upload is written to a private temporary
file and read like a file on disk, through ``safe_open`` (memory-mapped, one tensor at a
time). Listing reads the header only; a tensor's size is checked against ``Limits`` from the
header before ``get_tensor`` allocates it.

Steps, for a file of ``size`` bytes:

0. only a regular file is opened (``regular.open_regular``: a named pipe or a device
   named ``.safetensors`` would block or never end), and every read is bounded;
1. the 8-byte little-endian header length ``n``: ``8 + n <= size`` and ``n`` at most
   100 MB (the library's own limit);
2. the header is JSON (checked by quant_core's ``parse_header``: duplicate names, the
   parse stopped past ``MAX_TENSORS`` + 2 objects, ``__metadata__`` of text, at most
   ``MAX_TENSORS`` entries);
3. ``safe_open`` validates dtypes, shapes and byte ranges (tensors tile the data section
   exactly); when it refuses, ``_explain`` names the entry and the problem;
4. at most ``MAX_DIMS`` dimensions per tensor (the library allows more than numpy).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import safetensors

from quant_core.files.hf_folder import natural_key

from .common import (
    DEFAULT_LIMITS,
    MAX_DIMS,
    Limits,
    LoadedTensor,
    LoadError,
    TensorInfo,
    brief,
    check_size,
    display_name,
    finish,
    pick,
    result_itemsize,
    short,
)
from .regular import RegularFile, open_regular
from .safetensors_header import DTYPES, explain, read_header

__all__ = [
    "list_bytes",
    "list_file",
    "load_bytes",
    "load_file_tensor",
    "natural_key",
    "open_file",
]


def _dtype_name(st_dtype: str) -> str:
    """torch's spelling of a stored dtype (``"F32"`` -> ``"float32"``), else the file's."""
    if st_dtype == "C64":
        return "complex64"
    dtype = DTYPES.get(st_dtype, (0, None))[1]
    return str(dtype).removeprefix("torch.") if dtype is not None else st_dtype


# ---------------------------------------------------------------------------------------
# Entry points


@dataclass(frozen=True)
class _Entry:
    info: TensorInfo
    st_dtype: str


def list_bytes(raw: bytes, filename: str, limits: Limits) -> tuple[TensorInfo, ...]:
    """The tensors of an uploaded file, from its header alone, in natural name order."""
    shown = display_name(filename)
    with _spooled(raw) as path, open_regular(path, shown) as file:
        return tuple(e.info for e in _entries(file, shown))


def load_bytes(raw: bytes, filename: str, name: str | None, limits: Limits) -> LoadedTensor:
    """Tensor ``name`` of an uploaded file (``None``: the first listed)."""
    shown = display_name(filename)
    with _spooled(raw) as path, open_regular(path, shown) as file:
        return _load(file, shown, name, limits)


def list_file(path: str | Path) -> tuple[TensorInfo, ...]:
    """The tensors in a ``.safetensors`` file on disk, reading only its header; a path
    that leads to anything but a regular file is refused (``regular.open_regular``)."""
    path = _checked_path(path)
    shown = display_name(path.name)
    with open_regular(path, shown) as file:
        return tuple(e.info for e in _entries(file, shown))


def load_file_tensor(
    path: str | Path, name: str | None = None, limits: Limits = DEFAULT_LIMITS
) -> LoadedTensor:
    """Load one tensor of a file on disk; a huge model costs only that tensor's memory. A
    path that leads to anything but a regular file is refused (``regular.open_regular``)."""
    path = _checked_path(path)
    shown = display_name(path.name)
    with open_regular(path, shown) as file:
        return _load(file, shown, name, limits)


@contextmanager
def open_file(path: str | Path) -> Iterator[tuple[tuple[TensorInfo, ...], Any]]:
    """``(infos, handle)`` for reading many tensors of one validated file: ``infos`` as
    ``list_file`` gives them, ``handle.get_tensor(name)`` the library's tensor as stored
    (no limit or conversion: the caller picked the tensors from ``infos``). A path that
    leads to anything but a regular file is refused (``regular.open_regular``)."""
    path = _checked_path(path)
    shown = display_name(path.name)
    with open_regular(path, shown) as file:
        infos = tuple(e.info for e in _entries(file, shown))
        try:
            opened = safetensors.safe_open(str(file.path), framework="pt", device="cpu")
        except (OSError, safetensors.SafetensorError) as err:  # changed since it was listed
            raise LoadError(f"cannot read {shown}: {short(err)}") from err
        with opened as handle:
            yield infos, handle


# ---------------------------------------------------------------------------------------
# Reading


@contextmanager
def _spooled(raw: bytes) -> Iterator[Path]:
    """``raw`` as a private temporary file, removed on exit: ``safe_open`` reads paths."""
    with tempfile.NamedTemporaryFile(prefix="qlab-", suffix=".safetensors") as handle:
        handle.write(raw)
        handle.flush()
        yield Path(handle.name)


def _checked_path(path: str | Path) -> Path:
    path = Path(path)
    if path.suffix.lower() != ".safetensors":
        raise LoadError(f"{display_name(path.name)} is not a .safetensors file")
    return path


def _load(file: RegularFile, shown: str, name: str | None, limits: Limits) -> LoadedTensor:
    entry = pick(_entries(file, shown), name, shown, key=lambda e: e.info.name)
    info = entry.info
    dtype = DTYPES[entry.st_dtype][1]
    if dtype is None:
        kind = "complex numbers" if entry.st_dtype.startswith("C") else "a packed sub-byte type"
        raise LoadError(
            f"tensor '{info.name}' in {shown} has dtype {entry.st_dtype} ({kind}), which "
            "cannot be loaded here"
        )
    check_size(info.name, info.shape, result_itemsize(dtype), limits)
    try:
        with safetensors.safe_open(str(file.path), framework="pt", device="cpu") as handle:
            tensor = handle.get_tensor(info.name)
    except Exception as err:  # the library's errors are not one type
        raise LoadError(f"{shown}: could not read tensor '{info.name}': {short(err)}") from err
    return finish(tensor, info.name, info.dtype, limits)


def _entries(file: RegularFile, shown: str) -> tuple[_Entry, ...]:
    """Validate the file (steps 1-4 of the module docstring) and list its tensors."""
    header, data_len = read_header(file, shown)
    try:
        with safetensors.safe_open(str(file.path), framework="pt", device="cpu") as handle:
            specs = {n: handle.get_slice(n) for n in handle.keys()}  # noqa: SIM118
            listed = [(n, tuple(s.get_shape()), s.get_dtype()) for n, s in specs.items()]
    except safetensors.SafetensorError as err:
        raise LoadError(explain(header, data_len, shown, err)) from err
    except OSError as err:
        raise LoadError(f"cannot read {shown}: {err.strerror or short(err)}") from err
    entries = []
    for name, shape, st_dtype in listed:
        if len(shape) > MAX_DIMS:
            raise LoadError(
                f"{shown}: tensor {brief(name)} has {len(shape)} dimensions; at most "
                f"{MAX_DIMS} are supported"
            )
        entries.append(_Entry(TensorInfo(name, shape, _dtype_name(st_dtype)), st_dtype))
    return tuple(sorted(entries, key=lambda e: natural_key(e.info.name)))


# ---------------------------------------------------------------------------------------
# Why the library refused a header: the first entry or byte range at fault, in words
