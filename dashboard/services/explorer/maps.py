"""One overview map as a figure: a full heatmap (small tensors, exact values and hover in
every cell) or a light image (larger ones: the colour-mapped cells as a PNG, exact values
in the zoom window), with the channel/group boundaries and the saturated cells ringed.

A heatmap of 512 x 512 cells is 1.4 MB of JSON the browser parses and colours on every
change; its image is about 0.2-0.3 MB that the browser only decodes. Both draw the same
colours (``display.image`` follows plotly's interpolation of the colour scale) and carry a
real plotly colour bar.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from quant_core import PerChannel, PerGroup, QuantConfig

from ..display.image import png_data_uri, to_png
from ..display.reduce import Reduced
from .colour import ColourLimits, colorbar

__all__ = ["MAX_BOUNDARY_LINES", "MAX_MARKED", "MapSpec", "boundary_trace", "map_figure"]

MAX_BOUNDARY_LINES = 32
MAX_LABELLED_CELLS = 256
MAX_MARKED = 200
"""Saturated cells beyond the colour limit marked with a ring: the most extreme ones."""
MAGENTA = "#ff00ff"


@dataclass(frozen=True, eq=False)
class MapSpec:
    """What one map shows: ``reduced`` values in ``limits``; ``value_label`` names them in
    the hover (``"original"``, ``"code"``, ...); ``mark_outliers``: ring saturated cells."""

    title: str
    reduced: Reduced
    limits: ColourLimits
    value_label: str
    mark_outliers: bool


def boundary_trace(cfg: QuantConfig, shape: tuple[int, int]) -> dict | None:
    """Lines between channels or groups of a ``shape`` matrix, when few enough (at most
    ``MAX_BOUNDARY_LINES``) to be readable, as a scatter trace's properties; ``None``
    otherwise or for one block. (Traces are built as dicts: the figure validates them
    once, where trace objects would be copied into every figure.)"""
    gran = cfg.granularity
    rows, cols = shape
    xs: list[float | None] = []
    ys: list[float | None] = []
    if isinstance(gran, PerGroup) and gran.group_size < cols:
        positions = [k * gran.group_size - 0.5 for k in range(1, cols // gran.group_size)]
        if len(positions) > MAX_BOUNDARY_LINES:
            return None
        for p in positions:
            xs += [p, p, None]
            ys += [-0.5, rows - 0.5, None]
    elif isinstance(gran, PerChannel):
        along_rows = gran.axis % 2 == 0
        n = rows if along_rows else cols
        if n - 1 > MAX_BOUNDARY_LINES:
            return None
        for k in range(1, n):
            p = k - 0.5
            if along_rows:
                xs += [-0.5, cols - 0.5, None]
                ys += [p, p, None]
            else:
                xs += [p, p, None]
                ys += [-0.5, rows - 0.5, None]
    if not xs:
        return None
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "lines",
        "line": {"color": "rgba(0,0,0,0.6)", "width": 1.5},
        "hoverinfo": "skip",
        "showlegend": False,
    }


def _outlier_trace(reduced: Reduced, limits: ColourLimits, name: str) -> dict | None:
    """Rings on the (at most ``MAX_MARKED``) most extreme shown cells beyond the colour
    range, whose colour is saturated; hover gives their value."""
    v = reduced.values
    with np.errstate(invalid="ignore"):
        beyond = (v > limits.hi) | (v < limits.lo)
    idx = np.flatnonzero(beyond)
    if idx.size == 0:
        return None
    mid = (limits.hi + limits.lo) / 2
    if idx.size > MAX_MARKED:
        far = np.abs(v.reshape(-1)[idx] - mid)
        # A stable order (position among the most extreme): equal inputs, equal figures.
        idx = np.sort(idx[np.argpartition(far, -MAX_MARKED)[-MAX_MARKED:]])
    r, c = np.unravel_index(idx, v.shape)
    shown = "" if np.count_nonzero(beyond) <= MAX_MARKED else f", the {MAX_MARKED} largest"
    return {
        "type": "scatter",
        "x": reduced.col_centres()[c],
        "y": reduced.row_centres()[r],
        "customdata": v[r, c].astype(np.float32),
        "mode": "markers",
        "marker": {"symbol": "circle-open", "color": "black", "size": 7, "line": {"width": 1.5}},
        "name": f"beyond the colour range{shown}",
        "hovertemplate": f"{name} %{{customdata:.4g}} (beyond the colour range)<extra></extra>",
        "showlegend": False,
    }


def _value_hover(reduced: Reduced, value_label: str, exact: bool) -> str:
    """The hover of a map without per-cell data: where the cell is and what it shows, its
    value (``exact``: a heatmap's ``z``) or, on an image, a pointer to the colour bar."""
    if reduced.is_reduced:
        value = "%{z:.6g}" if exact else "see the colour bar"
        return (
            f"rows %{{y:.0f}}±{reduced.row_step / 2:g}, cols %{{x:.0f}}±{reduced.col_step / 2:g}"
            f"<br>{reduced.how.label} of the {reduced.row_step}×{reduced.col_step} block's "
            f"{value_label} values: {value}<br>every value of a cell: zoom below<extra></extra>"
        )
    value = f"{value_label} %{{z:.6g}}" if exact else f"{value_label}: see the colour bar"
    return (
        f"row %{{y:.0f}}, col %{{x:.0f}}<br>{value}"
        "<br>original, code, dequantized and error: zoom below<extra></extra>"
    )


def _layout(
    title: str, shape: tuple[int, int], has_nonfinite: bool, small: bool, image: bool
) -> dict:
    rows, cols = shape
    # The tensor's extent, row 0 on top: the rings' markers would otherwise pad the range.
    yaxis = {"range": [rows - 0.5, -0.5], "showgrid": False, "zeroline": False}
    xaxis = {"range": [-0.5, cols - 0.5], "showgrid": False, "zeroline": False}
    if small:
        yaxis["dtick"] = xaxis["dtick"] = 1
    if image:
        # An image trace would otherwise pin one pixel square (a 30522x384 tensor a sliver).
        yaxis["scaleanchor"] = False
    return {
        "title": {"text": title, "font": {"size": 13}},
        # Room under the plot for the x tick labels and the colour bar with its title.
        "margin": {"l": 10, "r": 10, "t": 40, "b": 100},
        "height": 460,
        # Non-finite cells are NaN and left transparent: a loud background marks them.
        "plot_bgcolor": MAGENTA if has_nonfinite else "white",
        "yaxis": yaxis,
        "xaxis": xaxis,
    }


def map_figure(
    spec: MapSpec,
    boundary: dict | None,
    has_nonfinite: bool,
    customdata: np.ndarray | None = None,
    rich_hover: str = "",
    image: bool = False,
) -> go.Figure:
    """``spec`` drawn as a heatmap (``image=False``; per-cell ``customdata`` with
    ``rich_hover`` when given) or as a PNG image under an invisible one-cell heatmap that
    carries the colour bar (``image=True``: no values in the figure, only colours)."""
    reduced, limits = spec.reduced, spec.limits
    small = not image and reduced.values.size <= MAX_LABELLED_CELLS
    x, y = reduced.col_centres(), reduced.row_centres()
    scale = {"colorscale": limits.colorscale, "zmin": limits.lo, "zmax": limits.hi}
    data: list[dict]
    if image:
        png = to_png(reduced.values, limits.colorscale, limits.lo, limits.hi)
        data = [
            # The colour bar's carrier: one transparent cell under the image, no hover.
            {
                "type": "heatmap",
                "z": [[limits.lo]],
                "x": x[:1],
                "y": y[:1],
                "opacity": 0,
                "hoverinfo": "skip",
                "colorbar": colorbar(limits.note),
                **scale,
            },
            {
                "type": "image",
                "source": png_data_uri(png),
                "x0": float(x[0]),
                "dx": reduced.col_step,
                "y0": float(y[0]),
                "dy": reduced.row_step,
                "hovertemplate": _value_hover(reduced, spec.value_label, exact=False),
            },
        ]
    else:
        hover = rich_hover if customdata is not None else None
        text_format = "%{z:.0f}" if spec.value_label == "code" else "%{z:.4g}"
        data = [
            {
                "type": "heatmap",
                "z": reduced.values,
                "x": x,
                "y": y,
                "customdata": customdata,
                "hovertemplate": hover or _value_hover(reduced, spec.value_label, exact=True),
                "colorbar": colorbar(limits.note),
                # Small teaching-sized matrices print every value in its cell.
                "texttemplate": text_format if small else None,
                **scale,
            }
        ]
    if boundary is not None:
        data.append(boundary)
    outliers = _outlier_trace(reduced, limits, spec.value_label) if spec.mark_outliers else None
    if outliers is not None:
        data.append(outliers)
    # One constructor call with the whole layout: every update_* call re-validates.
    return go.Figure(
        data=data, layout=_layout(spec.title, reduced.source_shape, has_nonfinite, small, image)
    )
