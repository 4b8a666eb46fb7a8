"""One overview map as a plotly figure: a full heatmap of a small tensor (exact values and
hover in every cell), with the channel/group boundaries and the saturated cells ringed.
Larger tensors are drawn as images (``map_image``), from the same boundaries and rings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from quant_core import PerBlock, PerChannel, PerGroup, QuantConfig, SuperBlockScales

from ..display.reduce import Reduced
from .colour import ColourLimits, colorbar

__all__ = [
    "MAX_BOUNDARY_LINES",
    "MAX_MARKED",
    "BoundaryLines",
    "MapSpec",
    "boundary_lines",
    "boundary_trace",
    "cell_labels",
    "map_figure",
    "outlier_cells",
]

MAX_BOUNDARY_LINES = 32
MAX_LABELLED_CELLS = 256
LABEL_CHARS_PER_ROW = 60
"""How many characters of cell labels (each label's own, plus one of space) a row of a map
holds: a map is about 420 px wide in its half of a 1280 px page, and the labels' 11 px
digits about 7 px apiece."""
LABEL_FONT = {"size": 11}
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


@dataclass(frozen=True)
class BoundaryLines:
    """Where lines between channels or groups go, in cell units of the ``[R, C]`` matrix:
    ``rows`` (horizontal lines at ``y = p``) and ``cols`` (vertical lines at ``x = p``),
    each ``p = k - 0.5`` between cells ``k - 1`` and ``k``."""

    rows: tuple[float, ...]
    cols: tuple[float, ...]


def _cuts(length: int, step: int) -> tuple[float, ...]:
    return tuple(k * step - 0.5 for k in range(1, length // step))


def boundary_lines(cfg: QuantConfig, shape: tuple[int, int]) -> BoundaryLines | None:
    """The lines between channels, groups or tiles of a ``shape`` matrix, when few enough
    (at most ``MAX_BOUNDARY_LINES``) to be readable; for a super-block format whose groups
    are too many, the lines between its super-blocks; ``None`` otherwise or for one
    block."""
    gran = cfg.granularity
    rows, cols = shape
    if isinstance(gran, PerBlock):
        lines = BoundaryLines(_cuts(rows, gran.rows), _cuts(cols, gran.cols))
        n = len(lines.rows) + len(lines.cols)
        return lines if 0 < n <= 2 * MAX_BOUNDARY_LINES else None
    if isinstance(gran, PerGroup) and gran.group_size < cols:
        positions = _cuts(cols, gran.group_size)
        sf = cfg.scale_format
        if len(positions) > MAX_BOUNDARY_LINES and isinstance(sf, SuperBlockScales):
            positions = _cuts(cols, sf.super_block)
        if not positions or len(positions) > MAX_BOUNDARY_LINES:
            return None
        return BoundaryLines((), positions)
    if isinstance(gran, PerChannel):
        along_rows = gran.axis % 2 == 0
        n = rows if along_rows else cols
        if n < 2 or n - 1 > MAX_BOUNDARY_LINES:
            return None
        positions = tuple(k - 0.5 for k in range(1, n))
        return BoundaryLines(positions, ()) if along_rows else BoundaryLines((), positions)
    return None


def boundary_trace(cfg: QuantConfig, shape: tuple[int, int]) -> dict | None:
    """``boundary_lines`` as a scatter trace's properties (``None`` when there are none).
    (Traces are built as dicts: the figure validates them once, where trace objects would
    be copied into every figure.)"""
    lines = boundary_lines(cfg, shape)
    if lines is None:
        return None
    rows, cols = shape
    xs: list[float | None] = []
    ys: list[float | None] = []
    for p in lines.rows:
        xs += [-0.5, cols - 0.5, None]
        ys += [p, p, None]
    for p in lines.cols:
        xs += [p, p, None]
        ys += [-0.5, rows - 0.5, None]
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "lines",
        "line": {"color": "rgba(0,0,0,0.6)", "width": 1.5},
        "hoverinfo": "skip",
        "showlegend": False,
    }


def outlier_cells(reduced: Reduced, limits: ColourLimits) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, cols)`` of the shown cells beyond the colour range, whose colour is
    saturated: all of them, or the ``MAX_MARKED`` most extreme (in a stable order, so equal
    inputs give equal figures)."""
    v = reduced.values
    with np.errstate(invalid="ignore"):
        beyond = (v > limits.hi) | (v < limits.lo)
    idx = np.flatnonzero(beyond)
    if idx.size > MAX_MARKED:
        mid = (limits.hi + limits.lo) / 2
        far = np.abs(v.reshape(-1)[idx] - mid)
        idx = np.sort(idx[np.argpartition(far, -MAX_MARKED)[-MAX_MARKED:]])
    r, c = np.unravel_index(idx, v.shape)
    return r, c


def _outlier_trace(
    reduced: Reduced, limits: ColourLimits, name: str, labelled: bool = False
) -> dict | None:
    """Rings on ``outlier_cells``; hover gives their value. ``labelled``: the cells print
    their values (``cell_labels``), so each ring sits in its cell's top right corner, off
    the label, instead of on its centre."""
    r, c = outlier_cells(reduced, limits)
    if r.size == 0:
        return None
    v = reduced.values
    with np.errstate(invalid="ignore"):
        n_beyond = int(np.count_nonzero((v > limits.hi) | (v < limits.lo)))
    shown = "" if n_beyond <= MAX_MARKED else f", the {MAX_MARKED} largest"
    return {
        "type": "scatter",
        "x": reduced.col_centres()[c] + (0.35 * reduced.col_step if labelled else 0.0),
        "y": reduced.row_centres()[r] - (0.35 * reduced.row_step if labelled else 0.0),
        "customdata": v[r, c].astype(np.float32),
        "mode": "markers",
        "marker": {"symbol": "circle-open", "color": "black", "size": 7, "line": {"width": 1.5}},
        "name": f"beyond the colour range{shown}",
        "hovertemplate": f"{name} %{{customdata:.4g}} (beyond the colour range)<extra></extra>",
        "showlegend": False,
    }


def cell_labels(values: np.ndarray, value_label: str) -> np.ndarray | None:
    """The text printed in each cell of a small map (at most ``MAX_LABELLED_CELLS``), or
    ``None`` where labels would overlap their neighbours: codes as integers, other values
    with 3 significant digits (``0.1``, ``-2.75``, ``0.00213``), else 2, whichever first
    fits ``LABEL_CHARS_PER_ROW`` over a row. Non-finite cells get ``""`` (the background
    marks them)."""
    if values.size == 0 or values.size > MAX_LABELLED_CELLS:
        return None
    cols = values.shape[-1]
    spec = (".0f",) if value_label == "code" else (".3g", ".2g")
    for fmt in spec:
        # + 0.0: -0.0 (an exact cell's error) is written "0"
        words = [format(v + 0.0, fmt) if math.isfinite(v) else "" for v in values.flat]
        text = np.array(words, dtype=object).reshape(values.shape)
        widest = max(len(t) for t in words)
        if cols * (widest + 1) <= LABEL_CHARS_PER_ROW:
            return text
    return None


def _value_hover(reduced: Reduced, value_label: str) -> str:
    """The hover of a heatmap without per-cell data: where the cell is and its value."""
    if reduced.is_reduced:
        return (
            f"rows %{{y:.0f}}±{reduced.row_step / 2:g}, cols %{{x:.0f}}±{reduced.col_step / 2:g}"
            f"<br>{reduced.how.label} of the {reduced.row_step}×{reduced.col_step} block's "
            f"{value_label} values: %{{z:.6g}}<br>every value of a cell: zoom below"
            "<extra></extra>"
        )
    return (
        f"row %{{y:.0f}}, col %{{x:.0f}}<br>{value_label} %{{z:.6g}}"
        "<br>original, code, dequantized and error: zoom below<extra></extra>"
    )


def _layout(title: str, shape: tuple[int, int], has_nonfinite: bool, small: bool) -> dict:
    rows, cols = shape
    # The tensor's extent, row 0 on top: the rings' markers would otherwise pad the range.
    yaxis = {"range": [rows - 0.5, -0.5], "showgrid": False, "zeroline": False}
    xaxis = {"range": [-0.5, cols - 0.5], "showgrid": False, "zeroline": False}
    if small:
        yaxis["dtick"] = xaxis["dtick"] = 1
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
) -> go.Figure:
    """``spec`` drawn as a heatmap, with per-cell ``customdata`` and ``rich_hover`` when
    given (a small tensor: every cell's original, code, dequantized value and error)."""
    reduced, limits = spec.reduced, spec.limits
    small = reduced.values.size <= MAX_LABELLED_CELLS
    labels = cell_labels(reduced.values, spec.value_label)
    data: list[dict] = [
        {
            "type": "heatmap",
            "z": reduced.values,
            "x": reduced.col_centres(),
            "y": reduced.row_centres(),
            "customdata": customdata,
            "hovertemplate": (rich_hover if customdata is not None else "")
            or _value_hover(reduced, spec.value_label),
            "colorbar": colorbar(limits.note, limits),
            # Small teaching-sized matrices print every value in its cell, where it fits.
            "text": labels,
            "texttemplate": "%{text}" if labels is not None else None,
            "textfont": LABEL_FONT,
            "colorscale": limits.colorscale,
            "zmin": limits.lo,
            "zmax": limits.hi,
        }
    ]
    if boundary is not None:
        data.append(boundary)
    outliers = (
        _outlier_trace(reduced, limits, spec.value_label, labelled=labels is not None)
        if spec.mark_outliers
        else None
    )
    if outliers is not None:
        data.append(outliers)
    # One constructor call with the whole layout: every update_* call re-validates.
    return go.Figure(
        data=data, layout=_layout(spec.title, reduced.source_shape, has_nonfinite, small)
    )
