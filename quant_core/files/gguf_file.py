"""GGUF files (llama.cpp), one file or a split series ``name-00001-of-00003.gguf``: the
tensors from the headers, and one tensor's bytes decoded.

A split series is what ``llama-gguf-split`` writes: every part a whole GGUF file with its
own header (``split.no``, ``split.count``, ``split.tensors.count``), the model's metadata
in the first, the tensors spread over the parts. Opening any part opens the series; every
part must be there and say which it is, as llama.cpp checks (``open_gguf``).

Decoding (``decode``): float types (F32, F16, BF16, F64, the integer types) become their
values; the block types the lab models become its ``QuantizedTensor`` through
``formats.gguf_bytes`` (bit for bit what llama.cpp stores: the tests check the values
against ``gguf.quants.dequantize``), GGUF's own NVFP4 of 64-value blocks included (the
lab's ``NVFP4_GGUF``); any other type (the IQ2/IQ3/IQ1 lattice types) is dequantized by the
``gguf`` package and returned as values with its type named.
"""

from __future__ import annotations

import re
from pathlib import Path

import gguf
import numpy as np
import torch

from ..formats.gguf_bytes import from_ggml_bytes
from ..formats.gguf_types import ggml_types
from .access import Location, PathGuard, QuantizedFileError, locate, reopen
from .entries import StoredTensor, TensorEntry
from .gguf_header import GGUFHeader, GGUFTensorInfo, read_header
from .gguf_names import original_names

__all__ = ["MAX_SPLITS", "GGUFSource", "decode", "open_gguf", "split_parts"]

MAX_SPLITS = 9_999
SPLIT_RE = re.compile(r"^(?P<stem>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$", re.IGNORECASE)

_FLOATS: dict[str, torch.dtype] = {
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F64": torch.float64,
    "I8": torch.int8,
    "I16": torch.int16,
    "I32": torch.int32,
    "I64": torch.int64,
}
# Decoded by formats.gguf_bytes itself; the others of the lab's table need kquant_bytes.
_OWN_BYTES = frozenset(
    {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "Q1_0"}
)


def lab_decodes(type_name: str) -> bool:
    """Whether the lab decodes ``type_name``'s bytes into a ``QuantizedTensor`` here."""
    if type_name in _OWN_BYTES:
        return True
    return type_name in {t.name for t in ggml_types()}


def split_parts(path: Path) -> tuple[Path, ...]:
    """The parts of the split series ``path`` belongs to (``path`` alone when its name is
    not ``<stem>-0000i-of-0000N.gguf``)."""
    m = SPLIT_RE.match(path.name)
    if m is None:
        return (path,)
    n = int(m["n"])
    if not 1 <= n <= MAX_SPLITS or not 1 <= int(m["i"]) <= n:
        raise QuantizedFileError(f"{path.name}: part {int(m['i'])} of {n} is not a split series")
    return tuple(path.with_name(f"{m['stem']}-{k:05d}-of-{n:05d}.gguf") for k in range(1, n + 1))


class GGUFSource:
    """The tensors of a GGUF file or split series, read again from the listed files."""

    def __init__(
        self,
        parts: tuple[Location, ...],
        headers: tuple[GGUFHeader, ...],
        guard: PathGuard,
    ):
        self.parts = parts
        self.headers = headers
        self.guard = guard
        self.metadata = headers[0].metadata
        self._where: dict[str, tuple[int, GGUFTensorInfo]] = {}
        entries = []
        for i, header in enumerate(headers):
            for t in header.tensors:
                if t.name in self._where:
                    first = parts[self._where[t.name][0]].shown
                    raise QuantizedFileError(
                        f"{parts[i].shown}: tensor {t.name!r} is also in {first}"
                    )
                self._where[t.name] = (i, t)
                entries.append(
                    TensorEntry(
                        name=t.name,
                        type_name=t.type_name,
                        shape=t.shape,
                        nbytes=t.nbytes,
                        file=parts[i].shown,
                        quantized=t.type_name not in _FLOATS,
                        original_names=original_names(self.metadata, t.name),
                    )
                )
        self.entries = tuple(entries)

    def load(self, entry: TensorEntry) -> StoredTensor:
        part, info = self._where[entry.name]
        with reopen(self.parts[part], self.guard) as blob:
            raw = blob.read(info.offset, info.nbytes, f"tensor {entry.name!r}")
        return decode(entry, raw)


def decode(entry: TensorEntry, raw: bytes) -> StoredTensor:
    """The ``StoredTensor`` of GGUF bytes ``raw`` of ``entry`` (see the module docstring)."""
    name = entry.type_name
    if name in _FLOATS:
        values = torch.frombuffer(bytearray(raw), dtype=_FLOATS[name]).reshape(entry.shape)
        return StoredTensor(entry, None, values.to(torch.float32))
    if lab_decodes(name):
        try:
            qt = from_ggml_bytes(raw, name, entry.shape)
        except ValueError as err:
            raise QuantizedFileError(f"{entry.file}: tensor {entry.name!r}: {err}") from err
        return StoredTensor(entry, qt)
    qtype = gguf.GGMLQuantizationType[name]
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(-1, entry.shape[-1] // block * type_size)
    try:
        values = gguf.quants.dequantize(rows, qtype)
    except NotImplementedError:
        raise QuantizedFileError(
            f"{entry.file}: tensor {entry.name!r} is {name}, which neither the lab nor the gguf "
            "package decodes"
        ) from None
    note = f"{name} is decoded by the gguf package (gguf.quants.dequantize): " + (
        "the lab does not model its lattice codebooks"
        if name.startswith("IQ") and name not in ("IQ4_NL", "IQ4_XS")
        else f"the lab does not model GGUF's {name} blocks"
    )
    tensor = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).reshape(entry.shape)
    return StoredTensor(entry, None, tensor, notes=(note,))


