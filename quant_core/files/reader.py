"""``open_quantized(path)``: the quantized file or folder a user downloaded, listed from
its headers, one tensor loaded at a time.

What opens (``FileKind``):

- a ``.gguf`` file, or any part of a split series ``<name>-0000i-of-0000N.gguf``, or a
  folder holding one GGUF model;
- a Hugging Face folder (or one of its ``.safetensors`` files, or its index) quantized by
  GPTQ, AWQ, compressed-tensors ``pack-quantized`` or bitsandbytes 4-bit, or not quantized
  at all (an original to compare with);
- the explorer's own ``.safetensors`` export.

``open_quantized_bytes(data, filename)`` opens an upload (one ``.gguf`` or
``.safetensors`` file) the same way, in memory.

Nothing is read outside what the ``guard`` allows (``AllowedRoots``, or a server's own
rule); only regular files are opened; every header size is bounded before anything is
allocated, and a tensor over ``max_elements`` values is refused before its bytes are read.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .access import (
    UNRESTRICTED,
    FileLocation,
    MemoryLocation,
    PathGuard,
    QuantizedFileError,
    describe,
    open_blob,
    reopen,
)
from .entries import FileKind, StoredTensor, TensorEntry, TypeShare
from .gguf_file import SPLIT_RE, GGUFSource, open_gguf
from .gguf_header import read_header as read_gguf_header
from .hf_config import read_spec
from .hf_folder import SafetensorsSource, open_folder
from .hf_layouts import find_layers
from .lab_export import is_lab_export
from .safetensors_header import STHeader
from .safetensors_header import read_header as read_st_header

__all__ = [
    "DEFAULT_MAX_ELEMENTS",
    "QuantizedFile",
    "is_quantized_bytes",
    "is_quantized_path",
    "open_quantized",
    "open_quantized_bytes",
]

DEFAULT_MAX_ELEMENTS = 2**28
"""The most values one loaded tensor may have (a 16384 x 16384 matrix)."""
_MAX_LISTED = 20_000  # folder entries looked at


@dataclass(frozen=True, eq=False)
class QuantizedFile:
    """A quantized file or folder, listed from its headers.

    ``kind``: whose layout; ``name``: the file's or folder's name; ``tensors``: every
    tensor (``TensorEntry``: name, stored type, shape, bytes), in natural name order;
    ``metadata``: GGUF's key-value metadata (long arrays summarised), a safetensors file's
    ``__metadata__``; ``notes``: what the reader chose or assumed; ``key``: changes when
    any of the files does (for caches).
    """

    kind: FileKind
    name: str
    tensors: tuple[TensorEntry, ...]
    metadata: MappingProxyType[str, Any]
    notes: tuple[str, ...]
    key: str
    _source: GGUFSource | SafetensorsSource = field(repr=False)
    _by_name: dict[str, TensorEntry] = field(repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._by_name.update({t.name: t for t in self.tensors})

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def numel(self) -> int:
        return sum(t.numel for t in self.tensors)

    def entry(self, name: str) -> TensorEntry:
        """The entry named ``name``; ``QuantizedFileError`` naming the file otherwise."""
        found = self._by_name.get(name)
        if found is None:
            shown = ", ".join(repr(t.name) for t in self.tensors[:3])
            raise QuantizedFileError(
                f"{self.name} has no tensor named {name[:200]!r}; it holds {len(self.tensors):,}"
                + (f" ({shown}, …)" if self.tensors else "")
            )
        return found

    def load(self, name: str, *, max_elements: int = DEFAULT_MAX_ELEMENTS) -> StoredTensor:
        """Tensor ``name`` decoded (``StoredTensor``: the lab's ``QuantizedTensor`` of what
        is stored, or the values of a type the lab does not model). Refused before any of
        its bytes are read when it holds more than ``max_elements`` values."""
        entry = self.entry(name)
        if isinstance(max_elements, bool) or not isinstance(max_elements, int) or max_elements < 1:
            raise ValueError(f"max_elements must be a positive int, got {max_elements!r}")
        if entry.numel > max_elements:
            raise QuantizedFileError(
                f"{entry.file}: tensor {name!r} has {entry.numel:,} values (shape "
                f"{list(entry.shape)}); the limit is {max_elements:,}"
            )
        return self._source.load(entry)

    def mix(self) -> tuple[TypeShare, ...]:
        """Bytes per stored type, most bytes first: what a file's name (``Q4_K_M``) means."""
        groups: dict[str, list[TensorEntry]] = defaultdict(list)
        for t in self.tensors:
            groups[t.type_name].append(t)
        shares = [
            TypeShare(k, len(v), sum(t.numel for t in v), sum(t.nbytes for t in v))
            for k, v in groups.items()
        ]
        return tuple(sorted(shares, key=lambda s: (-s.nbytes, s.type_name)))

    def original_name(self, name: str, available: Collection[str]) -> str | None:
        """The name tensor ``name`` has among ``available`` (an original's tensor names):
        its own, else the first of its ``original_names`` (GGUF's names mapped back to
        Hugging Face's) found there, else the first of those with Hugging Face's
        ``model.`` prefix added or taken off (``model.layers.0.mlp.up_proj.weight`` in a
        GPTQ folder, ``layers.0.mlp.up_proj.weight`` in a checkpoint saved from the
        inner model); ``None`` when none is."""
        entry = self.entry(name)
        candidates = (entry.name, *entry.original_names)
        for candidate in (*candidates, *map(_other_prefix, candidates)):
            if candidate in available:
                return candidate
        return None


