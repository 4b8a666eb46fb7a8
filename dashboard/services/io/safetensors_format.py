"""``.safetensors``: the ``safetensors`` library validates the header and reads the tensors;
this module adds the limits and says in plain words what is wrong with a refused file.

One reader for every ``.safetensors`` file: an upload is written to a private temporary
file and read like a file on disk, through ``safe_open`` (memory-mapped, one tensor at a
time). Listing reads the header only; a tensor's size is checked against ``Limits`` from the
header before ``get_tensor`` allocates it.

Steps, for a file of ``size`` bytes:

1. the 8-byte little-endian header length ``n``: ``8 + n <= size`` and ``n`` at most
   100 MB (the library's own limit);
2. the header is JSON (checked here: duplicate names, ``__metadata__`` of text, at most
   ``MAX_TENSORS`` entries);
3. ``safe_open`` validates dtypes, shapes and byte ranges (tensors tile the data section
   exactly); when it refuses, ``_explain`` names the entry and the problem;
4. at most ``MAX_DIMS`` dimensions per tensor (the library allows more than numpy).
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import safetensors
import torch

from .common import (
    DEFAULT_LIMITS,
    MAX_DIMS,
    MAX_TENSORS,
    Limits,
    LoadedTensor,
    LoadError,
    TensorInfo,
    brief,
    check_size,
    display_name,
    finish,
    fmt_shape,
    is_count,
    pick,
    result_itemsize,
    short,
)

__all__ = [
    "list_bytes",
    "list_file",
    "load_bytes",
    "load_file_tensor",
    "natural_key",
    "open_file",
]

_MAX_HEADER = 100_000_000  # the library refuses larger headers; so do we, before reading

# Every dtype the library knows: bits per element, and the torch dtype it loads as (None:
# listed but not loadable here).
_DTYPES: dict[str, tuple[int, torch.dtype | None]] = {
    "F64": (64, torch.float64),
    "F32": (32, torch.float32),
    "F16": (16, torch.float16),
    "BF16": (16, torch.bfloat16),
    "I64": (64, torch.int64),
    "I32": (32, torch.int32),
    "I16": (16, torch.int16),
    "I8": (8, torch.int8),
    "U64": (64, torch.uint64),
    "U32": (32, torch.uint32),
    "U16": (16, torch.uint16),
    "U8": (8, torch.uint8),
    "BOOL": (8, torch.bool),
    "F8_E4M3": (8, torch.float8_e4m3fn),
    "F8_E5M2": (8, torch.float8_e5m2),
    "F8_E8M0": (8, torch.float8_e8m0fnu),
    "F8_E4M3FNUZ": (8, torch.float8_e4m3fnuz),
    "F8_E5M2FNUZ": (8, torch.float8_e5m2fnuz),
    "C64": (64, None),
    "F4": (4, None),
    "F6_E2M3": (6, None),
    "F6_E3M2": (6, None),
}


def _dtype_name(st_dtype: str) -> str:
    """torch's spelling of a stored dtype (``"F32"`` -> ``"float32"``), else the file's."""
    if st_dtype == "C64":
        return "complex64"
    dtype = _DTYPES.get(st_dtype, (0, None))[1]
    return str(dtype).removeprefix("torch.") if dtype is not None else st_dtype


# ---------------------------------------------------------------------------------------
# Entry points


@dataclass(frozen=True)
class _Entry:
    info: TensorInfo
    st_dtype: str


def list_bytes(raw: bytes, filename: str, limits: Limits) -> tuple[TensorInfo, ...]:
    """The tensors of an uploaded file, from its header alone, in natural name order."""
    with _spooled(raw) as path:
        return tuple(e.info for e in _entries(path, display_name(filename)))


def load_bytes(raw: bytes, filename: str, name: str | None, limits: Limits) -> LoadedTensor:
    """Tensor ``name`` of an uploaded file (``None``: the first listed)."""
    with _spooled(raw) as path:
        return _load(path, display_name(filename), name, limits)


def list_file(path: str | Path) -> tuple[TensorInfo, ...]:
    """The tensors in a ``.safetensors`` file on disk, reading only its header."""
    path = _checked_path(path)
    return tuple(e.info for e in _entries(path, display_name(path.name)))


def load_file_tensor(
    path: str | Path, name: str | None = None, limits: Limits = DEFAULT_LIMITS
) -> LoadedTensor:
    """Load one tensor of a file on disk; a huge model costs only that tensor's memory."""
    path = _checked_path(path)
    return _load(path, display_name(path.name), name, limits)


@contextmanager
def open_file(path: str | Path) -> Iterator[tuple[tuple[TensorInfo, ...], Any]]:
    """``(infos, handle)`` for reading many tensors of one validated file: ``infos`` as
    ``list_file`` gives them, ``handle.get_tensor(name)`` the library's tensor as stored
    (no limit or conversion: the caller picked the tensors from ``infos``)."""
    path = _checked_path(path)
    shown = display_name(path.name)
    infos = tuple(e.info for e in _entries(path, shown))
    try:
        opened = safetensors.safe_open(str(path), framework="pt", device="cpu")
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


def _load(path: Path, shown: str, name: str | None, limits: Limits) -> LoadedTensor:
    entry = pick(_entries(path, shown), name, shown, key=lambda e: e.info.name)
    info = entry.info
    dtype = _DTYPES[entry.st_dtype][1]
    if dtype is None:
        kind = "complex numbers" if entry.st_dtype.startswith("C") else "a packed sub-byte type"
        raise LoadError(
            f"tensor '{info.name}' in {shown} has dtype {entry.st_dtype} ({kind}), which "
            "cannot be loaded here"
        )
    check_size(info.name, info.shape, result_itemsize(dtype), limits)
    try:
        with safetensors.safe_open(str(path), framework="pt", device="cpu") as handle:
            tensor = handle.get_tensor(info.name)
    except Exception as err:  # the library's errors are not one type
        raise LoadError(f"{shown}: could not read tensor '{info.name}': {short(err)}") from err
    return finish(tensor, info.name, info.dtype, limits)


