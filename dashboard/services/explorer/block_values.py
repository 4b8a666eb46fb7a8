"""What a block's original values alone decide, whatever the scheme: their range, where
their minimum and maximum are, and their histogram. Computed once per tensor and block (the
page caches it on the source), so a new bit width or mode does not pass over a
whole-tensor block of 16M values again for the histogram and the worked table."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from quant_core import histogram

from .explore import Exploration, block_values

__all__ = ["BlockValues", "block_value_stats", "extreme_indices", "histogram_bins"]

_ROW = 4096


def histogram_bins(n_values: int) -> int:
    """Bins for a block of ``n_values``: about four values a bin, 10 to 120."""
    return int(min(120, max(10, n_values // 4)))


@dataclass(frozen=True, eq=False)
class BlockValues:
    """One block's finite original values, summarised.

    ``n``: how many; ``lo``, ``hi``: their range; ``counts``: how many fall in each of
    ``len(counts)`` equal bins over ``[lo, hi_bins]`` (``hi_bins = hi``; for a constant
    block ``lo + 1``, relative for huge values); ``extremes``: the positions in the
    block (row-major within its cells) of the first minimum and the first maximum, or
    ``None`` when the tensor holds NaN/Inf (positions then skip those cells)."""

    n: int
    lo: float
    hi: float
    hi_bins: float
    counts: np.ndarray
    extremes: tuple[int, int] | None

    @property
    def bin_width(self) -> float:
        return (self.hi_bins - self.lo) / len(self.counts)


def extreme_indices(values: torch.Tensor) -> tuple[int, int]:
    """``(argmin, argmax)`` of a 1-D finite tensor, the first occurrence of each, as
    ``argmin``/``argmax`` give them; a long one (a whole 4096² tensor) reduced by rows of
    ``_ROW`` first, which spreads over the threads where one ``argmin`` does not."""
    n = values.numel()
    head = n - n % _ROW
    if head < 16 * _ROW:
        return int(values.argmin()), int(values.argmax())
    rows = values[:head].reshape(-1, _ROW)
    lows, low_at = rows.min(dim=1)
    highs, high_at = rows.max(dim=1)
    r_lo, r_hi = int(lows.argmin()), int(highs.argmax())
    i_lo, i_hi = r_lo * _ROW + int(low_at[r_lo]), r_hi * _ROW + int(high_at[r_hi])
    if head < n:
        tail = values[head:]
        t_lo, t_hi = int(tail.argmin()), int(tail.argmax())
        # strictly beyond: on a tie the earlier (head) index stays first
        if float(tail[t_lo]) < float(values[i_lo]):
            i_lo = head + t_lo
        if float(tail[t_hi]) > float(values[i_hi]):
            i_hi = head + t_hi
    return i_lo, i_hi


def block_value_stats(exp: Exploration, block: int) -> BlockValues | None:
    """``BlockValues`` of ``exp``'s block ``block``; ``None`` when it has no finite value."""
    values = block_values(exp, block)
    n = values.numel()
    if n == 0:
        return None
    if exp.n_blocks == 1:
        lo, hi = exp.value_min, exp.value_max  # the block is the whole tensor
    else:
        lo32, hi32 = torch.aminmax(values)
        lo, hi = float(lo32), float(hi32)
    # A constant block gets one unit of width (relative for huge values: 3e38 + 1 == 3e38).
    hi_bins = hi if hi > lo else lo + max(1.0, abs(lo) * 2**-20)
    counts = histogram(values, histogram_bins(n), lo, hi_bins).numpy(force=True)
    extremes = extreme_indices(values) if exp.finite is None else None
    return BlockValues(n, lo, hi, hi_bins, counts, extremes)
