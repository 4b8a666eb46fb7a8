"""One tensor of a quantized file as the pages use it: its values for every page, and for
the explorer what the file stores, against the original when there is one.

The explorer's maps work on a ``[R, C]`` matrix (``sources.values.to_2d_view``: a 1-D
tensor is one row, an N-D one ``[shape[0], rest]``); a stored tensor is brought to the same
matrix (``as_matrix``), which keeps its blocks for the per-group layouts every file format
uses (groups run along the last dimension, which stays whole inside a row).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from dashboard.services.display.bits import bits_text
from dashboard.services.display.labels import stored_type_label
from dashboard.services.display.sizes import compact_bytes
from dashboard.services.explorer.explore import Exploration, explore
from dashboard.services.sources.choice import FolderSource, ModelSource, UploadSource
from dashboard.services.sources.prepared import PreparedSource
from quant_core import PerGroup, PerTensor, QuantizedTensor, StorageReport, SuperBlockScales
from quant_core.files import (
    FileComparison,
    FileKind,
    QuantizedFile,
    StoredTensor,
    TensorEntry,
    compare_with_original,
)
from quant_core.granularity import layout_for

__all__ = [
    "FileExploration",
    "FileTensor",
    "as_matrix",
    "entry_label",
    "extra_bytes_note",
    "file_exploration",
    "fits_matrix",
    "matrix_shape",
    "source_tensor_name",
]


def entry_label(entry: TensorEntry) -> str:
    """A picker's line: ``"blk.0.attn_q.weight  Q4_K [4096, 4096] 9.4 MB"`` (selectbox
    options show text as it is)."""
    return f"{entry.name}  {entry.type_name} {list(entry.shape)} {compact_bytes(entry.nbytes, 1)}"


def source_tensor_name(source: PreparedSource) -> str | None:
    """The name of ``source``'s tensor as its file or checkpoint holds it (a quantized
    file's entry, a checkpoint's tensor picked), recorded in the explorer's export so that
    it is matched with its original by name; ``None`` for values with no name (synthetic,
    typed, an example) or a link that named none."""
    if source.file_tensor is not None:
        return source.file_tensor.entry.name
    if isinstance(source.choice, FolderSource | ModelSource | UploadSource):
        return source.choice.tensor
    return None


@dataclass(frozen=True, eq=False)
class FileTensor:
    """Tensor ``stored`` of the quantized ``file``."""

    file: QuantizedFile
    stored: StoredTensor

    @property
    def entry(self) -> TensorEntry:
        return self.stored.entry

    def notes(self) -> tuple[str, ...]:
        """What the page says about where the values come from."""
        e = self.entry
        lines = [
            f"{self.file.kind.label}: {stored_type_label(e.type_name)}, "
            f"{compact_bytes(e.nbytes, 1)} for "
            f"{e.numel:,} values, {bits_text(e.bits_per_weight)} bits per weight as stored."
        ]
        if not e.quantized:
            lines.append(
                f"Stored unquantized ({e.type_name}): its values are shown, to quantize under "
                "any scheme."
            )
        elif self.stored.quantized is None:
            lines.append(
                f"The lab does not decode {e.type_name}'s codes and scales: the values the file "
                "dequantizes to are shown instead."
            )
        return (*lines, *self.stored.notes)


_EXTRA_TENSORS = {
    FileKind.GPTQ: "its g_idx (32 bits per input column)",
    FileKind.BITSANDBYTES: "bitsandbytes' quant maps and quant state",
    FileKind.COMPRESSED_TENSORS: "its weight_shape tensor",
}


def extra_bytes_note(
    entry: TensorEntry, modelled: StorageReport, kind: FileKind | None = None
) -> str | None:
    """What the file spends beyond the codes and scales the lab models (``modelled``: the
    storage of the stored tensor's exploration), or ``None`` when nothing: a GPTQ file's
    ``g_idx``, bitsandbytes' quant maps and state, a compressed-tensors shape tensor
    (``kind``: the file's, to name them). Without it "Bits per weight, as stored" (4.204
    for bitsandbytes NF4) and the layout's sum below it (4.127) disagree with no reason
    given."""
    extra = entry.nbytes - modelled.total_bytes
    if extra <= 0 or entry.numel == 0:
        return None
    what = _EXTRA_TENSORS.get(kind, "the format's other tensors") if kind else None
    if kind is FileKind.COMPRESSED_TENSORS and entry.type_name.endswith(" act-order"):
        # its weight_g_idx is most of the extra bytes: "1,040 more … of its weight_shape
        # tensor" named the 16-byte tensor and not the 1,024-byte one
        what = "its weight_g_idx and weight_shape tensors"
    return (
        f"The file's {entry.nbytes:,} bytes are {extra:,} more than the codes and scales "
        f"drawn below ({modelled.total_bytes:,} bytes, "
        f"{bits_text(modelled.bits_per_element)} bits per value): "
        f"{bits_text(8 * extra / entry.numel)} bits per value of "
        f"{what or 'the format’s other tensors'}."
    )


def matrix_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """The explorer's ``[R, C]`` of a stored tensor of ``shape``: one row for a 1-D
    tensor, ``[shape[0], rest]`` for an N-D one (``[3, 8, 64]`` -> ``(3, 512)``)."""
    rows = 1 if len(shape) == 1 else shape[0]
    return rows, math.prod(shape) // rows


def fits_matrix(qt: QuantizedTensor, rows: int, cols: int) -> bool:
    """Whether ``qt``'s blocks survive the reshape to ``[rows, cols]`` (``as_matrix``
    gives a tensor, not ``None``): its own shape, or runs of whole groups along rows of
    ``cols`` values (per tensor, or ``PerGroup`` whose group size divides ``cols``)."""
    shape = tuple(qt.shape)
    if shape == (rows, cols):
        return True
    gran = qt.config.granularity
    if math.prod(shape) != rows * cols or not isinstance(gran, PerGroup | PerTensor):
        return False
    return not (isinstance(gran, PerGroup) and cols % gran.group_size)


def as_matrix(qt: QuantizedTensor, rows: int, cols: int) -> QuantizedTensor | None:
    """``qt`` as a ``[rows, cols]`` tensor of the same blocks (the explorer's matrix of its
    shape), or ``None`` when its granularity does not survive the reshape (``fits_matrix``)."""
    if tuple(qt.shape) == (rows, cols):
        return qt
    if not fits_matrix(qt, rows, cols):
        return None
    gran = qt.config.granularity
    layout = layout_for((rows, cols), gran)
    stored = qt.stored
    if stored is not None:
        sf = qt.config.scale_format
        super_shape = None
        if isinstance(sf, SuperBlockScales):
            super_shape = (rows, cols // sf.super_block)

        def shaped(t: torch.Tensor | None, to: tuple[int, ...] | None) -> torch.Tensor | None:
            return t if t is None or to is None else t.reshape(to)

        stored = replace(
            stored,
            codes=stored.codes.reshape(layout.scale_shape),
            min_codes=shaped(stored.min_codes, layout.scale_shape),
            super_scale=shaped(stored.super_scale, super_shape),
            super_min=shaped(stored.super_min, super_shape),
        )
    return QuantizedTensor(
        codes=qt.codes.reshape(rows, cols),
        scale=qt.scale.reshape(layout.scale_shape),
        zero_point=qt.zero_point.reshape(layout.scale_shape),
        config=qt.config,
        layout=layout,
        input_dtype=qt.input_dtype,
        offset=None if qt.offset is None else qt.offset.reshape(layout.scale_shape),
        stored=stored,
    )


@dataclass(frozen=True, eq=False)
class FileExploration:
    """The explorer's view of one stored tensor.

    ``stored``: the file's quantization as an ``Exploration`` (codes, scales, dequantized
    values; its original the original tensor when given, else the stored values
    themselves, so its error is zero); ``rtn``: the lab's round-to-nearest of the
    original under the same config; ``comparison``: both measured against the original
    (``None`` without one). ``unmodelled``: why there are no codes to show (a type the
    lab does not model, a shape its blocks do not survive), else ``None``."""

    stored: Exploration | None
    rtn: Exploration | None
    comparison: FileComparison | None
    unmodelled: str | None
    order_notes: tuple[str, ...]


def file_exploration(
    ft: FileTensor, original: torch.Tensor | None = None, original_name: str | None = None
) -> FileExploration:
    """The exploration of ``ft``: in the stored order (act-order columns sorted by group,
    llama.cpp's permuted query/key rows), against ``original`` (the original tensor named
    ``original_name``, the file's shape) when given. ``ValueError`` when the original's
    shape differs."""
    stored = ft.stored
    comparison = None
    if original is not None:
        comparison = compare_with_original(
            stored, original, original_name or stored.name, ft.file.metadata
        )
    qt = stored.quantized
    shape = tuple(stored.shape)
    rows, cols = matrix_shape(shape)
    matrix_qt = None if qt is None else as_matrix(qt, rows, cols)
    if qt is not None and matrix_qt is None:
        return FileExploration(
            None,
            None,
            comparison,
            f"the blocks of {qt.config.name} do not fit a matrix view of shape {list(shape)}",
            (),
        )
    if matrix_qt is None:
        why = f"the lab does not model {stored.type_name}: no codes or scales to draw"
        return FileExploration(None, None, comparison, why, ())
    if comparison is not None:
        original_m = comparison.original.reshape(rows, cols)
        notes = comparison.order_note
    else:
        original_m = matrix_qt.dequantize()
        if not bool(torch.isfinite(original_m).all()):
            # a scale stored as NaN or Inf: no exploration of codes whose values are not
            # finite (``explore`` refuses them); said instead of raised
            bad = int((~torch.isfinite(original_m)).sum())
            why = (
                f"{bad:,} of its {original_m.numel():,} stored values are not finite "
                "(a scale stored as NaN or Inf): no codes or scales to draw"
            )
            return FileExploration(None, None, None, why, ())
        notes = ()
        if stored.column_order is not None:
            notes = ("columns sorted by act-order group, as the codes are held",)
    file_exp = explore(original_m, matrix_qt.config, quantized=matrix_qt)
    rtn = None
    if comparison is not None and comparison.rtn is not None:
        rtn_qt = as_matrix(comparison.rtn, rows, cols)
        if rtn_qt is not None:
            rtn = explore(original_m, rtn_qt.config, quantized=rtn_qt)
    return FileExploration(file_exp, rtn, comparison, None, notes)
