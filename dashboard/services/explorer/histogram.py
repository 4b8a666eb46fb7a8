"""The explorer's histogram of one block, with its quantization levels and clipped ranges.

The browser draws it (``dashboard.components.charts``: one canvas, hover on bins and
levels, drag to zoom). As a plotly chart it cost about 150 ms of the browser's main
thread per redraw, measured in isolation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant_core import clip_bounds, code_total, levels_used

from .block_values import BlockValues, block_value_stats
from .explore import Exploration, block_label

__all__ = ["MAX_DRAWN_LEVELS", "HistogramView", "histogram_payload", "histogram_view"]

MAX_DRAWN_LEVELS = 256


@dataclass(frozen=True, eq=False)
class HistogramView:
    """A block's original values in ``len(counts)`` equal bins from ``lo``, ``bin_width``
    wide, with its quantization ``levels`` (``None``: more than ``MAX_DRAWN_LEVELS``,
    too dense to draw; ``n_levels`` says how many: the distinct finite values the format's
    ``n_codes`` codes decode to) and the ``clipped`` ranges of values (``(a, b)`` pairs,
    outside the representable range). ``counts`` is ``None`` when the block has no finite
    value. ``title`` names the block and how many of the ``n_codes`` codes it uses."""

    title: str
    lo: float
    bin_width: float
    counts: np.ndarray | None
    levels: np.ndarray | None
    n_levels: int
    clipped: tuple[tuple[float, float], ...]
    n_codes: int = 0

    @property
    def levels_label(self) -> str:
        """The legend of the level lines, in the title's units where they differ: FP8
        E4M3's 256 codes decode to 253 distinct finite values (+0 and -0 are one value,
        two codes are NaN), so its "253 levels" are said to be values of 256 codes."""
        if self.n_codes and self.n_levels != self.n_codes:
            return (
                f"{self.n_levels} quantization levels (the distinct finite values of the "
                f"{self.n_codes} codes)"
            )
        return f"{self.n_levels} quantization levels"


def histogram_view(exp: Exploration, block: int, stats: BlockValues | None = None) -> HistogramView:
    """Histogram of block ``block``'s original values (bins over the values' own range,
    ``stats``: ``block_value_stats(exp, block)`` computed before, for another scheme of
    the same tensor), its levels and clipped ranges; the title names the block
    (``block_label``)."""
    label = block_label(exp, block)
    if stats is None:
        stats = block_value_stats(exp, block)
    if stats is None:
        return HistogramView(f"{label}: no finite values to draw", 0.0, 1.0, None, None, 0, ())
    levels = exp.qt.levels(block).numpy(force=True).astype(np.float32)
    bounds = clip_bounds(exp.qt)
    clip_lo, clip_hi = float(bounds.lo.reshape(-1)[block]), float(bounds.hi.reshape(-1)[block])
    clipped = tuple((a, b) for a, b in ((stats.lo, clip_lo), (clip_hi, stats.hi)) if a < b)
    used = exp.levels_used if exp.n_blocks == 1 else levels_used(exp.qt, block)
    total = code_total(exp.config)
    # A block whose stored scale overflowed (Q8_0's fp16 d past 65504) has levels at
    # +-inf and NaN: nothing to draw, and NaN is not JSON the browser can parse.
    finite = bool(np.isfinite(levels).all())
    drawn = finite and len(levels) <= MAX_DRAWN_LEVELS
    if not finite:
        note = " (its stored scale overflowed: no finite levels to draw)"
    else:
        note = "" if drawn else f" ({len(levels)} levels: too dense to draw)"
    title = f"{label}: {stats.n:,} values, {used} of {total} codes used{note}; shaded = clipped"
    return HistogramView(
        title,
        stats.lo,
        stats.bin_width,
        stats.counts,
        levels if drawn else None,
        len(levels),
        clipped,
        total,
    )


def histogram_payload(view: HistogramView) -> dict:
    """What the browser's histogram component gets (JSON): bin ``i`` covers ``[lo + i w,
    lo + (i + 1) w)``; levels and clipped ranges as float32 values widened exactly."""
    return {
        "title": view.title,
        "lo": view.lo,
        "width": view.bin_width,
        "counts": None if view.counts is None else [int(c) for c in view.counts],
        "levels": None if view.levels is None else view.levels.astype(np.float64).tolist(),
        "levels_label": view.levels_label,
        "clipped": [list(pair) for pair in view.clipped],
    }
