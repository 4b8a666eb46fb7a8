"""``.safetensors``: the header is parsed and checked here (dtype names, shapes, byte ranges),
so listing costs nothing and only the chosen tensor's bytes are copied. Files on disk are
read with ``safetensors.safe_open`` (memory-mapped, one tensor at a time).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
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

__all__ = ["list_bytes", "list_file", "load_bytes", "load_file_tensor"]

# The safetensors library refuses headers above this size; so do we.
_MAX_SAFETENSORS_HEADER = 100_000_000


def list_bytes(raw: bytes, filename: str, limits: Limits) -> tuple[TensorInfo, ...]:
    """The tensors of an uploaded file, from its header alone."""
    return tuple(entry.info for entry in _parse_safetensors_header(raw, filename))


def load_bytes(raw: bytes, filename: str, name: str | None, limits: Limits) -> LoadedTensor:
    """Tensor ``name`` of an uploaded file: only its byte range is copied."""
    entries = _parse_safetensors_header(raw, filename)
    entry = pick(entries, name, filename, key=lambda e: e.info.name)
    return _safetensors_from_bytes(entry, raw, filename, limits)


def list_file(path: str | Path) -> tuple[TensorInfo, ...]:
    """The tensors in a ``.safetensors`` file on disk, reading only its header."""
    path = Path(path)
    header, data_len = _read_safetensors_file_header(path)
    return tuple(entry.info for entry in _parse_header_json(header, data_len, path.name))


def load_file_tensor(
    path: str | Path, name: str | None = None, limits: Limits = DEFAULT_LIMITS
) -> LoadedTensor:
    """Load one tensor from a ``.safetensors`` file on disk through ``safe_open`` (mmap).

    The header is checked first, and the tensor's size against ``limits``, so a huge model
    costs only the chosen tensor's memory.
    """
    from safetensors import safe_open

    path = Path(path)
    header, data_len = _read_safetensors_file_header(path)
    entries = _parse_header_json(header, data_len, path.name)
    entry = pick(entries, name, path.name, key=lambda e: e.info.name)
    _, dtype = _loadable(entry, path.name)
    check_size(entry.info.name, entry.info.shape, result_itemsize(dtype), limits)
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            tensor = handle.get_tensor(entry.info.name)
    except Exception as err:  # the library's errors are not one type
        raise LoadError(
            f"{path.name}: could not read tensor '{entry.info.name}': {short(err)}"
        ) from err
    return finish(tensor, entry.info.name, entry.info.dtype, limits)


@dataclass(frozen=True)
class _StDtype:
    """A safetensors dtype: display name, bits per element, how to build it (or None)."""

    name: str
    bits: int
    numpy: str | None  # little-endian numpy type of the raw bytes
    torch: torch.dtype | None  # reinterpret those bytes as this torch dtype


_ST_DTYPES: dict[str, _StDtype] = {
    "F64": _StDtype("float64", 64, "<f8", torch.float64),
    "F32": _StDtype("float32", 32, "<f4", torch.float32),
    "F16": _StDtype("float16", 16, "<f2", torch.float16),
    "BF16": _StDtype("bfloat16", 16, "<u2", torch.bfloat16),
    "I64": _StDtype("int64", 64, "<i8", torch.int64),
    "I32": _StDtype("int32", 32, "<i4", torch.int32),
    "I16": _StDtype("int16", 16, "<i2", torch.int16),
    "I8": _StDtype("int8", 8, "i1", torch.int8),
    "U64": _StDtype("uint64", 64, "<u8", torch.uint64),
    "U32": _StDtype("uint32", 32, "<u4", torch.uint32),
    "U16": _StDtype("uint16", 16, "<u2", torch.uint16),
    "U8": _StDtype("uint8", 8, "u1", torch.uint8),
    "BOOL": _StDtype("bool", 8, "u1", torch.bool),
    "F8_E4M3": _StDtype("float8_e4m3fn", 8, "u1", torch.float8_e4m3fn),
    "F8_E5M2": _StDtype("float8_e5m2", 8, "u1", torch.float8_e5m2),
    "F8_E8M0": _StDtype("float8_e8m0fnu", 8, "u1", torch.float8_e8m0fnu),
    # Known to the format but not loadable here.
    "C64": _StDtype("complex64", 64, None, None),
    "F4": _StDtype("F4", 4, None, None),
    "F6_E2M3": _StDtype("F6_E2M3", 6, None, None),
    "F6_E3M2": _StDtype("F6_E3M2", 6, None, None),
}


@dataclass(frozen=True)
class _StEntry:
    info: TensorInfo
    st_dtype: str
    begin: int  # byte offsets into the data section
    end: int


def _parse_safetensors_header(raw: bytes, filename: str) -> tuple[_StEntry, ...]:
    shown = display_name(filename)
    if len(raw) < 8:
        raise LoadError(
            f"{shown} is not a safetensors file: {len(raw)} bytes, too short for the 8-byte "
            "header length"
        )
    header_len = int.from_bytes(raw[:8], "little")
    available = len(raw) - 8
    if header_len > available:
        raise LoadError(
            f"{shown} is truncated or not a safetensors file: its header length says "
            f"{header_len:,} bytes but only {available:,} bytes follow"
        )
    return _parse_header_json(raw[8 : 8 + header_len], available - header_len, filename)


def _read_safetensors_file_header(path: Path) -> tuple[bytes, int]:
    """Read only the JSON header of a file on disk; also the size of its data section."""
    shown = display_name(path.name)
    if path.suffix.lower() != ".safetensors":
        raise LoadError(f"{shown} is not a .safetensors file")
    try:
        with path.open("rb") as handle:
            size = path.stat().st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise LoadError(
                    f"{shown} is not a safetensors file: {size} bytes, too short for the "
                    "8-byte header length"
                )
            header_len = int.from_bytes(prefix, "little")
            if header_len > size - 8:
                raise LoadError(
                    f"{shown} is truncated or not a safetensors file: its header length says "
                    f"{header_len:,} bytes but only {size - 8:,} bytes follow"
                )
            if header_len > _MAX_SAFETENSORS_HEADER:
                raise LoadError(
                    f"{shown}: header of {header_len:,} bytes is over the "
                    f"{_MAX_SAFETENSORS_HEADER:,}-byte limit"
                )
            header = handle.read(header_len)
    except OSError as err:
        raise LoadError(f"cannot read {shown}: {err.strerror or short(err)}") from err
    return header, size - 8 - header_len


def _reject_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise LoadError(f"the header names {brief(key)} twice")
        out[key] = value
    return out


def _parse_header_json(header: bytes, data_len: int, filename: str) -> tuple[_StEntry, ...]:
    """Validate a safetensors header against a data section of ``data_len`` bytes."""
    shown = display_name(filename)
    if len(header) > _MAX_SAFETENSORS_HEADER:
        raise LoadError(
            f"{shown}: header of {len(header):,} bytes is over the "
            f"{_MAX_SAFETENSORS_HEADER:,}-byte limit"
        )
    try:
        text = header.decode("utf-8")
        parsed = json.loads(text, object_pairs_hook=_reject_duplicates)
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
    entries = [_parse_entry(name, spec, shown) for name, spec in parsed.items()]
    _check_layout(entries, data_len, shown)
    return tuple(sorted(entries, key=lambda e: _natural_key(e.info.name)))


def _parse_entry(name: str, spec: object, shown: str) -> _StEntry:
    where = f"{shown}: tensor {brief(name)}"
    if not isinstance(spec, dict) or not {"dtype", "shape", "data_offsets"} <= spec.keys():
        raise LoadError(f"{where}: needs 'dtype', 'shape' and 'data_offsets' in the header")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _ST_DTYPES:
        raise LoadError(
            f"{where} has unknown dtype {brief(dtype)}; known: " + ", ".join(sorted(_ST_DTYPES))
        )
    if not isinstance(shape, list) or not all(is_count(d) for d in shape):
        raise LoadError(f"{where}: shape {brief(shape)} must be a list of non-negative integers")
    if len(shape) > MAX_DIMS:
        raise LoadError(f"{where} has {len(shape)} dimensions; at most {MAX_DIMS} are supported")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(is_count(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise LoadError(
            f"{where}: data_offsets {brief(offsets)} must be [begin, end], 0 <= begin <= end"
        )
    shape_t = tuple(shape)
    bits = math.prod(shape_t) * _ST_DTYPES[dtype].bits
    if bits % 8:
        raise LoadError(f"{where}: shape {fmt_shape(shape_t)} of {dtype} is not whole bytes")
    begin, end = offsets
    if end - begin != bits // 8:
        raise LoadError(
            f"{where}: shape {fmt_shape(shape_t)} of {dtype} needs {bits // 8:,} bytes but "
            f"data_offsets [{begin}, {end}] span {end - begin:,}"
        )
    return _StEntry(TensorInfo(name, shape_t, _ST_DTYPES[dtype].name), dtype, begin, end)


def _check_layout(entries: list[_StEntry], data_len: int, shown: str) -> None:
    """Tensors must tile the data section exactly: no overlap, no gap, nothing past the end."""
    position = 0
    previous = None
    for entry in sorted(entries, key=lambda e: (e.begin, e.end)):
        if entry.end > data_len:
            raise LoadError(
                f"{shown} is truncated: tensor {brief(entry.info.name)} ends at byte "
                f"{entry.end:,} of the data but the file holds {data_len:,} data bytes"
            )
        if entry.begin < position:
            raise LoadError(
                f"{shown} is corrupt: tensors {brief(previous)} and {brief(entry.info.name)} "
                f"overlap (bytes {entry.begin:,}-{position:,})"
            )
        if entry.begin > position:
            raise LoadError(
                f"{shown} is corrupt: {entry.begin - position:,} unused bytes before tensor "
                f"{brief(entry.info.name)}"
            )
        position = entry.end
        previous = entry.info.name
    if position != data_len:
        raise LoadError(
            f"{shown} is corrupt: its tensors cover {position:,} bytes but the file holds "
            f"{data_len:,} data bytes"
        )


def _natural_key(name: str) -> list[tuple[int, int, str]]:
    """``layers.2`` before ``layers.10`` (digit runs compared by length, then text)."""
    key = []
    for part in re.split(r"(\d+)", name):
        if part.isdecimal():
            digits = part.lstrip("0")
            key.append((0, len(digits), digits))
        else:
            key.append((1, 0, part))
    return key


def _loadable(entry: _StEntry, filename: str) -> tuple[str, torch.dtype]:
    """The numpy type of ``entry``'s raw bytes and the torch dtype they hold, or LoadError."""
    spec = _ST_DTYPES[entry.st_dtype]
    if spec.numpy is None or spec.torch is None:
        kind = "complex numbers" if entry.st_dtype.startswith("C") else "a packed sub-byte type"
        raise LoadError(
            f"tensor '{entry.info.name}' in {display_name(filename)} has dtype {entry.st_dtype} "
            f"({kind}), which cannot be loaded here"
        )
    return spec.numpy, spec.torch


def _safetensors_from_bytes(
    entry: _StEntry, raw: bytes, filename: str, limits: Limits
) -> LoadedTensor:
    """Build only ``entry``'s tensor from its byte slice of an uploaded file."""
    raw_type, dtype = _loadable(entry, filename)
    info = entry.info
    check_size(info.name, info.shape, result_itemsize(dtype), limits)
    data_start = 8 + int.from_bytes(raw[:8], "little")
    chunk = bytearray(memoryview(raw)[data_start + entry.begin : data_start + entry.end])
    array = np.frombuffer(chunk, dtype=raw_type)
    array = array.astype(array.dtype.newbyteorder("="), copy=False)  # no copy on x86/ARM
    tensor = torch.from_numpy(array)
    if dtype == torch.bool:
        tensor = tensor != 0
    elif tensor.dtype != dtype:
        tensor = tensor.view(dtype)
    return finish(tensor.reshape(info.shape), info.name, info.dtype, limits)
