"""The explorer page's computation: quantize a 2-D matrix and measure what happened.

Everything the page shows derives from one ``Exploration``; the page caches it keyed on the
source and the ``QuantConfig``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import torch

from quant_core import (
    BlockRange,
    ClipStats,
    ErrorMetrics,
    QuantConfig,
    QuantizedTensor,
    Recipe,
    StorageReport,
    clip_stats,
    code_counts,
    error_metrics,
    quantize,
    storage_cost,
)

from ..sources.values import fill_nonfinite

__all__ = [
    "Exploration",
    "block_cells",
    "block_ids",
    "block_label",
    "block_of",
    "block_values",
    "explore",
]


@dataclass(frozen=True, eq=False)
class Exploration:
    """A ``[R, C]`` matrix quantized under ``config``.

    ``original``: the matrix as given (non-finite cells kept, for display); ``dequantized``
    and ``error = original - dequantized`` (NaN where the original is not finite);
    ``finite``: the finite-cell mask, or ``None`` when every cell is finite. ``metrics`` and
    ``clip`` cover finite cells only; ``value_min``/``value_max``: the finite values' range.
    ``scheme_label``: how the page and the exports name the scheme when ``config`` does not
    say it all (a research format, an algorithm; ``describe()`` falls back to
    ``config.describe()``); ``storage_note``: what is stored besides the codes when
    ``storage`` is not ``storage_cost(shape, config)``'s (empty otherwise).
    """

    original: torch.Tensor
    qt: QuantizedTensor
    dequantized: torch.Tensor
    finite: torch.Tensor | None
    metrics: ErrorMetrics
    storage: StorageReport
    clip: ClipStats
    levels_used: int
    value_min: float
    value_max: float
    scheme_label: str = ""
    storage_note: str = ""

    def describe(self) -> str:
        """The scheme's name: ``scheme_label``, else ``config.describe()``."""
        return self.scheme_label or self.config.name

    @functools.cached_property
    def error(self) -> torch.Tensor:
        """``original - dequantized`` (NaN at non-finite cells), computed on first use: a
        mean overview and the zoom window do not need the whole map."""
        return self.original - self.dequantized

    def error_window(self, rows: slice, cols: slice) -> torch.Tensor:
        """``error[rows, cols]`` without computing the whole map."""
        return self.original[rows, cols] - self.dequantized[rows, cols]

    @property
    def config(self) -> QuantConfig:
        return self.qt.config

    @property
    def n_blocks(self) -> int:
        return self.qt.n_blocks


def explore(
    matrix: torch.Tensor,
    cfg: QuantConfig,
    *,
    ranges: BlockRange | None = None,
    quantized: QuantizedTensor | None = None,
    out: torch.Tensor | None = None,
) -> Exploration:
    """Quantize ``matrix`` (``[R, C]`` float) under ``cfg``.

    ``out``: a float32 ``[R, C]`` buffer for the dequantized matrix
    (``QuantizedTensor.dequantize(out=)``; a ``BufferPool``'s), else a new one is made.

    ``ranges``: static ranges (``ActivationRanges.ranges``, calibrated on other data) passed
    to ``quantize``; values beyond them clip and ``clip`` counts them. ``None``: the
    ranges come from ``matrix`` itself.

    ``quantized``: a ``QuantizedTensor`` of ``matrix`` already made under ``cfg`` by another
    algorithm (``quantize_weight(...).quantized`` of GPTQ, AWQ or HQQ); it is used instead
    of round-to-nearest, and every metric, count and storage figure is measured on it the
    same way. It needs a finite matrix and no ``ranges``; ``ValueError`` when its shape or
    config differ from ``matrix``'s and ``cfg``.

    NaN/Inf cells are quantized as a stand-in inside their block's finite range (so they
    stretch no scale; see ``fill_nonfinite``), left out of the metrics and clipping counts,
    and shown as NaN in ``original``, ``dequantized`` and ``error``. Raises ``ValueError``
    when nothing is finite or ``cfg`` does not fit the shape.
    """
    if matrix.dim() != 2:
        raise ValueError(f"explore expects a 2-D matrix, got shape {tuple(matrix.shape)}")
    original = matrix.to(torch.float32)
    lo, hi = torch.aminmax(original)
    finite = None
    work = original
    if not (bool(torch.isfinite(lo)) and bool(torch.isfinite(hi))):
        if quantized is not None:
            raise ValueError("a precomputed quantization needs a finite matrix")
        filled = fill_nonfinite(original, cfg.granularity)
        work, finite = filled.tensor, filled.finite_mask
        lo, hi = torch.aminmax(work)  # the fills lie inside the finite range
    if quantized is None:
        # Only real values choose the ranges; the stand-ins are quantized but set no scale.
        # llama.cpp's recipe takes no mask (its quantizers see every value, as llama.cpp
        # does): the stand-ins, inside each block's finite range, leave the legacy types'
        # extremes as they were, and enter the K-quants' weighted scale search as values.
        mask = finite if cfg.recipe is Recipe.LAB else None
        qt = quantize(work, cfg, range_mask=mask, ranges=ranges)
    else:
        _check_precomputed(quantized, matrix, cfg, ranges)
        qt = quantized
    dequantized = qt.dequantize(out=out)
    # Clipping, saturation and levels count real values only: a stand-in is replaced by its
    # own dequantized value (representable by construction) and its code is not counted.
    counts = code_counts(qt, mask=finite)
    clip_x = work if finite is None else torch.where(finite, work, dequantized)
    stats = clip_stats(clip_x, qt, counts)
    if finite is not None:
        stats = replace(stats, n_elements=int(finite.sum()))
    if finite is not None:
        nan = torch.tensor(float("nan"))
        metrics = _metrics(work[finite], dequantized[finite])
        original = torch.where(finite, original, nan)
        dequantized = torch.where(finite, dequantized, nan)
    else:
        metrics = _metrics(work, dequantized)
    return Exploration(
        original=original,
        qt=qt,
        dequantized=dequantized,
        finite=finite,
        metrics=metrics,
        storage=storage_cost(tuple(matrix.shape), cfg),
        clip=stats,
        levels_used=int(torch.count_nonzero(counts)),
        value_min=float(lo),
        value_max=float(hi),
    )


