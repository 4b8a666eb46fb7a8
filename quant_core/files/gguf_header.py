"""A GGUF file's header, read with every count and length bounded before it is used.

Layout (little-endian; GGUF versions 2 and 3, as llama.cpp's ``gguf`` package reads them):

======================  ===========================================================
``magic``               ``b"GGUF"``
``version``             uint32 (2 or 3)
``tensor_count``        uint64
``kv_count``            uint64
``kv_count`` x          key (string), value type (uint32), value
``tensor_count`` x      name (string), ``n_dims`` (uint32, at most 4), ``n_dims`` x
                        uint64 dimensions (innermost first), type (uint32, ggml type
                        id), offset (uint64, from the data section's start)
padding                 to ``general.alignment`` (32 by default)
data                    each tensor at its offset, ``n / block_size * type_size`` bytes
======================  ===========================================================

A string is a uint64 length and that many UTF-8 bytes; an array a uint32 item type, a
uint64 count and the items. The constants (magic, value types, ggml type ids and their
``GGML_QUANT_SIZES``) are the ``gguf`` package's.

Why not ``gguf.GGUFReader`` itself: it trusts the header's counts. An array that claims
``2^40`` items past the end of a small file makes it append empty reads forever (its
offset stops advancing), and it builds a numpy view per string of a vocabulary. Here every
count is checked against the bytes that remain before anything is read or allocated, long
arrays are skipped (their type and length kept), and the header may take at most
``MAX_HEADER_BYTES``. The tests check that both readers list the same tensors, offsets and
metadata for files written by ``gguf.GGUFWriter``.
"""

from __future__ import annotations

import itertools
import math
import struct
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import gguf

from .access import Blob, QuantizedFileError

__all__ = [
    "MAX_DIMS",
    "MAX_HEADER_BYTES",
    "MAX_KEPT_ITEMS",
    "MAX_KV",
    "MAX_TENSORS",
    "GGUFArray",
    "GGUFHeader",
    "GGUFTensorInfo",
    "ggml_type_name",
    "read_header",
]

MAX_HEADER_BYTES = 512 * 2**20
"""A header (metadata and tensor list) may take at most this many bytes: a 256k-token
vocabulary with its merges takes about 30 MB."""
MAX_TENSORS = 100_000
"""The most tensors a header may list (real files: about 300 to 2,000; 1,000,000 would
take some 25 s and 550 MB to list)."""
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_KEY_BYTES = 65_536
MAX_NESTING = 4
_KEPT_ITEMS = 64  # arrays up to this long keep their values in the metadata
MAX_KV = 65_536
"""The most metadata entries a header may list (real files: under 100). Each is a Python
key and value: a 200 MB upload of 17-byte entries would be 12 million of them, seconds
per million and about 120 MB held per million."""
MAX_KEPT_ITEMS = 65_536
"""The most array items kept in the metadata over the whole header (nested short arrays
would otherwise keep 64^4 items each)."""
MAX_WALKED_ARRAYS = 1 << 16
"""The most arrays nested in metadata arrays that are walked, one Python call each (about
9 s per million; real files nest none)."""
_CHUNK = 1 << 20

_SCALARS: dict[int, tuple[str, int]] = {
    gguf.GGUFValueType.UINT8: ("<B", 1),
    gguf.GGUFValueType.INT8: ("<b", 1),
    gguf.GGUFValueType.UINT16: ("<H", 2),
    gguf.GGUFValueType.INT16: ("<h", 2),
    gguf.GGUFValueType.UINT32: ("<I", 4),
    gguf.GGUFValueType.INT32: ("<i", 4),
    gguf.GGUFValueType.FLOAT32: ("<f", 4),
    gguf.GGUFValueType.BOOL: ("<?", 1),
    gguf.GGUFValueType.UINT64: ("<Q", 8),
    gguf.GGUFValueType.INT64: ("<q", 8),
    gguf.GGUFValueType.FLOAT64: ("<d", 8),
}
_STRING = int(gguf.GGUFValueType.STRING)
_ARRAY = int(gguf.GGUFValueType.ARRAY)


@dataclass(frozen=True)
class GGUFArray:
    """A metadata array: its item type's name, its length, and its items when it is short
    (at most 64 scalars or strings; ``None`` otherwise, e.g. a vocabulary)."""

    item_type: str
    count: int
    values: tuple[Any, ...] | None


@dataclass(frozen=True)
class GGUFTensorInfo:
    """One tensor of the header: ``shape`` in PyTorch's order (the header's dimensions
    reversed), ggml ``type_id`` and its name, ``offset`` of its data from the file's start
    and its ``nbytes``."""

    name: str
    type_id: int
    type_name: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclass(frozen=True)
