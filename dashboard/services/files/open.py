"""Opening quantized files for the pages: a path under the model roots (a ``.gguf`` file,
any part of a split series, a quantized Hugging Face folder) or an upload's bytes, and the
original tensor a stored one is compared with."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import torch

from quant_core.files import (
    QuantizedFile,
    is_quantized_bytes,
    is_quantized_path,
    open_quantized,
    open_quantized_bytes,
)

from ..display.labels import stored_type_label
from ..model.roots import ModelRoots, resolve_in_roots
from .guard import RootsGuard

__all__ = [
    "QuantizedModel",
    "is_quantized_upload",
    "not_float_note",
    "open_path",
    "open_upload",
    "original_tensor",
    "path_key",
    "quantized_path",
]

_LISTED = 10_000
_SUFFIXES = (".gguf", ".safetensors", ".json")


def quantized_path(path: str, roots: ModelRoots) -> bool:
    """Whether ``path`` (inside ``roots``: ``PathRefused`` otherwise) is a quantized file or
    folder (``quant_core.files.is_quantized_path``) rather than a plain checkpoint."""
    target = resolve_in_roots(path, roots)
    return is_quantized_path(target, guard=RootsGuard(roots))


def path_key(path: str, roots: ModelRoots) -> str:
    """A cheap key of what ``open_path`` reads: the roots, the resolved path, and the name,
    size and time of the ``.gguf``/``.safetensors``/``.json`` files of its folder (a split
    series' parts are its siblings). ``PathRefused`` outside the roots."""
    target = resolve_in_roots(path, roots)
    folder = target if target.is_dir() else target.parent
    stats = []
    try:
        entries = sorted(itertools.islice(os.scandir(folder), _LISTED), key=lambda e: e.name)
    except OSError:
        entries = []
    for entry in entries:
        if entry.name.lower().endswith(_SUFFIXES):
            try:
                st = entry.stat()
            except OSError:
                continue
            stats.append(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join([roots.key(), str(target), *stats])


def open_path(path: str, roots: ModelRoots) -> QuantizedFile:
    """The quantized file or folder at ``path``, every file it reads checked against
    ``roots``. ``PathRefused`` / ``QuantizedFileError`` (both ``ValueError``)."""
    target = resolve_in_roots(path, roots)
    return open_quantized(target, guard=RootsGuard(roots))


def is_quantized_upload(filename: str, data: bytes) -> bool:
    """Whether an upload is a quantized file (a ``.gguf``, or a ``.safetensors`` holding
    packed weights or the explorer's export). ``ValueError`` for a corrupt header."""
    return is_quantized_bytes(data, filename)


def open_upload(filename: str, data: bytes) -> QuantizedFile:
    return open_quantized_bytes(data, filename)


def original_tensor(
    qfile: QuantizedFile, name: str, original: QuantizedFile
) -> tuple[str, torch.Tensor] | None:
    """The original's tensor that ``qfile``'s tensor ``name`` was quantized from (same
    name, or GGUF's name mapped back), as float32, with its name; ``None`` when the
    original holds none."""
    match = qfile.original_name(name, {t.name for t in original.tensors})
    if match is None:
        return None
    return match, original.load(match).dequantize()


def not_float_note(original: QuantizedFile, name: str) -> str | None:
    """Why the original's tensor ``name`` is no reference: it is itself stored quantized
    (a ``.gguf`` of Q4_0, a GPTQ folder picked as the original), so the file's error is
    measured against another quantization's values; ``None`` for a float tensor."""
    entry = original.entry(name)
    if not entry.quantized:
        return None
    return (
        f"the original's {name} is itself quantized ({stored_type_label(entry.type_name)}): "
        "the errors are against its dequantized values, not the float weights"
    )


@dataclass(frozen=True)
class QuantizedModel:
    """A quantized file or folder picked on the whole-model page: ``file`` listed, and
    the ``label`` the page shows (its name)."""

    file: QuantizedFile
    label: str

    bundled = False

    @property
    def key(self) -> str:
        return f"quantized:{self.file.key}"
