"""Block reduction of large matrices for display: one module for every heatmap.

A heatmap of more than about 512 x 512 cells costs megabytes of JSON and seconds in the
browser, so large matrices are drawn as an overview whose cells each summarise a block.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

__all__ = ["DEFAULT_MAX_CELLS", "Reduced", "Reduction", "needs_reduction", "reduce_2d"]

DEFAULT_MAX_CELLS = 512 * 512
"""Cells per heatmap: 262,144 float32 values are 1 MB, about 1.4 MB as base64 JSON."""
_BAND_CELLS = 1 << 18
"""Cells ``reduce_2d`` makes float32 (or takes a difference of) at a time, when the matrix
is not float32 or ``minus`` is given (1 MB, cache-sized)."""


class Reduction(enum.Enum):
    """How ``reduce_2d`` summarises a block of cells.

    MEAN: the block's mean; ``[[1, 3], [-2, 2]]`` -> ``1.0``.
    MAX_ABS: the value of largest magnitude, sign kept; ``[[1, 3], [-4, 2]]`` -> ``-4.0``.
    Keeps extremes visible: the right choice for error maps.
    """

    MEAN = "mean"
    MAX_ABS = "max_abs"

    @property
    def label(self) -> str:
        return "mean" if self is Reduction.MEAN else "max |value|"


@dataclass(frozen=True, eq=False)
class Reduced:
    """``values`` (float32): the reduced matrix; cell ``(i, j)`` summarises source rows
    ``i*row_step ..`` and columns ``j*col_step ..`` (edge blocks may be smaller).
    ``source_shape``: the shape before reduction."""

    values: np.ndarray
    row_step: int
    col_step: int
    source_shape: tuple[int, int]
    how: Reduction

    @property
    def is_reduced(self) -> bool:
        return self.row_step > 1 or self.col_step > 1

    def row_starts(self) -> np.ndarray:
        """The source row each reduced row starts at (int32), for axis ticks and hover."""
        return np.arange(self.values.shape[0], dtype=np.int32) * self.row_step

    def col_starts(self) -> np.ndarray:
        return np.arange(self.values.shape[1], dtype=np.int32) * self.col_step

    def row_centres(self) -> np.ndarray:
        """Each reduced row's centre in source coordinates (float32): a cell spans
        ``centre ± step/2``, so lines drawn at source coordinates line up."""
        return (self.row_starts() + (self.row_step - 1) / 2).astype(np.float32)

    def col_centres(self) -> np.ndarray:
        return (self.col_starts() + (self.col_step - 1) / 2).astype(np.float32)

    def note(self) -> str:
        """``""`` when nothing was reduced, else e.g.
        ``"downsampled 4096×4096 → 512×512 (8×8 blocks, max |value|)"``."""
        if not self.is_reduced:
            return ""
        (r, c), (rr, cc) = self.source_shape, self.values.shape
        return (
            f"downsampled {r}×{c} → {rr}×{cc} "
            f"({self.row_step}×{self.col_step} blocks, {self.how.label})"
        )


def needs_reduction(shape: tuple[int, int], max_cells: int = DEFAULT_MAX_CELLS) -> bool:
    """Whether ``reduce_2d`` draws a ``shape`` matrix as blocks (more than ``max_cells``
    cells) rather than cell by cell."""
    rows, cols = shape
    return rows * cols > max_cells


def _steps(rows: int, cols: int, max_cells: int, max_side: int | None) -> tuple[int, int]:
    """The smallest square step ``s`` with ``ceil(rows/s) * ceil(cols/s) <= max_cells``,
    clipped to each dimension (so a long thin matrix is reduced along its length only);
    then each step raised until its side has at most ``max_side`` cells."""
    if rows * cols <= max_cells:
        rs = cs = 1
    else:
        lo, hi = 1, max(rows, cols)
        while lo < hi:
            mid = (lo + hi) // 2
            if math.ceil(rows / mid) * math.ceil(cols / mid) <= max_cells:
                hi = mid
            else:
                lo = mid + 1
        rs, cs = min(lo, rows), min(lo, cols)
    if max_side is not None:
        rs, cs = max(rs, math.ceil(rows / max_side)), max(cs, math.ceil(cols / max_side))
    return rs, cs


def reduce_2d(
    matrix: np.ndarray | torch.Tensor,
    max_cells: int,
    how: Reduction,
    max_side: int | None = None,
    minus: torch.Tensor | None = None,
) -> Reduced:
    """Block-reduce a 2-D matrix (float32, or any real dtype: integer codes are made
    float32 a band of rows at a time) to at most ``max_cells`` cells, as float32.
    ``minus``: a float32 matrix of the same shape; ``matrix - minus`` is reduced, a band at
    a time (the error map without a full-size error matrix).

    Blocks are ``s×s`` with the smallest ``s`` that fits (``s`` clipped to a dimension that
    is shorter). A matrix already small enough comes back unchanged (as float32), steps 1.
    Example: ``4096×4096`` with ``max_cells = 512*512`` -> ``8×8`` blocks, ``512×512``.
    ``max_side``: at most that many cells along each side too (blocks then stop being
    square): ``30522×384`` with ``max_side = 512`` -> ``60×7`` blocks, ``509×55``.
    NaN cells are ignored (a block of NaN stays NaN); an infinity makes its block's mean
    that infinity, and +inf meeting -inf in a block makes it NaN. Pooling kernels do the
    work in one pass (two where a block holds NaN). Raises ``ValueError`` for a matrix that
    is not 2-D and non-empty, or ``max_cells < 1``.
    """
    m = torch.as_tensor(matrix)
    if m.dim() != 2 or m.numel() == 0:
        raise ValueError(f"reduce_2d needs a non-empty 2-D matrix, got shape {tuple(m.shape)}")
    if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
        raise ValueError(f"max_cells must be a positive int, got {max_cells!r}")
    if max_side is not None and (
        isinstance(max_side, bool) or not isinstance(max_side, int) or max_side < 1
    ):
        raise ValueError(f"max_side must be a positive int or None, got {max_side!r}")
    if not isinstance(how, Reduction):
        raise TypeError(f"how must be a Reduction, got {how!r}")
    rows, cols = m.shape
    m = m.detach()
    if minus is not None:
        if not isinstance(minus, torch.Tensor) or minus.dtype != torch.float32:
            got = getattr(minus, "dtype", type(minus).__name__)
            raise TypeError(f"minus must be a float32 tensor, got {got}")
        if tuple(minus.shape) != (rows, cols):
            raise ValueError(f"minus has shape {tuple(minus.shape)}, the matrix {(rows, cols)}")
        minus = minus.detach()

    def part(r: slice) -> torch.Tensor:
        x = m[r].to(torch.float32)
        return x if minus is None else x - minus[r]

    rs, cs = _steps(rows, cols, max_cells, max_side)
    if rs == 1 and cs == 1:
        return Reduced(part(slice(None)).numpy(force=True).copy(), 1, 1, (rows, cols), how)
    if m.dtype == torch.float32 and minus is None:
        out = _pool(m, (rs, cs), how)
    else:
        # Another dtype (the codes, int8) is made float32, and a difference taken, a band
        # of whole block rows at a time: no full-size float matrix (47 MB for the word
        # embeddings, written and read again, and at a first display fresh memory), and
        # blocks never straddle two bands, so the result is the whole matrix's.
        band = rs * max(1, _BAND_CELLS // (rs * cols))
        out = torch.cat(
            [_pool(part(slice(r, r + band)), (rs, cs), how) for r in range(0, rows, band)],
            dim=0,
        )
    values = out.numpy(force=True).astype(np.float32)
    return Reduced(np.ascontiguousarray(values), rs, cs, (rows, cols), how)


def _pool(m: torch.Tensor, kernel: tuple[int, int], how: Reduction) -> torch.Tensor:
    """``[R, C]`` float32 -> ``[ceil(R/kr), ceil(C/kc)]``: each ``kernel`` block's mean or
    largest-magnitude value (see ``reduce_2d``)."""
    grid = m[None, None]
    if how is Reduction.MEAN:
        # ceil_mode averages edge blocks over their in-bounds cells only. A block's mean is
        # NaN only when one of its cells is (or +inf and -inf meet in it): only then is it
        # taken again over its known cells, so a finite matrix costs one pass.
        out = F.avg_pool2d(grid, kernel, ceil_mode=True)
        if bool(torch.isnan(out).any()):
            known = (~torch.isnan(grid)).to(torch.float32)
            # Infinities kept (nan_to_num would clamp them to +-3.4e38 by default).
            finite_or_inf = torch.nan_to_num(grid, nan=0.0, posinf=math.inf, neginf=-math.inf)
            total = F.avg_pool2d(finite_or_inf, kernel, ceil_mode=True)
            share = F.avg_pool2d(known, kernel, ceil_mode=True)
            out = torch.where(share > 0, total / share, float("nan"))
    else:
        mags = torch.nan_to_num(grid.abs(), nan=-1.0)
        best, idx = F.max_pool2d(mags, kernel, ceil_mode=True, return_indices=True)
        out = m.reshape(-1)[idx.reshape(-1)].reshape(best.shape)
        out = torch.where(best < 0, float("nan"), out)
    return out[0, 0]
