"""The explorer's heatmaps: data in, ``go.Figure`` out, no Streamlit.

Large matrices are drawn as a reduced overview (at most ``max_side`` x ``max_side`` cells,
each the mean or the max-|value| of a block of cells, said in the title) plus a
full-resolution zoom window, so every chart's JSON stays well under 2 MB.
Arrays reach plotly as float32 numpy (typed arrays in the JSON: float16 would fall back to
lists, float64 doubles the payload).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from quant_core import Format, PerChannel, PerGroup

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


def _value_scale(exp: Exploration) -> tuple[str, float, float]:
    """One colour scale for original and dequantized: diverging around 0 when the data
    has both signs, sequential otherwise. Dequantized values lie within the largest error
    of the original's range, so that widened range covers both without another pass."""
    err = exp.metrics.max_abs
    lo, hi = exp.value_min - err, exp.value_max + err
    if exp.value_min < 0 < exp.value_max:
        a = max(-lo, hi)
        return "RdBu_r", -a, a
    if hi == lo:
        hi = lo + 1.0
    return "Viridis", lo, hi


def _error_limit(exp: Exploration) -> float:
    """Symmetric limit of the error colour scale: the largest finite error (or 1)."""
    return exp.metrics.max_abs if exp.metrics.max_abs > 0 else 1.0


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


def _rich_customdata(exp: Exploration, rows: slice, cols: slice) -> np.ndarray:
    """``[r, c, 5]`` float32: code, dequantized, error, scale, zero point of each cell."""
    ids = block_ids(exp, rows, cols).to(exp.qt.scale.device)
    scale = exp.qt.scale.reshape(-1)[ids]
    zp = exp.qt.zero_point.reshape(-1)[ids].to(torch.float32)
    stack = torch.stack(
        [
            _display_codes(exp, rows, cols),
            exp.dequantized[rows, cols],
            exp.error_window(rows, cols),
            scale,
            zp,
        ],
        dim=-1,
    )
    return stack.numpy(force=True).astype(np.float32)


_RICH_HOVER = (
    "row %{y}, col %{x}<br>value %{z:.6g}<br>code %{customdata[0]:.0f}"
    "<br>dequantized %{customdata[1]:.6g}<br>error %{customdata[2]:.4g}"
    "<br>scale %{customdata[3]:.6g}, zero point %{customdata[4]:.0f}<extra></extra>"
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


def _heatmap(
    title: str,
    reduced: Reduced,
    colorscale: str,
    zmin: float,
    zmax: float,
    customdata: np.ndarray | None,
    boundary: go.Scatter | None,
    value_label: str,
    has_nonfinite: bool,
) -> go.Figure:
    if customdata is not None:
        hover = _RICH_HOVER
    elif reduced.is_reduced:
        hover = (
            f"rows %{{y:.0f}}±{reduced.row_step / 2:g}, cols %{{x:.0f}}±{reduced.col_step / 2:g}"
            f"<br>{value_label} %{{z:.6g}}<extra></extra>"
        )
    else:
        hover = f"row %{{y}}, col %{{x}}<br>{value_label} %{{z:.6g}}<extra></extra>"
    # Small teaching-sized matrices print every value in its cell.
    small = reduced.values.size <= MAX_LABELLED_CELLS
    text_format = "%{z:.0f}" if value_label == "code" else "%{z:.4g}"
    data: list[go.Heatmap | go.Scatter] = [
        go.Heatmap(
            z=reduced.values,
            x=reduced.col_centres(),
            y=reduced.row_centres(),
            colorscale=colorscale,
            zmin=zmin,
            zmax=zmax,
            customdata=customdata,
            hovertemplate=hover,
            colorbar={"thickness": 12},
            texttemplate=text_format if small else None,
        )
    ]
    if boundary is not None:
        data.append(boundary)
    # One constructor call with the whole layout: every update_* call re-validates.
    return go.Figure(
        data=data,
        layout={
            "title": {"text": title, "font": {"size": 13}},
            "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
            "height": 360,
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
    with original) and error (diverging, centred on zero)."""
    rows, cols = exp.original.shape
    full = slice(None)
    rich = rows * cols <= RICH_HOVER_MAX_CELLS
    custom = _rich_customdata(exp, full, full) if rich else None
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
    vscale, vmin, vmax = _value_scale(exp)
    cmin, cmax = _code_range(exp)
    emax = _error_limit(exp)
    return OverviewFigures(
        original=_heatmap(
            "Original" + suffix, first, vscale, vmin, vmax, custom, boundary, "value", nonfinite
        ),
        codes=_heatmap(
            "Quantized codes" + suffix,
            red["codes"],
            "Cividis",
            cmin,
            cmax,
            custom,
            boundary,
            "code",
            nonfinite,
        ),
        dequantized=_heatmap(
            "Dequantized (same scale as original)" + suffix,
            red["dequantized"],
            vscale,
            vmin,
            vmax,
            custom,
            boundary,
            "dequantized",
            nonfinite,
        ),
        error=_heatmap(
            "Error = original − dequantized" + suffix,
            red["error"],
            "RdBu",
            -emax,
            emax,
            custom,
            boundary,
            "error",
            nonfinite,
        ),
    )


def zoom_figure(exp: Exploration, row0: int, col0: int, size: int) -> go.Figure:
    """Full-resolution ``size`` x ``size`` window at ``(row0, col0)`` of all four panels,
    each cell's hover naming value, code, dequantized value, error, scale and zero point."""
    rows, cols = exp.original.shape
    row0 = max(0, min(row0, rows - 1))
    col0 = max(0, min(col0, cols - 1))
    rsl = slice(row0, min(rows, row0 + size))
    csl = slice(col0, min(cols, col0 + size))
    custom = _rich_customdata(exp, rsl, csl)
    x = np.arange(csl.start, csl.stop, dtype=np.float32)
    y = np.arange(rsl.start, rsl.stop, dtype=np.float32)
    vscale, vmin, vmax = _value_scale(exp)
    cmin, cmax = _code_range(exp)
    emax = _error_limit(exp)
    titles = ("Original", "Codes", "Dequantized", "Error")
    # Slice before any conversion: only the window is ever copied.
    panels = (
        (exp.original[rsl, csl], vscale, vmin, vmax),
        (_display_codes(exp, rsl, csl), "Cividis", cmin, cmax),
        (exp.dequantized[rsl, csl], vscale, vmin, vmax),
        (exp.error_window(rsl, csl), "RdBu", -emax, emax),
    )
    gap, width = 0.03, (1 - 3 * 0.03) / 4
    data, layout = [], {}
    for i, (t, scale, lo, hi) in enumerate(panels):
        suffix = "" if i == 0 else str(i + 1)
        left = i * (width + gap)
        data.append(
            go.Heatmap(
                z=t.numpy(force=True).astype(np.float32),
                x=x,
                y=y,
                colorscale=scale,
                zmin=lo,
                zmax=hi,
                customdata=custom,
                hovertemplate=_RICH_HOVER,
                showscale=False,
                xaxis=f"x{suffix}",
                yaxis=f"y{suffix}",
            )
        )
        layout[f"xaxis{suffix}"] = {"domain": [left, left + width], "showgrid": False}
        layout[f"yaxis{suffix}"] = {
            "autorange": "reversed",
            "showgrid": False,
            "anchor": f"x{suffix}",
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
        height=330,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        plot_bgcolor="#ff00ff" if exp.finite is not None else "white",
    )
    return go.Figure(data=data, layout=layout)