class GGUFHeader:
    """``version``, ``metadata`` (key to value: scalars, strings, ``GGUFArray``),
    ``tensors`` in header order, the data section's ``alignment`` and ``data_offset``;
    ``value_types``: each metadata value's stored type (a ``gguf.GGUFValueType`` code),
    for keys llama.cpp reads as one type only (``split.no``)."""

    version: int
    metadata: MappingProxyType[str, Any]
    tensors: tuple[GGUFTensorInfo, ...]
    alignment: int
    data_offset: int
    value_types: MappingProxyType[str, int] = field(default_factory=lambda: MappingProxyType({}))


def ggml_type_name(type_id: int) -> str | None:
    """The ``gguf`` package's name of ggml type ``type_id`` (``"Q4_K"``), or ``None``."""
    try:
        return gguf.GGMLQuantizationType(type_id).name
    except ValueError:
        return None


class _Cursor:
    """Reads the header forward from a ``Blob`` in chunks, never past ``limit``."""

    def __init__(self, blob: Blob, limit: int):
        self.blob = blob
        self.limit = min(limit, blob.size)
        self.buf = bytearray()
        self.pos = 0
        self.kept = 0  # array items kept in the metadata so far
        self.walked = 0  # arrays inside arrays walked so far

    def remaining(self) -> int:
        return self.blob.size - self.pos

    def fill(self, end: int, what: str) -> None:
        """Make the buffer hold the header's bytes up to ``end`` (``QuantizedFileError``
        past the file's end or the header limit)."""
        if end > self.blob.size:
            raise QuantizedFileError(
                f"{self.blob.shown}: truncated GGUF header: {what} needs bytes "
                f"{self.pos:,}..{end:,} but the file has {self.blob.size:,}"
            )
        if end > self.limit:
            raise QuantizedFileError(
                f"{self.blob.shown}: the GGUF header runs past {MAX_HEADER_BYTES:,} bytes "
                f"(at {what}); refused"
            )
        if end > len(self.buf):
            want = min(max(end, len(self.buf) + _CHUNK), self.limit)
            self.buf += self.blob.read(len(self.buf), want - len(self.buf), "the header")

    def take(self, n: int, what: str) -> memoryview:
        end = self.pos + n
        self.fill(end, what)
        view = memoryview(self.buf)[self.pos : end]
        self.pos = end
        return view

    def skip_strings(self, count: int, what: str) -> None:
        """Walk ``count`` strings (a vocabulary, its merges) without decoding them: one
        length read per string, the buffer filled as the walk goes."""
        pos, buf, size = self.pos, self.buf, self.blob.size
        unpack = struct.unpack_from
        for _ in range(count):
            if pos + 8 > len(buf):
                self.pos = pos
                self.fill(pos + 8, what)
                buf = self.buf
            pos += 8 + unpack("<Q", buf, pos)[0]
            if pos > size:
                self.pos = pos
                raise QuantizedFileError(
                    f"{self.blob.shown}: {what} holds a string that runs past the end of the "
                    f"file ({size:,} bytes): truncated or a lying header"
                )
        self.fill(pos, what)
        self.pos = pos

    def scalar(self, code: int, what: str) -> Any:
        fmt, size = _SCALARS[code]
        return struct.unpack(fmt, self.take(size, what))[0]

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return struct.unpack("<Q", self.take(8, what))[0]

    def string(self, what: str, limit: int | None = None) -> str:
        n = self.u64(what)
        if n > self.remaining() or (limit is not None and n > limit):
            raise QuantizedFileError(
                f"{self.blob.shown}: {what} claims a string of {n:,} bytes"
                + (
                    f" but only {self.remaining():,} remain in the file"
                    if n > self.remaining()
                    else f" (at most {limit:,})"
                )
            )
        raw = self.take(n, what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as err:
            raise QuantizedFileError(f"{self.blob.shown}: {what} is not UTF-8 ({err})") from None


def _value(cur: _Cursor, code: int, what: str, depth: int = 0, keep: bool = True) -> Any:
    """One metadata value. Arrays keep their items (``keep``) only when short and while
    the header's kept items stay within ``MAX_KEPT_ITEMS``; the others are walked, an
    array of arrays one item at a time, at most ``MAX_WALKED_ARRAYS`` in all."""
    if code in _SCALARS:
        return cur.scalar(code, what)
    if code == _STRING:
        return cur.string(what)
    if code != _ARRAY:
        raise QuantizedFileError(f"{cur.blob.shown}: {what} has unknown value type {code}")
    if depth >= MAX_NESTING:
        raise QuantizedFileError(f"{cur.blob.shown}: {what} nests arrays deeper than {MAX_NESTING}")
    item = cur.u32(what)
    count = cur.u64(what)
    keep = keep and count <= _KEPT_ITEMS and cur.kept + count <= MAX_KEPT_ITEMS
    if keep:
        cur.kept += count
    if item in _SCALARS:
        fmt, size = _SCALARS[item]
        if count * size > cur.remaining():
            raise QuantizedFileError(
                f"{cur.blob.shown}: {what} claims {count:,} items of {size} bytes but only "
                f"{cur.remaining():,} bytes remain in the file"
            )
        raw = cur.take(count * size, what)
        values = struct.unpack(f"<{count}{fmt[1:]}", raw) if keep else None
        return GGUFArray(gguf.GGUFValueType(item).name, count, values)
    if item not in (_STRING, _ARRAY):
        raise QuantizedFileError(f"{cur.blob.shown}: {what} has unknown item type {item}")
    # a string or an array takes at least 8 bytes (its length)
    if count * 8 > cur.remaining():
        raise QuantizedFileError(
            f"{cur.blob.shown}: {what} claims {count:,} items but only {cur.remaining():,} "
            "bytes remain in the file"
        )
    name = gguf.GGUFValueType(item).name
    if item == _ARRAY:
        # each costs a Python call: a 200 MB upload of 12-byte empty arrays would be 17
        # million of them
        cur.walked += count
        if cur.walked > MAX_WALKED_ARRAYS:
            raise QuantizedFileError(
                f"{cur.blob.shown}: {what} nests more than {MAX_WALKED_ARRAYS:,} arrays in "
                "the header; refused"
            )
    if keep:
        return GGUFArray(
            name, count, tuple(_value(cur, item, what, depth + 1) for _ in range(count))
        )
    # walked, not kept (a vocabulary, its merges)
    if item == _STRING:
        cur.skip_strings(count, what)
    else:
        for _ in range(count):
            _value(cur, item, what, depth + 1, keep=False)
    return GGUFArray(name, count, None)


def read_header(blob: Blob) -> GGUFHeader:
    """The header of the GGUF file in ``blob``, checked: magic, version, counts and
    lengths against the file's size, every tensor's type known to the ``gguf`` package,
    its rows whole blocks, its data inside the file at an aligned offset, no two tensors
    sharing bytes or a name. ``QuantizedFileError`` naming the file, tensor and problem."""
    shown = blob.shown
    if blob.size < 24:
        raise QuantizedFileError(
            f"{shown} is not a GGUF file: {blob.size} bytes, too short for the 24-byte header"
        )
    cur = _Cursor(blob, MAX_HEADER_BYTES)
    magic = bytes(cur.take(4, "the magic number"))
    if magic != struct.pack("<I", gguf.GGUF_MAGIC):
        raise QuantizedFileError(
            f"{shown} is not a GGUF file: it starts with {magic!r}, not b'GGUF'"
        )
    version = cur.u32("the version")
    if version & 0xFFFF == 0 and version:
        raise QuantizedFileError(f"{shown} is a big-endian GGUF file; only little-endian is read")
    if version not in (2, 3):
        raise QuantizedFileError(f"{shown}: GGUF version {version} is not read (2 and 3 are)")
    n_tensors = cur.u64("the tensor count")
    n_kv = cur.u64("the metadata count")
    # every metadata entry takes at least 12 bytes, every tensor entry at least 24
    if n_kv * 12 > cur.remaining() or n_tensors * 24 > cur.remaining():
        raise QuantizedFileError(
            f"{shown}: the header claims {n_tensors:,} tensor{'' if n_tensors == 1 else 's'} "
            f"and {n_kv:,} metadata {'entry' if n_kv == 1 else 'entries'}, more than its "
            f"{blob.size:,} bytes can hold: truncated or a lying header"
        )
    if n_tensors > MAX_TENSORS:
        raise QuantizedFileError(
            f"{shown} lists {n_tensors:,} tensors; the limit is {MAX_TENSORS:,}"
        )
    if n_kv > MAX_KV:
        raise QuantizedFileError(
            f"{shown} lists {n_kv:,} metadata entries; the limit is {MAX_KV:,}"
        )
    metadata: dict[str, Any] = {}
    value_types: dict[str, int] = {}
    for i in range(n_kv):
        key = cur.string(f"the key of metadata entry {i + 1:,} of {n_kv:,}", MAX_KEY_BYTES)
        if key in metadata:
            raise QuantizedFileError(f"{shown}: the metadata names {key!r} twice")
        code = cur.u32(f"metadata {key!r}")
        metadata[key] = _value(cur, code, f"metadata {key!r}")
        value_types[key] = code  # a known type: _value refuses the others
    raw_tensors = []
    for i in range(n_tensors):
        # counted from 1, of the header's count: an index from 0 is no page's numbering
        name = cur.string(
            f"the name of tensor {i + 1:,} of the {n_tensors:,} the header lists", MAX_KEY_BYTES
        )
        if not name:  # nothing could name it: listed, picked or mapped to a module
            # a header that lists more tensors than it holds reads the zeros after the
            # last one as a tensor of no name
            raise QuantizedFileError(
                f"{shown}: tensor {i + 1:,} of the {n_tensors:,} the header lists has an "
                "empty name (a header listing more tensors than it holds reads one so)"
            )
        n_dims = cur.u32(f"tensor {name!r}'s dimension count")
        if not 1 <= n_dims <= MAX_DIMS:
            raise QuantizedFileError(
                f"{shown}: tensor {name!r} has {n_dims} dimensions (1 to {MAX_DIMS} are valid)"
            )
        dims = tuple(cur.u64(f"tensor {name!r}'s dimensions") for _ in range(n_dims))
        type_id = cur.u32(f"tensor {name!r}'s type")
        offset = cur.u64(f"tensor {name!r}'s offset")
        raw_tensors.append((name, dims, type_id, offset))
    alignment = metadata.get("general.alignment", gguf.GGUF_DEFAULT_ALIGNMENT)
    if (
        isinstance(alignment, bool)  # a BOOL value: True would pass as 1
        or not isinstance(alignment, int)
        or alignment <= 0
        or alignment & (alignment - 1)
    ):
        raise QuantizedFileError(
            f"{shown}: general.alignment {alignment!r} is not a positive power of two"
        )
    data_offset = -(-cur.pos // alignment) * alignment
    tensors = tuple(_tensor(shown, blob.size, data_offset, alignment, *t) for t in raw_tensors)
    _check_disjoint(shown, tensors)
    return GGUFHeader(
        version,
        MappingProxyType(metadata),
        tensors,
        alignment,
        data_offset,
        MappingProxyType(value_types),
    )


def _tensor(
    shown: str,
    file_size: int,
    data_offset: int,
    alignment: int,
    name: str,
    dims: tuple[int, ...],
    type_id: int,
    offset: int,
) -> GGUFTensorInfo:
    type_name = ggml_type_name(type_id)
    if type_name is None:
        raise QuantizedFileError(f"{shown}: tensor {name!r} has unknown ggml type id {type_id}")
    block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)]
    if min(dims) < 1:
        raise QuantizedFileError(f"{shown}: tensor {name!r} has an empty dimension {list(dims)}")
    numel = math.prod(dims)
    if dims[0] % block:
        raise QuantizedFileError(
            f"{shown}: tensor {name!r} is {type_name}, stored in blocks of {block} values, but "
            f"its rows hold {dims[0]} values"
        )
    nbytes = numel // block * type_size
    if offset % alignment:
        raise QuantizedFileError(
            f"{shown}: tensor {name!r} starts at data offset {offset:,}, not a multiple of the "
            f"alignment {alignment}"
        )
    start = data_offset + offset
    if start + nbytes > file_size:
        raise QuantizedFileError(
            f"{shown}: tensor {name!r} ({type_name}, shape {list(reversed(dims))}: {nbytes:,} "
            f"bytes at byte {start:,}) ends past the end of the file ({file_size:,} bytes): "
            "truncated or a lying header"
        )
    return GGUFTensorInfo(name, type_id, type_name, tuple(reversed(dims)), start, nbytes)


def _check_disjoint(shown: str, tensors: tuple[GGUFTensorInfo, ...]) -> None:
    seen: set[str] = set()
    for t in tensors:
        if t.name in seen:
            raise QuantizedFileError(f"{shown}: the header lists tensor {t.name!r} twice")
        seen.add(t.name)
    spans = sorted((t.offset, t.offset + t.nbytes, t.name) for t in tensors if t.nbytes)
    for (_, end, first), (begin, _, second) in itertools.pairwise(spans):
        if begin < end:
            raise QuantizedFileError(
                f"{shown}: tensors {first!r} and {second!r} share bytes {begin:,}..{end:,}"
            )
