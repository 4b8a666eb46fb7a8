"""Prepare loaded values for the page: non-finite cells, quantizing finite values, 2-D views.

    summary = nonfinite_summary(x)           # counts, first positions, mask of NaN/Inf cells
    prepared = fill_nonfinite(x, PerGroup(32))
    qt = quantize(prepared.tensor, cfg)      # NaN/Inf cells hold an in-range stand-in value
    # metrics on prepared.finite_mask cells only; draw the other cells distinctly
    view = to_2d_view(x)                     # [64, 3, 7, 7] -> [64, 147] with a note

Errors are ``ValueError`` with a message to show (``LoadError`` is a ``ValueError`` too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from quant_core import Granularity, PerTensor, layout_for

__all__ = [
    "FilledTensor",
    "NonFiniteSummary",
    "View2D",
    "fill_nonfinite",
    "nonfinite_summary",
    "to_2d_view",
]

_MAX_POSITIONS = 10
_CHUNK = 1 << 20  # elements scanned at a time when looking for the first positions


@dataclass(frozen=True)
class NonFiniteSummary:
    """Where a tensor holds NaN or ±Inf.

    ``mask``: bool, the tensor's shape, True at the NaN/Inf cells (``~mask`` is the finite
    cells; a read-only expanded ``False`` when every value is finite).
    ``first_positions``: up to 10 of them in row-major order, each a full index
    (``(row, col)`` for a matrix).
    """

    n_nan: int
    n_inf: int
    n_total: int
    first_positions: tuple[tuple[int, ...], ...]
    mask: torch.Tensor

    @property
    def n_nonfinite(self) -> int:
        return self.n_nan + self.n_inf

    @property
    def n_finite(self) -> int:
        return self.n_total - self.n_nonfinite

    @property
    def all_finite(self) -> bool:
        return self.n_nonfinite == 0

    def describe(self) -> str:
        """``"2 NaN and 1 Inf among 1,000 values, first at (0, 3), (4, 1), (9, 9)"``."""
        if self.all_finite:
            return f"all {self.n_total:,} values are finite"
        shown = ", ".join(_fmt_index(p) for p in self.first_positions)
        more = ", …" if self.n_nonfinite > len(self.first_positions) else ""
        return (
            f"{self.n_nan:,} NaN and {self.n_inf:,} Inf among {self.n_total:,} values, "
            f"first at {shown}{more}"
        )


def nonfinite_summary(x: torch.Tensor) -> NonFiniteSummary:
    """Count NaN and ±Inf in ``x`` and find the first few (integer tensors: none)."""
    _check_tensor(x)
    x = x.detach()
    if x.dtype.is_floating_point and x.numel():
        # One reading pass, no tensor-sized temporaries: a NaN anywhere makes both extremes
        # NaN, an Inf is an extreme. The full scan below (four passes and two bool tensors)
        # took 0.4 s of a first display of MiniLM's 11.7M word embeddings.
        lo, hi = torch.aminmax(x)
        if math.isfinite(float(lo)) and math.isfinite(float(hi)):
            # An all-False mask as one expanded value: a full-size one would be allocated
            # (11.7 MB of fresh memory for the word embeddings) only to be dropped.
            none = torch.zeros((), dtype=torch.bool).expand(x.shape)
            return NonFiniteSummary(0, 0, x.numel(), (), none)
    mask = ~torch.isfinite(x)
    n_nan = int(torch.isnan(x).sum()) if x.dtype.is_floating_point else 0
    n_bad = int(mask.sum())
    positions: list[tuple[int, ...]] = []
    if n_bad:
        flat = mask.reshape(-1)
        for start in range(0, flat.numel(), _CHUNK):
            hits = (
                flat[start : start + _CHUNK].nonzero().flatten()[: _MAX_POSITIONS - len(positions)]
            )
            positions.extend(_unravel(start + int(i), tuple(x.shape)) for i in hits)
            if len(positions) == _MAX_POSITIONS:
                break
    return NonFiniteSummary(n_nan, n_bad - n_nan, x.numel(), tuple(positions), mask)


@dataclass(frozen=True)
class FilledTensor:
    """``tensor``: ``x`` with each NaN/Inf cell replaced by a finite stand-in (same dtype).

    The stand-in for a cell is 0 clamped into the finite range of the cell's block (the
    values sharing its scale under the granularity given), so no block's min, max or
    absolute max changes: a block with finite values in ``[2.0, 5.0]`` gets 2.0, one in
    ``[-1.0, 3.0]`` gets 0.0; a block with no finite value gets 0. ``finite_mask`` is True
    at the cells that were finite: compute metrics there only.
    """

    tensor: torch.Tensor
    finite_mask: torch.Tensor
    n_filled: int


def fill_nonfinite(x: torch.Tensor, granularity: Granularity | None = None) -> FilledTensor:
    """Make ``x`` quantizable by replacing NaN/Inf with in-range values; see ``FilledTensor``.

    ``granularity`` (default ``PerTensor()``) should be the one the page quantizes with, so
    the stand-ins stay inside every block's range. Raises ``ValueError`` when no value is
    finite, or when ``granularity`` does not fit ``x``'s shape.
    """
    _check_tensor(x)
    x = x.detach()
    finite = torch.isfinite(x)
    n_filled = x.numel() - int(finite.sum())
    if n_filled == 0:
        return FilledTensor(x, finite, 0)
    if n_filled == x.numel():
        raise ValueError(
            f"all {x.numel():,} values are NaN or Inf; there is nothing finite to quantize"
        )
    layout = layout_for(tuple(x.shape), granularity or PerTensor())
    blocks = layout.to_blocks(x)
    finite_blocks = layout.to_blocks(finite)
    inf = torch.tensor(math.inf, dtype=x.dtype)
    lo = torch.where(finite_blocks, blocks, inf).amin(dim=1)
    hi = torch.where(finite_blocks, blocks, -inf).amax(dim=1)
    zero = torch.zeros((), dtype=x.dtype)
    fill = torch.where(lo <= hi, torch.minimum(torch.maximum(zero, lo), hi), zero)
    filled = torch.where(finite_blocks, blocks, fill.unsqueeze(1))
    return FilledTensor(layout.from_blocks(filled).contiguous(), finite, n_filled)


@dataclass(frozen=True)
class View2D:
    """A matrix view of a tensor for heatmaps: float32 ``[R, C]``.

    1-D ``[N]`` becomes ``[1, N]``; 2-D is kept; an n-D ``[d0, d1, ...]`` becomes
    ``[d0, d1 * ...]`` (for a conv weight, one row per output channel). ``note`` says what
    was reshaped, or is ``""``. float64 values beyond float32's range show as ±inf.
    """

    matrix: torch.Tensor
    original_shape: tuple[int, ...]
    note: str


def to_2d_view(x: torch.Tensor) -> View2D:
    """Reshape ``x`` to a float32 matrix; raises ``ValueError`` for a 0-d or empty tensor."""
    _check_tensor(x)
    shape = tuple(int(d) for d in x.shape)
    if x.dim() == 0:
        raise ValueError("a 0-d tensor (a single number) has no rows or columns to show")
    if x.numel() == 0:
        raise ValueError(f"the tensor is empty (shape {_fmt_shape(shape)}); nothing to show")
    if x.dim() == 1:
        rows, cols = 1, shape[0]
        note = f"1-D tensor {_fmt_shape(shape)} shown as [1, {cols}]"
    elif x.dim() == 2:
        rows, cols = shape
        note = ""
    else:
        rows, cols = shape[0], math.prod(shape[1:])
        note = f"{x.dim()}-D tensor {_fmt_shape(shape)} shown as [{rows}, {cols}]"
    matrix = x.detach().reshape(rows, cols).to(torch.float32)
    return View2D(matrix, shape, note)


def _check_tensor(x: object) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.is_complex():
        raise ValueError(f"complex tensors ({x.dtype}) are not supported")


def _unravel(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for dim in reversed(shape):
        flat_index, i = divmod(flat_index, dim)
        index.append(i)
    return tuple(reversed(index))


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _fmt_index(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(i) for i in index) + ")" if len(index) != 1 else f"({index[0]})"