def open_gguf(path: Path, guard: PathGuard) -> tuple[GGUFSource, tuple[str, ...]]:
    """The GGUF file (or split series) at ``path``, and notes on what was opened.

    A file named like a part (``m-00001-of-00003.gguf``) opens the series when its header
    says it is one (``split.count``/``split.no``, which ``llama-gguf-split`` always
    writes); without them it is read alone when no other part is there (llama.cpp loads
    a file without ``split.count`` as a whole model, whatever its name), and refused when
    there are: parts that do not say so would be joined on their names alone."""
    parts = split_parts(path)
    missing = [p.name for p in parts if not guard.check(p).exists()]
    notes: tuple[str, ...] = ()
    k = int(m["i"]) - 1 if (m := SPLIT_RE.match(path.name)) else 0
    if len(parts) > 1 and parts[k].name not in missing:
        location = locate(parts[k], guard)
        with reopen(location, guard) as blob:
            header = read_header(blob)
        if not _SPLIT_KEYS & header.metadata.keys():
            if len(missing) < len(parts) - 1:
                raise QuantizedFileError(
                    f"{location.shown} is named as part {k + 1} of a series of {len(parts)} "
                    "GGUF files, but its header has no split.no or split.count (which "
                    "llama-gguf-split writes in every part): it is not read as a part"
                )
            notes = (
                f"{location.shown} is named like part {k + 1} of {len(parts)} but its header "
                "says nothing of a split and no other part is here: read as one file, as "
                "llama.cpp reads it",
            )
            return GGUFSource((location,), (header,), guard), notes
    if missing:
        shown = ", ".join(missing[:3]) + (
            f", … ({len(missing)} in all)" if len(missing) > 3 else ""
        )
        raise QuantizedFileError(
            f"{path.name} is part of a series of {len(parts)} GGUF files; missing: {shown}"
        )
    locations: list[Location] = []
    headers: list[GGUFHeader] = []
    for k, part in enumerate(parts):
        location = locate(part, guard)
        with reopen(location, guard) as blob:
            header = read_header(blob)
        _check_split(header, location.shown, k, len(parts))
        locations.append(location)
        headers.append(header)
    if len(parts) > 1:
        _check_split_total(headers[0], locations[0].shown, sum(len(h.tensors) for h in headers))
        notes = (f"a split GGUF: {len(parts)} files",)
    return GGUFSource(tuple(locations), tuple(headers), guard), notes


_SPLIT_KEYS = frozenset({"split.no", "split.count", "split.tensors.count"})


# The types llama-gguf-split writes them in; llama.cpp reads no other (``get_key`` throws
# "wrong type", ``gguf_get_val_u16`` asserts).
_SPLIT_TYPES = {
    "split.no": gguf.GGUFValueType.UINT16,
    "split.count": gguf.GGUFValueType.UINT16,
    "split.tensors.count": gguf.GGUFValueType.INT32,
}


def _split_int(header: GGUFHeader, key: str, shown: str) -> int:
    value = header.metadata.get(key)
    if value is None:
        raise QuantizedFileError(
            f"{shown}: a part of a split GGUF series, but its header has no {key} (which "
            "llama-gguf-split writes and llama.cpp requires)"
        )
    stored, wanted = header.value_types.get(key), _SPLIT_TYPES[key]
    if stored != wanted:
        kind = gguf.GGUFValueType(stored).name if stored is not None else "unknown"
        raise QuantizedFileError(
            f"{shown}: {key} is stored as {kind}; llama.cpp reads it only as {wanted.name}"
        )
    return value


def _check_split(header: GGUFHeader, shown: str, k: int, n: int) -> None:
    """Part ``k`` (from 0) of ``n`` says so, as llama.cpp checks: ``split.no`` in every
    part, ``split.count`` in the first (the others' checked where present)."""
    if n == 1:
        return
    no = _split_int(header, "split.no", shown)
    count = (
        _split_int(header, "split.count", shown) if k == 0 else header.metadata.get("split.count")
    )
    if count is not None and count != n:
        raise QuantizedFileError(f"{shown}: its header says split.count {count}, its name {n}")
    if no != k:
        raise QuantizedFileError(f"{shown}: its header says split.no {no}, its name {k}")


def _check_split_total(first: GGUFHeader, shown: str, found: int) -> None:
    """The first part's ``split.tensors.count`` is the series' tensor count (llama.cpp:
    "corrupted model: N tensors expected but M found")."""
    expected = _split_int(first, "split.tensors.count", shown)
    if expected != found:
        raise QuantizedFileError(
            f"{shown}: split.tensors.count says {expected:,} tensors but the parts hold {found:,}"
        )
