"""A ``.safetensors`` file's header read with its size bounded, and one tensor's bytes.

Layout: an 8-byte little-endian header length ``n``, ``n`` bytes of JSON (``{name:
{"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {text: text}}``), then
the data; each tensor's bytes are ``[begin, end)`` of the data, and the tensors tile the
data exactly (the ``safetensors`` library refuses anything else, and so does this reader).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from types import MappingProxyType

import torch

from .access import Blob, QuantizedFileError

__all__ = [
    "DTYPES",
    "MAX_HEADER_BYTES",
    "RawHeader",
    "STEntry",
    "STHeader",
    "parse_header",
    "read_header",
    "read_tensor",
]

MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
MAX_TENSORS = 100_000
"""The most tensors one file may list (real shards: a few thousand). Each costs about
60 us of Python and 900 bytes held: 1,000,000 (a 70 MB header) took over a minute."""
MAX_METADATA = 65_536
"""The most ``__metadata__`` entries (real files: a handful; 2,000,000 took 12 s and held
360 MB)."""
MAX_DIMS = 8
MAX_STRINGS = 5 * MAX_TENSORS + 2 * MAX_METADATA + 1
"""The most JSON strings a real header within the caps holds: per tensor its name, the
keys ``dtype``, ``shape``, ``data_offsets`` and the dtype's value; per metadata entry its
key and text; ``"__metadata__"``. A header that provably holds more (``_string_count``)
is refused before it is parsed."""

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U64": torch.uint64,
    "U32": torch.uint32,
    "U16": torch.uint16,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "F8_E8M0": torch.float8_e8m0fnu,
}
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16"})


@dataclass(frozen=True)
class STEntry:
    """One tensor of the header: ``dtype`` (the file's spelling), ``shape``, and its bytes
    ``[start, start + nbytes)`` from the file's start."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class STHeader:
    entries: MappingProxyType[str, STEntry]
    metadata: MappingProxyType[str, str]


class _Objects:
    """``json.loads``' object hook: refuses a key named twice, and stops the parse once
    more JSON objects than a header of ``MAX_TENSORS`` tensors holds were built (one per
    tensor, the metadata, the header), before the whole header is in memory."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, pairs: list[tuple[str, object]]) -> dict[str, object]:
        self.count += 1
        if self.count > MAX_TENSORS + 2 or len(pairs) > MAX_TENSORS + MAX_METADATA:
            raise QuantizedFileError(
                f"it holds more than {MAX_TENSORS + 2:,} JSON objects or an object of over "
                f"{MAX_TENSORS + MAX_METADATA:,} keys; a header lists at most {MAX_TENSORS:,} "
                "tensors"
            )
        out: dict[str, object] = {}
        for key, value in pairs:
            if key in out:
                raise QuantizedFileError(f"the header names {key[:200]!r} twice")
            out[key] = value
        return out


def _string_count(text: bytes) -> int:
    """The number of strings in the JSON ``text``, from byte counts (``bytes.count`` and
    ``bytes.replace``: C, about 20 ms for 26 MB of keys, 70 ms for 21 MB of keys that all
    end in a backslash), exact for valid JSON and so never above its true count.

    Every ``"`` byte of valid JSON is a string's opening quote, its closing quote, or an
    escaped quote ``\\"`` inside it (UTF-8 never puts the byte 0x22 or 0x5C inside a
    multi-byte character, and ``\\u0022`` is six other bytes). A quote is escaped exactly
    when an odd run of backslashes precedes it: backslashes stand only inside strings,
    where each escapes the byte after it. Dropping the escaped backslashes ``\\\\`` pair
    by pair from the left leaves one backslash before each escaped quote and none before
    the others (the closing quote of ``"a\\\\"``), so the string count is half the
    quotes not then preceded by a backslash. Text that is not valid JSON is refused by the
    parse anyway."""
    if b"\\" not in text:  # real headers: no backslash at all
        return (text.count(b'"') + 1) // 2
    escaped = text.replace(b"\\\\", b"").count(b'\\"')
    return (text.count(b'"') - escaped + 1) // 2


def _count(v: object) -> bool:
    """A size or offset: a non-negative integer below ``2^64`` (a ``usize``, as the
    safetensors library parses it). Larger ones are refused before they are multiplied:
    eight dimensions of 4,000 digits made a product Python refuses to print (over 4,300
    digits), a ``ValueError`` naming no file."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64


@dataclass(frozen=True)
class RawHeader:
    """A header's JSON parsed within the bounds, its entries not yet checked: ``specs``
    (tensor name -> the entry as parsed), ``metadata`` (text -> text) and the data section,
    bytes ``[data_start, data_start + data_len)`` of the file. The dashboard's float loader
    checks the entries through the ``safetensors`` library; ``read_header`` here itself."""

    specs: MappingProxyType[str, object]
    metadata: MappingProxyType[str, str]
    data_start: int
    data_len: int