def _metrics(x: torch.Tensor, x_hat: torch.Tensor) -> ErrorMetrics:
    """``error_metrics(x, x_hat)``; where ``x_hat`` is not finite (a block whose stored scale
    overflowed, ``QuantizedTensor.scales_finite``: Q8_0's fp16 ``d`` past 65504 decodes as
    +-inf and NaN, as llama.cpp decodes it), the errors are infinite, the SQNR is -inf dB
    and the cosine is undefined (NaN): the page says why (``scale_limit_note``)."""
    if bool(torch.isfinite(x_hat).all()):
        return error_metrics(x, x_hat)
    inf = math.inf
    return ErrorMetrics(
        mse=inf, rmse=inf, mean_abs=inf, max_abs=inf, sqnr_db=-inf, cosine=math.nan
    )


def _check_precomputed(
    qt: object, matrix: torch.Tensor, cfg: QuantConfig, ranges: BlockRange | None
) -> None:
    if not isinstance(qt, QuantizedTensor):
        raise TypeError(f"quantized must be a QuantizedTensor, got {type(qt).__name__}")
    if ranges is not None:
        raise ValueError("pass either ranges or a precomputed quantization, not both")
    if tuple(qt.shape) != tuple(matrix.shape):
        raise ValueError(
            f"the precomputed quantization has shape {tuple(qt.shape)}, "
            f"the matrix {tuple(matrix.shape)}"
        )
    if qt.config != cfg:
        raise ValueError(
            f"the precomputed quantization is {qt.config.describe()}, not {cfg.describe()}"
        )


def block_cells(exp: Exploration, block: int) -> tuple[int | slice, int | slice]:
    """Index of one block's cells in the ``[R, C]`` matrix (a row, a column, part of a row
    or everything), so a block is read without copying the whole matrix."""
    layout = exp.qt.layout
    if not 0 <= block < layout.n_blocks:
        raise ValueError(f"block {block} out of range: this tensor has {layout.n_blocks} blocks")
    if layout.axis is not None:
        return (block, slice(None)) if layout.axis == 0 else (slice(None), block)
    if layout.n_blocks == 1:
        return slice(None), slice(None)
    if layout.tile is not None:
        (r, c), per_row = layout.tile, layout.shape[1] // layout.tile[1]
        tr, tc = divmod(block, per_row)
        return slice(tr * r, (tr + 1) * r), slice(tc * c, (tc + 1) * c)
    groups_per_row = layout.shape[1] // layout.block_len
    row, g = divmod(block, groups_per_row)
    return row, slice(g * layout.block_len, (g + 1) * layout.block_len)


def block_label(exp: Exploration, block: int) -> str:
    """What block ``block`` is, read off ``block_cells``: ``"Row (channel) 3"``,
    ``"Column (channel) 5"``, ``"Group 7 (row 1, columns 32–63)"`` or ``"Whole tensor"``."""
    rows, cols = block_cells(exp, block)
    if isinstance(cols, int):
        return f"Column (channel) {block}"
    if isinstance(rows, int) and cols == slice(None):
        return f"Row (channel) {block}"
    if isinstance(rows, int):
        return f"Group {block} (row {rows}, columns {cols.start}–{cols.stop - 1})"
    if rows != slice(None):
        return (
            f"Block {block} (rows {rows.start}–{rows.stop - 1}, "
            f"columns {cols.start}–{cols.stop - 1})"
        )
    return "Whole tensor"


def block_values(exp: Exploration, block: int) -> torch.Tensor:
    """The finite original values of one block (1-D, in the block's order)."""
    values = exp.original[block_cells(exp, block)].reshape(-1)
    return values if exp.finite is None else values[torch.isfinite(values)]


def block_ids(exp: Exploration, rows: slice, cols: slice) -> torch.Tensor:
    """The block (scale) index of every cell of the window ``[rows, cols]`` (int64)."""
    layout = exp.qt.layout
    n_rows, n_cols = layout.shape
    r = torch.arange(n_rows)[rows].unsqueeze(1)
    c = torch.arange(n_cols)[cols].unsqueeze(0)
    if layout.axis is not None:
        ids = r if layout.axis == 0 else c
    elif layout.n_blocks == 1:
        ids = torch.zeros_like(r)
    elif layout.tile is not None:
        (tr, tc), per_row = layout.tile, n_cols // layout.tile[1]
        ids = (r // tr) * per_row + c // tc
    else:
        ids = r * (n_cols // layout.block_len) + c // layout.block_len
    return ids.expand(r.shape[0], c.shape[1])


def block_of(exp: Exploration, row: int, col: int) -> int:
    """The block (scale) index of cell ``(row, col)``."""
    layout = exp.qt.layout
    rows, cols = layout.shape
    if not (0 <= row < rows and 0 <= col < cols):
        raise ValueError(f"cell ({row}, {col}) is outside the {rows} x {cols} matrix")
    return int(block_ids(exp, slice(row, row + 1), slice(col, col + 1)))