def _entries(path: Path, shown: str) -> tuple[_Entry, ...]:
    """Validate the file (steps 1-4 of the module docstring) and list its tensors."""
    header, data_len = _read_header(path, shown)
    try:
        with safetensors.safe_open(str(path), framework="pt", device="cpu") as handle:
            specs = {n: handle.get_slice(n) for n in handle.keys()}  # noqa: SIM118
            listed = [(n, tuple(s.get_shape()), s.get_dtype()) for n, s in specs.items()]
    except safetensors.SafetensorError as err:
        raise LoadError(_explain(header, data_len, shown, err)) from err
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


def _read_header(path: Path, shown: str) -> tuple[dict[str, object], int]:
    """The header's tensor entries (JSON checked) and the data section's length."""
    try:
        with path.open("rb") as handle:
            size = path.stat().st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise LoadError(
                    f"{shown} is not a safetensors file: {size} bytes, too short for the "
                    "8-byte header length"
                )
            n = int.from_bytes(prefix, "little")
            if n > size - 8:
                raise LoadError(
                    f"{shown} is truncated or not a safetensors file: its header length says "
                    f"{n:,} bytes but only {size - 8:,} bytes follow"
                )
            if n > _MAX_HEADER:
                raise LoadError(f"{shown}: header of {n:,} bytes is over the {_MAX_HEADER:,} limit")
            text = handle.read(n)
    except OSError as err:
        raise LoadError(f"cannot read {shown}: {err.strerror or short(err)}") from err
    try:
        parsed = json.loads(text.decode("utf-8"), object_pairs_hook=_reject_duplicates)
    except LoadError as err:
        raise LoadError(f"{shown}: corrupt safetensors header: {err}") from err
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise LoadError(
            f"{shown} is corrupt or not a safetensors file: its header is not valid JSON "
            f"({short(err, 120)})"
        ) from err
    if not isinstance(parsed, dict):
        raise LoadError(f"{shown}: corrupt safetensors header: a JSON object was expected")
    metadata = parsed.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise LoadError(f"{shown}: corrupt safetensors header: __metadata__ must map text to text")
    if len(parsed) > MAX_TENSORS:
        raise LoadError(f"{shown} lists {len(parsed):,} tensors; the limit is {MAX_TENSORS:,}")
    return parsed, size - 8 - n


def _reject_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise LoadError(f"the header names {brief(key)} twice")
        out[key] = value
    return out


def natural_key(name: str) -> list[tuple[int, int, str]]:
    """``layers.2`` before ``layers.10`` (digit runs compared by length, then text): the
    order tensors, shards and folders are listed in."""
    key = []
    for part in re.split(r"(\d+)", name):
        if part.isdecimal():
            digits = part.lstrip("0")
            key.append((0, len(digits), digits))
        else:
            key.append((1, 0, part))
    return key


# ---------------------------------------------------------------------------------------
# Why the library refused a header: the first entry or byte range at fault, in words


def _explain(header: dict[str, object], data_len: int, shown: str, err: Exception) -> str:
    spans: list[tuple[int, int, str]] = []
    for name, spec in header.items():
        problem = _entry_problem(spec)
        if problem:
            return f"{shown}: tensor {brief(name)}{problem}"
        begin, end = spec["data_offsets"]  # type: ignore[index]
        spans.append((begin, end, name))
    position, previous = 0, None
    for begin, end, name in sorted(spans):
        if end > data_len:
            return (
                f"{shown} is truncated: tensor {brief(name)} ends at byte {end:,} of the "
                f"data but the file holds {data_len:,} data bytes"
            )
        if begin < position:
            return (
                f"{shown} is corrupt: tensors {brief(previous)} and {brief(name)} overlap "
                f"(bytes {begin:,}-{position:,})"
            )
        if begin > position:
            gap = begin - position
            return f"{shown} is corrupt: {gap:,} unused bytes before tensor {brief(name)}"
        position, previous = end, name
    if position != data_len:
        return (
            f"{shown} is corrupt: its tensors cover {position:,} bytes but the file holds "
            f"{data_len:,} data bytes"
        )
    return f"{shown} is not a valid safetensors file: {short(err)}"


def _entry_problem(spec: object) -> str:
    """What is wrong with one header entry (text following its name), or ``""``."""
    if not isinstance(spec, dict) or not {"dtype", "shape", "data_offsets"} <= spec.keys():
        return ": needs 'dtype', 'shape' and 'data_offsets' in the header"
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        return f" has unknown dtype {brief(dtype)}; known: " + ", ".join(sorted(_DTYPES))
    if not isinstance(shape, list) or not all(is_count(d) for d in shape):
        return f": shape {brief(shape)} must be a list of non-negative integers"
    if len(shape) > MAX_DIMS:
        return f" has {len(shape)} dimensions; at most {MAX_DIMS} are supported"
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(is_count(o) for o in offsets)
        and offsets[0] <= offsets[1]
    ):
        return f": data_offsets {brief(offsets)} must be [begin, end], 0 <= begin <= end"
    bits = math.prod(shape) * _DTYPES[dtype][0]
    what = f"shape {fmt_shape(tuple(shape))} of {dtype}"
    if bits % 8:
        return f": {what} is not whole bytes"
    begin, end = offsets
    if end - begin != bits // 8:
        return (
            f": {what} needs {bits // 8:,} bytes but data_offsets [{begin}, {end}] span "
            f"{end - begin:,}"
        )
    return ""
