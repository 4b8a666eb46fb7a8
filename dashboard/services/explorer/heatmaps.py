"""The explorer's heatmaps: data in, ``go.Figure`` out, no Streamlit.

Large matrices are drawn as a reduced overview (at most ``max_side`` x ``max_side`` cells,
each the mean or the max-|value| of a block of cells, said in the title) plus a
full-resolution zoom window, so every chart's JSON stays well under 2 MB.
Arrays reach plotly as float32 numpy (typed arrays in the JSON: float16 would fall back to
lists, float64 doubles the payload).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from quant_core import Format, Mode, PerChannel, PerGroup, ZeroPoint

from ..display.reduce import DEFAULT_MAX_CELLS, Reduced, Reduction, reduce_2d
from .explore import Exploration, block_ids

__all__ = [
    "RICH_HOVER_MAX_CELLS",
    "OverviewFigures",
    "Reduced",
    "Reduction",
    "ViewOptions",
    "overview_figures",
    "reduce_2d",
    "zoom_figure",
]

# Full-resolution hover (code, dequantized, error, scale, zero point per cell) costs
# 5 float32 per cell: 32k cells keep a chart near 1 MB.
RICH_HOVER_MAX_CELLS = 32_768
MAX_BOUNDARY_LINES = 32
MAX_LABELLED_CELLS = 256


@dataclass(frozen=True)
class ViewOptions:
    reduction: Reduction = Reduction.MEAN
    max_cells: int = DEFAULT_MAX_CELLS
    show_boundaries: bool = True


@dataclass(frozen=True, eq=False)
class OverviewFigures:
    original: go.Figure
    codes: go.Figure
    dequantized: go.Figure
    error: go.Figure

    def all(self) -> tuple[go.Figure, go.Figure, go.Figure, go.Figure]:
        return (self.original, self.codes, self.dequantized, self.error)


DIVERGING = "RdBu_r"
"""Every diverging map: red = positive, blue = negative, white = 0 (said in its colour bar)."""
SIGN_NOTE = "red = positive, blue = negative"
LIMIT_PERCENTILE = 99.5


@dataclass(frozen=True)
class ColourLimits:
    """A map's colour range ``[lo, hi]`` and how it was chosen (``note``, for the colour
    bar). ``colorscale``: ``DIVERGING`` (``lo = -hi``) or ``"Viridis"`` (one-signed data)."""

    colorscale: str
    lo: float
    hi: float
    note: str


def _robust_limit(shown: np.ndarray | torch.Tensor) -> float:
    """The 99.5th percentile of ``|x|`` over the finite shown values, taken as an actual
    data value (``method="higher"``), so a tensor of up to 200 values keeps its maximum
    and one extreme value among thousands no longer washes the map out. 1 for all-zero."""
    a = np.abs(np.asarray(shown, dtype=np.float32))
    a = a[np.isfinite(a)]
    if a.size == 0:
        return 1.0
    lim = float(np.percentile(a, LIMIT_PERCENTILE, method="higher"))
    return lim if lim > 0 else (float(a.max()) or 1.0)


def _beyond(shown: np.ndarray | torch.Tensor, lo: float, hi: float) -> int:
    v = np.asarray(shown, dtype=np.float32)
    return int(np.count_nonzero((v > hi) | (v < lo)))


def _limits_note(lim: float, n_beyond: int) -> str:
    return (
        f"{SIGN_NOTE}<br>±{lim:.3g} ({LIMIT_PERCENTILE:g}th pct of |x|; "
        f"{n_beyond:,} values beyond, saturated)"
    )


def _value_scale(exp: Exploration, shown: np.ndarray | torch.Tensor) -> ColourLimits:
    """One colour scale for original and dequantized: diverging around 0 (``DIVERGING``)
    at ``±`` the 99.5th percentile of ``|x|`` of the shown original values when the data has
    both signs; sequential over the 0.5th-99.5th percentile range otherwise."""
    if exp.value_min < 0 < exp.value_max:
        lim = _robust_limit(shown)
        return ColourLimits(DIVERGING, -lim, lim, _limits_note(lim, _beyond(shown, -lim, lim)))
    v = np.asarray(shown, dtype=np.float32)
    v = v[np.isfinite(v)]
    lo = float(np.percentile(v, 100 - LIMIT_PERCENTILE, method="lower")) if v.size else 0.0
    hi = float(np.percentile(v, LIMIT_PERCENTILE, method="higher")) if v.size else 1.0
    if hi <= lo:
        hi = lo + 1.0
    n = _beyond(shown, lo, hi)
    return ColourLimits(
        "Viridis",
        lo,
        hi,
        f"{lo:.3g} to {hi:.3g} ({100 - LIMIT_PERCENTILE:g}th–{LIMIT_PERCENTILE:g}th pct; "
        f"{n:,} values beyond, saturated)",
    )


def _error_scale(shown: np.ndarray | torch.Tensor) -> ColourLimits:
    """Diverging, centred on 0, at ``±`` the 99.5th percentile of ``|error|`` shown."""
    lim = _robust_limit(shown)
    return ColourLimits(DIVERGING, -lim, lim, _limits_note(lim, _beyond(shown, -lim, lim)))


def _with_count(limits: ColourLimits, shown: np.ndarray | torch.Tensor) -> ColourLimits:
    """The same range, with the count of ``shown`` values beyond it (another map)."""
    n = _beyond(shown, limits.lo, limits.hi)
    note = re.sub(r"[0-9,]+ values beyond", f"{n:,} values beyond", limits.note)
    return ColourLimits(limits.colorscale, limits.lo, limits.hi, note)


def _code_range(exp: Exploration) -> tuple[float, float]:
    cfg = exp.config
    if cfg.format is Format.INT:
        return float(cfg.qmin), float(cfg.qmax)
    return 0.0, float((1 << cfg.bits) - 1)


def _display_codes(exp: Exploration, rows: slice, cols: slice) -> torch.Tensor:
    """Codes of the window as float32, NaN where the original is not finite (a stand-in's
    code is no real code)."""
    codes = exp.qt.codes[rows, cols].to(torch.float32)
    if exp.finite is not None:
        codes = torch.where(exp.finite[rows, cols], codes, float("nan"))
    return codes


def _block_param(exp: Exploration) -> str | None:
    """The per-block number besides the scale the hover shows: ``"zero point"`` (integer
    ``z`` of ``r_hat = s (q - z)``), ``"offset"`` (``m`` of ``r_hat = s q + m``, float min)
    or ``None`` (symmetric, codebooks: ``r_hat = s q`` or ``s value[q]``)."""
    cfg = exp.config
    if cfg.format is not Format.INT or cfg.mode is Mode.SYMMETRIC:
        return None
    return "offset" if cfg.zero_point is ZeroPoint.FLOAT_MIN else "zero point"


def _rich_customdata(exp: Exploration, rows: slice, cols: slice) -> np.ndarray:
    """``[r, c, k]`` float32: original, code, dequantized (``qt.dequantize()``), error,
    scale and (asymmetric int only) zero point ``z`` or float-min offset ``m`` per cell."""
    ids = block_ids(exp, rows, cols).to(exp.qt.scale.device)
    parts = [
        exp.original[rows, cols],
        _display_codes(exp, rows, cols),
        exp.dequantized[rows, cols],
        exp.error_window(rows, cols),
        exp.qt.scale.reshape(-1)[ids],
    ]
    param = _block_param(exp)
    if param == "offset":
        parts.append(exp.qt.offset.reshape(-1)[ids].to(torch.float32))
    elif param == "zero point":
        parts.append(exp.qt.zero_point.reshape(-1)[ids].to(torch.float32))
    return torch.stack(parts, dim=-1).numpy(force=True).astype(np.float32)


def _rich_hover(exp: Exploration) -> str:
    """Every map's hover: original, code, dequantized and error by name, then the block's
    scale (and zero point or offset)."""
    param = _block_param(exp)
    extra = ""
    if param == "offset":
        extra = ", offset m %{customdata[5]:.6g}"
    elif param == "zero point":
        extra = ", zero point %{customdata[5]:.0f}"
    return (
        "row %{y:.0f}, col %{x:.0f}<br>original %{customdata[0]:.6g}"
        "<br>code %{customdata[1]:.0f}<br>dequantized %{customdata[2]:.6g}"
        "<br>error (original − dequantized) %{customdata[3]:.4g}"
        f"<br>scale %{{customdata[4]:.6g}}{extra}<extra></extra>"
    )


def _boundary_trace(exp: Exploration, reduced: Reduced) -> go.Scatter | None:
    """Lines between channels or groups, when few enough to be readable."""
    gran = exp.config.granularity
    rows, cols = reduced.source_shape
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
    return go.Scatter(
        x=xs,
        y=ys,
        mode="lines",
        line={"color": "rgba(0,0,0,0.6)", "width": 1.5},
        hoverinfo="skip",
        showlegend=False,
    )


MAX_MARKED = 200
"""Saturated cells beyond the colour limit marked with a ring: the most extreme ones."""


def _outlier_trace(reduced: Reduced, limits: ColourLimits, name: str) -> go.Scatter | None:
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
        idx = idx[np.argpartition(far, -MAX_MARKED)[-MAX_MARKED:]]
    r, c = np.unravel_index(idx, v.shape)
    shown = "" if np.count_nonzero(beyond) <= MAX_MARKED else f", the {MAX_MARKED} largest"
    return go.Scatter(
        x=reduced.col_centres()[c],
        y=reduced.row_centres()[r],
        customdata=v[r, c].astype(np.float32),
        mode="markers",
        marker={"symbol": "circle-open", "color": "black", "size": 7, "line": {"width": 1.5}},
        name=f"beyond the colour range{shown}",
        hovertemplate=f"{name} %{{customdata:.4g}} (beyond the colour range)<extra></extra>",
        showlegend=False,
    )


def _colorbar(title: str) -> dict:
    """A horizontal colour bar under the map, its title (convention and limits) on top."""
    return {
        "orientation": "h",
        "thickness": 10,
        "y": -0.1,
        "yanchor": "top",
        "len": 0.9,
        "nticks": 6,
        "title": {"text": title, "side": "top", "font": {"size": 11}},
    }


def _heatmap(
    title: str,
    reduced: Reduced,
    limits: ColourLimits,
    customdata: np.ndarray | None,
    hover_rich: str,
    boundary: go.Scatter | None,
    value_label: str,
    has_nonfinite: bool,
    mark_outliers: bool,
) -> go.Figure:
    if customdata is not None:
        hover = hover_rich
    elif reduced.is_reduced:
        hover = (
            f"rows %{{y:.0f}}±{reduced.row_step / 2:g}, cols %{{x:.0f}}±{reduced.col_step / 2:g}"
            f"<br>{reduced.how.label} of the {reduced.row_step}×{reduced.col_step} block's "
            f"{value_label} values: %{{z:.6g}}<br>every value of a cell: zoom below"
            "<extra></extra>"
        )
    else:
        hover = (
            f"row %{{y:.0f}}, col %{{x:.0f}}<br>{value_label} %{{z:.6g}}"
            "<br>original, code, dequantized and error: zoom below<extra></extra>"
        )
    # Small teaching-sized matrices print every value in its cell.
    small = reduced.values.size <= MAX_LABELLED_CELLS
    text_format = "%{z:.0f}" if value_label == "code" else "%{z:.4g}"
    data: list[go.Heatmap | go.Scatter] = [
        go.Heatmap(
            z=reduced.values,
            x=reduced.col_centres(),
            y=reduced.row_centres(),
            colorscale=limits.colorscale,
            zmin=limits.lo,
            zmax=limits.hi,
            customdata=customdata,
            hovertemplate=hover,
            colorbar=_colorbar(limits.note),
            texttemplate=text_format if small else None,
        )
    ]
    if boundary is not None:
        data.append(boundary)
    outliers = _outlier_trace(reduced, limits, value_label) if mark_outliers else None
    if outliers is not None:
        data.append(outliers)
    # One constructor call with the whole layout: every update_* call re-validates.
    return go.Figure(
        data=data,
        layout={
            "title": {"text": title, "font": {"size": 13}},
            # Room under the plot for the x tick labels and the colour bar with its title.
            "margin": {"l": 10, "r": 10, "t": 40, "b": 100},
            "height": 460,
            # Non-finite cells are NaN and left transparent: a loud background marks them.
            "plot_bgcolor": "#ff00ff" if has_nonfinite else "white",
            "yaxis": {
                "autorange": "reversed",
                "showgrid": False,
                "zeroline": False,
                "dtick": 1 if small else None,
            },
            "xaxis": {"showgrid": False, "zeroline": False, "dtick": 1 if small else None},
        },
    )


def overview_figures(exp: Exploration, opts: ViewOptions) -> OverviewFigures:
    """The four overview heatmaps: original, codes, dequantized (one shared colour scale
    with original) and error, the diverging ones red = positive, blue = negative, each
    limited at the 99.5th percentile of ``|x|`` of its shown values (``_robust_limit``)
    with the saturated cells beyond it ringed."""
    rows, cols = exp.original.shape
    full = slice(None)
    rich = rows * cols <= RICH_HOVER_MAX_CELLS
    custom = _rich_customdata(exp, full, full) if rich else None
    hover = _rich_hover(exp)
    reduce = {
        "original": exp.original,
        "codes": _display_codes(exp, slice(None), slice(None)),
        "dequantized": exp.dequantized,
    }
    red = {name: reduce_2d(t, opts.max_cells, opts.reduction) for name, t in reduce.items()}
    if opts.reduction is Reduction.MEAN and red["original"].is_reduced:
        # The mean is linear: mean(x - x_hat) = mean(x) - mean(x_hat), no extra pass.
        o, d = red["original"], red["dequantized"]
        red["error"] = Reduced(o.values - d.values, o.row_step, o.col_step, o.source_shape, o.how)
    else:
        red["error"] = reduce_2d(exp.error, opts.max_cells, opts.reduction)
    first = red["original"]
    suffix = ""
    if first.is_reduced:
        suffix = (
            f"<br><sup>{first.values.shape[0]}×{first.values.shape[1]} overview of "
            f"{rows}×{cols}: {opts.reduction.label} of {first.row_step}×{first.col_step} blocks"
            "</sup>"
        )
    boundary = _boundary_trace(exp, first) if opts.show_boundaries else None
    nonfinite = exp.finite is not None
    values = _value_scale(exp, first.values)
    cmin, cmax = _code_range(exp)
    codes = ColourLimits("Cividis", cmin, cmax, f"code {cmin:.0f} to {cmax:.0f}")
    return OverviewFigures(
        original=_heatmap(
            "Original" + suffix,
            first,
            values,
            custom,
            hover,
            boundary,
            "original",
            nonfinite,
            True,
        ),
        codes=_heatmap(
            "Quantized codes" + suffix,
            red["codes"],
            codes,
            custom,
            hover,
            boundary,
            "code",
            nonfinite,
            False,
        ),
        dequantized=_heatmap(
            "Dequantized (same scale as original)" + suffix,
            red["dequantized"],
            _with_count(values, red["dequantized"].values),
            custom,
            hover,
            boundary,
            "dequantized",
            nonfinite,
            True,
        ),
        error=_heatmap(
            "Error = original − dequantized" + suffix,
            red["error"],
            _error_scale(red["error"].values),
            custom,
            hover,
            boundary,
            "error",
            nonfinite,
            True,
        ),
    )


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
    custom = _rich_customdata(exp, rsl, csl)
    hover = _rich_hover(exp)
    x = np.arange(csl.start, csl.stop, dtype=np.float32)
    y = np.arange(rsl.start, rsl.stop, dtype=np.float32)
    # customdata already holds the window's original, code, dequantized and error.
    orig, code, deq, err = (custom[..., k] for k in range(4))
    values = _value_scale(exp, orig)
    cmin, cmax = _code_range(exp)
    titles = ("Original", "Codes", "Dequantized", "Error")
    panels = (
        (orig, values),
        (code, ColourLimits("Cividis", cmin, cmax, "code")),
        (deq, _with_count(values, deq)),
        (err, _error_scale(err)),
    )
    gap, width = 0.04, (1 - 3 * 0.04) / 4
    data, layout = [], {}
    for i, (z, limits) in enumerate(panels):
        suffix = "" if i == 0 else str(i + 1)
        left = i * (width + gap)
        bar = _colorbar(limits.note.replace("<br>", "; ").replace(" values beyond", " beyond"))
        bar.update(
            y=-0.14,
            x=left + width / 2,
            xanchor="center",
            len=width,
            lenmode="fraction",
            nticks=4,
            title={**bar["title"], "font": {"size": 9}},
        )
        data.append(
            go.Heatmap(
                z=z,
                x=x,
                y=y,
                colorscale=limits.colorscale,
                zmin=limits.lo,
                zmax=limits.hi,
                customdata=custom,
                hovertemplate=hover,
                colorbar=bar,
                xaxis=f"x{suffix}",
                yaxis=f"y{suffix}",
            )
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
        margin={"l": 10, "r": 10, "t": 60, "b": 110},
        plot_bgcolor="#ff00ff" if exp.finite is not None else "white",
    )
    return go.Figure(data=data, layout=layout)
