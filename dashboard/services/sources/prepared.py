"""A loaded tensor made ready for the pages: a 2-D view, its dtype, notes, and where it is
not finite."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from .choice import SourceChoice
from .values import NonFiniteSummary, nonfinite_summary, to_2d_view

if TYPE_CHECKING:
    from ..files.tensor import FileTensor

__all__ = ["PreparedSource", "prepare", "prepare_file"]


@dataclass(frozen=True, eq=False)
class PreparedSource:
    """``matrix``: the ``[R, C]`` float32 view the pages quantize; ``nonfinite`` says where
    it holds NaN/Inf (``None`` when every value is finite). ``key`` names the source for
    caches. ``file_tensor``: the quantized file's tensor the values come from (what the file
    stores, for the explorer), or ``None``."""

    choice: SourceChoice
    key: str
    label: str
    matrix: torch.Tensor
    original_shape: tuple[int, ...]
    dtype_label: str
    notes: tuple[str, ...]
    nonfinite: NonFiniteSummary | None
    file_tensor: FileTensor | None = None


def prepare(
    choice: SourceChoice, tensor: torch.Tensor, label: str, notes: tuple[str, ...] = ()
) -> PreparedSource:
    """Make ``tensor`` (any float dtype, >= 1-D) ready to show; raises ``ValueError`` for a
    tensor that cannot be shown (0-d, empty, nothing finite)."""
    view = to_2d_view(tensor)
    all_notes = list(notes)
    if view.note:
        all_notes.append(view.note)
    if tensor.dtype != torch.float32:
        all_notes.append(
            f"Loaded as {str(tensor.dtype).removeprefix('torch.')}; shown and quantized from "
            "its exact float32 values."
        )
    summary = nonfinite_summary(view.matrix)
    if summary.n_finite == 0:
        raise ValueError(f"nothing to show: {summary.describe()}")
    return PreparedSource(
        choice=choice,
        key=repr(choice),
        label=label,
        matrix=view.matrix.contiguous(),
        original_shape=tuple(tensor.shape),
        dtype_label=str(tensor.dtype).removeprefix("torch."),
        notes=tuple(all_notes),
        nonfinite=None if summary.all_finite else summary,
    )


def prepare_file(choice: SourceChoice, ft: FileTensor, label: str, key: str) -> PreparedSource:
    """The values of a quantized file's tensor (``ft``: as stored, dequantized, in the
    file's shape and column order) ready to show, carrying ``ft`` itself."""
    prepared = prepare(choice, ft.stored.dequantize(), label, ft.notes())
    return replace(prepared, key=key, file_tensor=ft)
