"""The explorer's histogram of one block, with its quantization levels and clipped ranges."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from quant_core import clip_bounds, levels_used

from .block_values import BlockValues, block_value_stats
from .explore import Exploration, block_label

__all__ = ["MAX_DRAWN_LEVELS", "histogram_figure"]

MAX_DRAWN_LEVELS = 256


def histogram_figure(exp: Exploration, block: int, stats: BlockValues | None = None) -> go.Figure:
    """Histogram of a block's original values (bins over the values' own range) with its
    quantization levels drawn over it and the clipped regions (outside the representable
    range) shaded; the title names the block (``block_label``). ``stats``:
    ``block_value_stats(exp, block)`` computed before (another scheme, the same tensor)."""
    label = block_label(exp, block)
    if stats is None:
        stats = block_value_stats(exp, block)
    if stats is None:
        return go.Figure(
            layout={
                "title": {"text": f"{label}: no finite values to draw", "font": {"size": 13}},
                "height": 200,
            }
        )
    levels = exp.qt.levels(block).numpy(force=True).astype(np.float32)
    bounds = clip_bounds(exp.qt)
    clip_lo, clip_hi = float(bounds.lo.reshape(-1)[block]), float(bounds.hi.reshape(-1)[block])
    vmin, vmax = stats.lo, stats.hi
    counts, width = stats.counts, stats.bin_width
    centres = (stats.lo + width * (np.arange(len(counts)) + 0.5)).astype(np.float32)
    data: list[go.Bar | go.Scatter] = [
        go.Bar(
            x=centres,
            y=counts.astype(np.float32),
            width=width,
            marker_color="#4c78a8",
            name="values",
            hovertemplate="%{x:.4g}: %{y:.0f} values<extra></extra>",
        )
    ]
    top = float(counts.max()) if counts.size else 1.0
    n_levels = len(levels)
    if n_levels <= MAX_DRAWN_LEVELS:
        xs = np.full(3 * n_levels, np.nan, dtype=np.float32)
        ys = np.full(3 * n_levels, np.nan, dtype=np.float32)
        xs[0::3] = levels
        xs[1::3] = levels
        ys[0::3] = 0.0
        ys[1::3] = top * 1.05
        data.append(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"color": "rgba(228,87,86,0.7)", "width": 1},
                name=f"{n_levels} quantization levels",
                hoverinfo="skip",
            )
        )
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": a,
            "x1": b,
            "y0": 0,
            "y1": 1,
            "fillcolor": "orange",
            "opacity": 0.25,
            "line": {"width": 0},
        }
        for a, b in ((vmin, clip_lo), (clip_hi, vmax))
        if a < b
    ]
    used = exp.levels_used if exp.n_blocks == 1 else levels_used(exp.qt, block)
    total = 1 << exp.config.bits
    note = "" if n_levels <= MAX_DRAWN_LEVELS else f" ({n_levels} levels: too dense to draw)"
    return go.Figure(
        data=data,
        layout={
            "title": {
                "text": f"{label}: {stats.n:,} values, {used} of {total} levels "
                f"used{note}; shaded = clipped",
                "font": {"size": 13},
            },
            "shapes": shapes,
            "height": 330,
            "bargap": 0,
            "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
            "legend": {"orientation": "h", "y": -0.15},
        },
    )