def parse_header(blob: Blob) -> RawHeader:
    """The header of the safetensors file in ``blob`` parsed, reading the 8-byte length
    and then at most ``MAX_HEADER_BYTES``: no more strings than ``MAX_STRINGS`` (counted
    before the parse, ``_string_count``), JSON, no key named twice, a parse stopped once
    more objects than ``MAX_TENSORS`` tensors need are built, ``__metadata__`` text -> text
    of at most ``MAX_METADATA`` entries, at most ``MAX_TENSORS`` tensors.
    ``QuantizedFileError`` naming the file (``blob.shown``) and the problem."""
    shown = blob.shown
    if blob.size < 8:
        raise QuantizedFileError(
            f"{shown} is not a safetensors file: {blob.size} bytes, too short for the 8-byte "
            "header length"
        )
    n = int.from_bytes(blob.read(0, 8), "little")
    over = f"over the {MAX_HEADER_BYTES:,}-byte limit"
    if n > blob.size - 8:
        raise QuantizedFileError(
            f"{shown} is truncated or not a safetensors file: its header length says {n:,} "
            f"bytes but only {blob.size - 8:,} bytes follow"
            + (f" (and {n:,} is {over})" if n > MAX_HEADER_BYTES else "")
        )
    if n > MAX_HEADER_BYTES:
        raise QuantizedFileError(f"{shown}: a header of {n:,} bytes is {over}")
    text = blob.read(8, n)
    # ``_Objects`` sees an object only once it is complete: one object of 2,000,000 keys
    # (26 MB) took 1.4 s to build before it was refused, twice the largest real header (the
    # 100,000-tensor cap). Its keys are strings, and no real header holds that many.
    strings = _string_count(text)
    if strings > MAX_STRINGS:
        raise QuantizedFileError(
            f"{shown}: corrupt safetensors header: it holds at least {strings:,} JSON strings; "
            f"{MAX_TENSORS:,} tensors and {MAX_METADATA:,} metadata entries take at most "
            f"{MAX_STRINGS:,}"
        )
    try:
        parsed = json.loads(text.decode("utf-8"), object_pairs_hook=_Objects())
    except QuantizedFileError as err:
        raise QuantizedFileError(f"{shown}: corrupt safetensors header: {err}") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise QuantizedFileError(
            f"{shown} is corrupt or not a safetensors file: its header is not valid JSON "
            f"({str(err)[:120]})"
        ) from None
    if not isinstance(parsed, dict):
        raise QuantizedFileError(f"{shown}: corrupt safetensors header: a JSON object was expected")
    # Absent or null: no metadata (the library's ``Option``); any other non-object (``0``,
    # ``""``, ``[]``) is refused, as the library refuses it, not read as empty.
    metadata = parsed.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise QuantizedFileError(
            f"{shown}: corrupt safetensors header: __metadata__ must map text to text"
        )
    if len(metadata) > MAX_METADATA:
        raise QuantizedFileError(
            f"{shown}: __metadata__ holds {len(metadata):,} entries; the limit is {MAX_METADATA:,}"
        )
    if len(parsed) > MAX_TENSORS:
        raise QuantizedFileError(
            f"{shown} lists {len(parsed):,} tensors; the limit is {MAX_TENSORS:,}"
        )
    return RawHeader(MappingProxyType(parsed), MappingProxyType(metadata), 8 + n, blob.size - 8 - n)


def read_header(blob: Blob) -> STHeader:
    """The checked header of the safetensors file in ``blob`` (``parse_header``, then each
    entry and the tiling of the data); ``QuantizedFileError`` naming the file, the tensor
    and the problem."""
    shown = blob.shown
    raw = parse_header(blob)
    data_start, data_len = raw.data_start, raw.data_len
    entries: dict[str, STEntry] = {}
    for name, spec in raw.specs.items():
        entries[name] = _entry(shown, name, spec, data_start)
    position = 0
    for e in sorted(entries.values(), key=lambda e: (e.start, e.nbytes)):
        begin = e.start - data_start
        if begin != position:
            problem = (
                "overlaps the tensor before it"
                if begin < position
                else (f"leaves {begin - position:,} unused bytes before it")
            )
            raise QuantizedFileError(f"{shown}: tensor {e.name!r} {problem}: a lying header")
        position = begin + e.nbytes
        if position > data_len:
            raise QuantizedFileError(
                f"{shown}: tensor {e.name!r} ends at data byte {position:,} but the file holds "
                f"{data_len:,}: truncated or a lying header"
            )
    if position != data_len:
        raise QuantizedFileError(
            f"{shown}: the tensors cover {position:,} bytes but the file holds {data_len:,} "
            "data bytes"
        )
    return STHeader(MappingProxyType(entries), raw.metadata)


def _entry(shown: str, name: str, spec: object, data_start: int) -> STEntry:
    where = f"{shown}: tensor {name!r}"
    if not isinstance(spec, dict) or not {"dtype", "shape", "data_offsets"} <= spec.keys():
        raise QuantizedFileError(f"{where} needs 'dtype', 'shape' and 'data_offsets'")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPES:  # a list or an object is unhashable
        raise QuantizedFileError(f"{where} has dtype {str(dtype)[:40]!r}, which is not read here")
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(map(_count, shape)):
        raise QuantizedFileError(f"{where}: shape {str(shape)[:80]} is not a list of sizes")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(map(_count, offsets))
        and offsets[0] <= offsets[1]
    ):
        raise QuantizedFileError(f"{where}: data_offsets {str(offsets)[:80]} is not [begin, end]")
    nbytes = math.prod(shape) * DTYPES[dtype].itemsize
    if offsets[1] - offsets[0] != nbytes:
        raise QuantizedFileError(
            f"{where}: shape {shape} of {dtype} takes {nbytes:,} bytes but data_offsets span "
            f"{offsets[1] - offsets[0]:,}"
        )
    return STEntry(name, dtype, tuple(shape), data_start + offsets[0], nbytes)


def read_tensor(blob: Blob, entry: STEntry) -> torch.Tensor:
    """The tensor ``entry`` of ``blob`` (its own memory, the stored dtype and shape)."""
    raw = bytearray(blob.read(entry.start, entry.nbytes, f"tensor {entry.name!r}"))
    if not raw:
        return torch.empty(entry.shape, dtype=DTYPES[entry.dtype])
    return torch.frombuffer(raw, dtype=DTYPES[entry.dtype]).reshape(entry.shape)
