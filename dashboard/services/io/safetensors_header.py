"""A ``.safetensors`` header read by hand, for the messages: its length and JSON checked
before anything else is read, and, when the ``safetensors`` library refuses a file, which
entry is wrong and how, in plain words (the library's own messages name offsets)."""

from __future__ import annotations

import json
import math

import torch

from .common import MAX_DIMS, MAX_TENSORS, LoadError, brief, fmt_shape, is_count, short
from .regular import RegularFile, read_at_most

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

_MAX_HEADER = 100_000_000  # the library refuses larger headers; so do we, before reading


def read_header(file: RegularFile, shown: str) -> tuple[dict[str, object], int]:
    """The header's tensor entries (JSON checked) and the data section's length, from the
    opened ``file`` (``regular.open_regular``: its size is the opened file's), reading at
    most 8 bytes and then the header's length, itself at most ``_MAX_HEADER`` bytes."""
    size = file.size
    if size < 8:
        raise LoadError(
            f"{shown} is not a safetensors file: {size} bytes, too short for the "
            "8-byte header length"
        )
    try:
        prefix = read_at_most(file.fd, 8)
        if len(prefix) < 8:  # shrunk since it was opened
            raise LoadError(
                f"{shown} is not a safetensors file: {len(prefix)} bytes, too short for the "
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
        text = read_at_most(file.fd, n, 8)
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


def explain(header: dict[str, object], data_len: int, shown: str, err: Exception) -> str:
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
