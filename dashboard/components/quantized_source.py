"""The tensor picker's branch for quantized files (a ``.gguf``, a GPTQ/AWQ/compressed-
tensors/bitsandbytes folder, the explorer's export), reached through the existing sources:
an upload, or a model folder (or file) on this machine. Every tensor is listed with its
stored type, shape and bytes from the headers; the one picked is decoded alone."""

from __future__ import annotations

from dashboard import cache
from dashboard.components import persist
from dashboard.services.display.labels import stored_type_label
from dashboard.services.display.sizes import compact_bytes
from dashboard.services.files.open import path_key
from dashboard.services.files.tags import option_tag
from dashboard.services.model.roots import ModelRoots
from dashboard.services.sources.choice import FolderSource, SourceChoice, UploadSource
from dashboard.services.sources.prepared import PreparedSource
from quant_core.files import QuantizedFile

__all__ = ["file_source", "quantized_folder_choice", "quantized_upload_choice"]


def _pick(qfile: QuantizedFile, key: str, from_link: bool) -> str:
    """``from_link``: the tensor may have come from a link (a folder's; an upload's never
    does), so a name the file lacks is said, unless the user switched files since."""
    entries = {t.name: t for t in qfile.tensors}
    types = {t.name: stored_type_label(t.type_name) for t in qfile.tensors}
    first = next((t.name for t in qfile.tensors if t.quantized), qfile.tensors[0].name)
    return persist.name_picker(
        # the file's size as the whole model page's caption writes it ("4.37 GB"), not
        # "4,368,439,584 bytes" in a sidebar label
        f"Tensor ({len(entries):,} in {qfile.kind.label}, {compact_bytes(qfile.nbytes, 1)})",
        list(entries),
        key,
        first,
        lambda n: (
            f"{n} · {types[n]} · {list(entries[n].shape)} · "
            f"{compact_bytes(entries[n].nbytes, 1)}"
        ),
        stale=(lambda n: f"Tensor {n!r} is not in this file.") if from_link else None,
        owner=qfile.key,
        # compacted to fit beside the name ("int4 g128 act"): a longer tag was left out
        tag=lambda n: option_tag(types[n]),
    )


def quantized_folder_choice(path: str, roots: ModelRoots) -> tuple[SourceChoice, QuantizedFile]:
    """The quantized file or folder at ``path`` listed, and the tensor picked (``LoadError``
    / ``QuantizedFileError`` for a refused or unreadable one: the caller shows it)."""
    qfile = cache.quantized_folder(path_key(path, roots), path, roots)
    if not qfile.tensors:
        raise ValueError(f"{qfile.name} lists no tensors")
    return FolderSource(path, _pick(qfile, "src_folder_tensor", from_link=True)), qfile


def quantized_upload_choice(file_id: str, filename: str, data: bytes) -> SourceChoice:
    """An uploaded quantized file listed, and the tensor picked."""
    qfile = cache.quantized_upload(file_id, filename, data)
    if not qfile.tensors:
        raise ValueError(f"{filename} lists no tensors")
    return UploadSource(file_id, filename, _pick(qfile, "src_upload_tensor", from_link=False))


def file_source(choice: SourceChoice, qfile: QuantizedFile, label: str) -> PreparedSource:
    """The picked tensor of ``qfile``, decoded and prepared for the pages."""
    name = choice.tensor if isinstance(choice, FolderSource | UploadSource) else None
    if name is None:
        name = qfile.tensors[0].name
    ft = cache.file_tensor(qfile.key, qfile, name)
    return cache.quantized_prepared(f"{qfile.key}|{name}", choice, ft, f"{label} · {name}")