_MODEL_PREFIX = "model."


def _other_prefix(name: str) -> str:
    """``name`` with Hugging Face's ``model.`` prefix taken off, or added when it has none:
    a causal LM's state dict holds ``model.layers...`` beside ``lm_head``, its inner
    model's ``layers...``; which one a checkpoint was saved from is the writer's choice."""
    if name.startswith(_MODEL_PREFIX):
        return name[len(_MODEL_PREFIX) :]
    return _MODEL_PREFIX + name


def _file_key(locations: Collection[FileLocation]) -> str:
    return "|".join(f"{loc.path}:{loc.size}:{loc.mtime_ns}" for loc in locations)


def open_quantized(
    path: str | os.PathLike[str],
    *,
    guard: PathGuard | None = None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> QuantizedFile:
    """The quantized file or folder at ``path`` (see the module docstring), listed from
    its headers. ``guard`` decides which paths may be read (``None``: any). Raises
    ``QuantizedFileError`` (a ``ValueError``) naming the file, the tensor and the problem:
    a path refused or missing, a truncated file, a bad magic number, offsets past the end,
    shapes that disagree with the bytes, an unknown quantization config or packing."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or a path, got {type(path).__name__}")
    guard = UNRESTRICTED if guard is None else guard
    if not isinstance(guard, PathGuard):
        raise TypeError(f"guard must have a check(path) method, got {type(guard).__name__}")
    text = os.fspath(path)
    if not text.strip() or "\0" in text:
        raise QuantizedFileError(f"{text[:80]!r} is not a path")
    target = guard.check(Path(text).expanduser())
    if not target.exists():
        raise QuantizedFileError(f"{target} does not exist")
    if target.is_dir():
        gguf_model = _folder_gguf(target, guard)
        if gguf_model is not None:
            target = gguf_model
    elif not target.is_file():
        raise QuantizedFileError(
            f"{target.name} is {describe(target)}, not a regular file; it is not read"
        )
    if target.is_file() and target.suffix.lower() == ".gguf":
        source, notes = open_gguf(target, guard)
        key = _file_key([p for p in source.parts if isinstance(p, FileLocation)])
        # a series is named by its first part, whichever part was given: opened from its
        # second part, the explorer read "m-00002-of-00002.gguf · blk.0.ffn_up.weight" for
        # a tensor of the first, and the folder's own name depended on the part typed
        name = source.parts[0].shown if len(source.parts) > 1 else target.name
        return QuantizedFile(
            FileKind.GGUF, name, source.entries, source.metadata, notes, key, source
        )
    if target.is_file() and target.suffix.lower() not in (".safetensors", ".json"):
        raise QuantizedFileError(
            f"{target.name} is neither a .gguf nor a .safetensors file (nor a folder of them)"
        )
    st_source, notes = open_folder(target, guard, max_elements)
    key = _file_key([p for p in st_source.shards.values() if isinstance(p, FileLocation)])
    return _from_safetensors(target.name, st_source, notes, key)


def _from_safetensors(
    name: str, source: SafetensorsSource, notes: tuple[str, ...], key: str
) -> QuantizedFile:
    spec = source.spec
    more = () if spec is None else (f"quantization settings from {spec.source}",)
    return QuantizedFile(
        source.kind,
        name,
        source.entries,
        MappingProxyType(source.metadata),
        (*notes, *more),
        key,
        source,
    )


def _folder_gguf(folder: Path, guard: PathGuard) -> Path | None:
    """The one GGUF model of a folder holding ``.gguf`` files and no ``.safetensors``
    (the first part of a split series); ``None`` when it holds no ``.gguf`` file."""
    try:
        names = sorted(
            entry.name
            for _, entry in zip(range(_MAX_LISTED), os.scandir(folder), strict=False)
            if entry.name.lower().endswith((".gguf", ".safetensors"))
        )
    except OSError as err:
        raise QuantizedFileError(f"cannot list {folder.name}: {err.strerror or err}") from err
    if any(n.lower().endswith(".safetensors") for n in names) or not names:
        return None
    models: dict[str, str] = {}
    for n in names:
        m = SPLIT_RE.match(n)
        # a split series is one model, opened from any of its parts (sorted: the first)
        models.setdefault(f"{m['stem']}-of-{m['n']}" if m else n, n)
    if len(models) > 1:
        shown = ", ".join(sorted(models.values())[:4]) + (", …" if len(models) > 4 else "")
        raise QuantizedFileError(
            f"{folder.name} holds {len(models)} GGUF models ({shown}): give the path of the "
            "one to open"
        )
    return guard.check(folder / next(iter(models.values())))


def open_quantized_bytes(
    data: bytes | bytearray | memoryview,
    filename: str,
    *,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> QuantizedFile:
    """An uploaded ``.gguf`` or ``.safetensors`` file's bytes, opened as ``open_quantized``
    opens a file. A lone ``.safetensors`` file has no ``config.json`` beside it: its
    layout is recognised from its tensors (bitsandbytes' quant states say everything;
    GPTQ's bits come from ``g_idx`` and v1 zero points are assumed, said in the notes)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    if not isinstance(filename, str):
        raise TypeError(f"filename must be a str, got {type(filename).__name__}")
    raw = bytes(data)
    shown = Path(filename).name or "upload"
    location = MemoryLocation(raw, shown)
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    key = f"upload:{shown}:{len(raw)}:{digest}"
    suffix = Path(shown).suffix.lower()
    if suffix == ".gguf":
        with reopen(location, UNRESTRICTED) as blob:
            header = read_gguf_header(blob)
        source = GGUFSource((location,), (header,), UNRESTRICTED)
        return QuantizedFile(FileKind.GGUF, shown, source.entries, source.metadata, (), key, source)
    if suffix != ".safetensors":
        raise QuantizedFileError(f"{shown} is neither a .gguf nor a .safetensors file")
    with reopen(location, UNRESTRICTED) as blob:
        st_header = read_st_header(blob)
    st_source = SafetensorsSource(
        {shown: location}, {shown: st_header}, None, UNRESTRICTED, max_elements
    )
    return _from_safetensors(shown, st_source, (), key)


def _quantized_header(header: STHeader) -> bool:
    layers, _ = find_layers(set(header.entries))
    return bool(layers) or is_lab_export(header)


def is_quantized_path(path: str | os.PathLike[str], *, guard: PathGuard | None = None) -> bool:
    """Whether ``path`` is a quantized file or folder (what ``open_quantized`` is for, as
    opposed to a plain float checkpoint): a ``.gguf`` file or a folder of them, a folder
    whose ``config.json`` names a ``quantization_config`` (or holding AutoGPTQ's
    ``quantize_config.json`` or AutoAWQ's ``quant_config.json``), a ``.safetensors`` file
    in such a folder or whose header holds packed weights or the explorer's export.
    Cheap: names, one config file and at most one header are read."""
    guard = UNRESTRICTED if guard is None else guard
    target = guard.check(Path(os.fspath(path)).expanduser())
    if target.is_file():
        if target.suffix.lower() == ".gguf":
            return True
        if target.suffix.lower() != ".safetensors":
            return False
        if read_spec(target.parent, guard) is not None:
            return True
        with open_blob(target, guard) as blob:
            return _quantized_header(read_st_header(blob))
    if not target.is_dir():
        return False
    if _folder_gguf(target, guard) is not None:
        return True
    return read_spec(target, guard) is not None


def is_quantized_bytes(data: bytes | bytearray | memoryview, filename: str) -> bool:
    """Whether an upload is a quantized file: a ``.gguf``, or a ``.safetensors`` whose
    header holds packed weights or the explorer's export (its header is read, bounded)."""
    suffix = Path(filename).suffix.lower()
    if suffix == ".gguf":
        return True
    if suffix != ".safetensors":
        return False
    with reopen(MemoryLocation(bytes(data), Path(filename).name), UNRESTRICTED) as blob:
        return _quantized_header(read_st_header(blob))
