"""A ``.safetensors`` header for the float loader: its length and JSON checked before
anything else is read (``quant_core.files.safetensors_header.parse_header``, the quantized
reader's own parse and bounds, its errors as ``LoadError``), and, when the ``safetensors``
library refuses a file, which entry is wrong and how, in plain words (the library's own
messages name offsets)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from quant_core.files.access import Blob, QuantizedFileError
from quant_core.files.safetensors_header import parse_header

from .common import MAX_DIMS, LoadError, brief, fmt_shape, is_count, short
from .regular import RegularFile

__all__ = ["DTYPES", "explain", "read_header"]

# Every dtype the library knows: bits per element, and the torch dtype it loads as (None:
# listed but not loadable here).
DTYPES: dict[str, tuple[int, torch.dtype | None]] = {
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


def read_header(file: RegularFile, shown: str) -> tuple[Mapping[str, object], int]:
    """The header's tensor entries (JSON parsed and bounded by ``quant_core``'s
    ``parse_header``: length, duplicate names, object and tensor counts, ``__metadata__``)
    and the data section's length, from the opened ``file`` (``regular.open_regular``: its
    size is the opened file's); ``LoadError`` with the same words."""
    try:
        raw = parse_header(Blob(shown, file.size, fd=file.fd))
    except QuantizedFileError as err:
        raise LoadError(str(err)) from err
    except OSError as err:
        raise LoadError(f"cannot read {shown}: {err.strerror or short(err)}") from err
    return raw.specs, raw.data_len


def explain(header: Mapping[str, object], data_len: int, shown: str, err: Exception) -> str:
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
    if not isinstance(dtype, str) or dtype not in DTYPES:
        return f" has unknown dtype {brief(dtype)}; known: " + ", ".join(sorted(DTYPES))
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
    bits = math.prod(shape) * DTYPES[dtype][0]
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
