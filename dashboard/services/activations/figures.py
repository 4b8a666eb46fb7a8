"""Figures for activations and layer outputs: data in, ``go.Figure`` out, no Streamlit.

Matrices are block-reduced for display (``display.reduce``): values by their mean, errors by
their max-|value| so that one clipped outlier stays visible. Arrays reach plotly as float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from quant_core import AlphaSweep, ErrorMetrics, LinearEval, feature_absmax, outlier_features

from ..display.reduce import Reduced, Reduction, reduce_2d
from ..explorer.colour import LIMIT_PERCENTILE, robust_limit

__all__ = [
    "LAYER_MAX_CELLS",
    "OUTLIER_FACTOR",
    "LayerFigures",
    "SmoothingFigures",
    "layer_figures",
    "matrix_heatmap",
    "outlier_strip_figure",
    "smoothing_figures",
    "sweep_figure",
]

# A page shows up to seven layer heatmaps: 128 x 384 cells each keeps a chart near 200 kB.
LAYER_MAX_CELLS = 128 * 384
OUTLIER_FACTOR = 6.0
"""A feature is an outlier when its ``max|x_j|`` exceeds this many times the median's."""

_NORMAL = "#4c78a8"
_OUTLIER = "#e45756"


def outlier_strip_figure(x: torch.Tensor, factor: float = OUTLIER_FACTOR) -> go.Figure:
    """One bar per feature of ``x`` ``[tokens, features]``: its ``max_t |x[t, j]|``, the
    outliers (``outlier_features(x, factor=factor)``) in red, the threshold
    ``factor * median`` as a dashed line. The title counts the outliers and names the
    largest."""
    amax = feature_absmax(x).numpy()
    outliers = outlier_features(x, factor=factor).numpy()
    colors = np.full(amax.shape[0], _NORMAL, dtype=object)
    colors[outliers] = _OUTLIER
    threshold = float(factor * np.median(amax))
    top = int(np.argmax(amax))
    fig = go.Figure(
        go.Bar(
            x=np.arange(amax.shape[0], dtype=np.int32),
            y=amax.astype(np.float32),
            marker={"color": colors.tolist(), "line": {"width": 0}},
            hovertemplate="feature %{x}<br>max |x| %{y:.4g}<extra></extra>",
        )
    )
    fig.add_hline(
        y=threshold,
        line={"dash": "dash", "color": "grey", "width": 1},
        annotation_text=f"{factor:g}× median",
        annotation_position="top left",
    )
    n = outliers.shape[0]
    fig.update_layout(
        title=(
            f"max |x| per feature: {n} outlier feature{'s' if n != 1 else ''} "
            f"(> {factor:g}× median); largest: feature {top}, {amax[top]:.4g}"
        ),
        xaxis_title="input feature j",
        yaxis_title="max over tokens |x|",
        height=230,
        margin={"l": 50, "r": 10, "t": 40, "b": 40},
        bargap=0,
        showlegend=False,
    )
    return fig


def _shared_limit(*shown: Reduced) -> float:
    """``±`` limit for maps compared on one scale: the explorer's robust limit (the 99.5th
    percentile of ``|value|`` over every shown cell), so one extreme value among thousands
    does not wash the maps out."""
    return robust_limit(np.concatenate([r.values.reshape(-1) for r in shown]))


def _heatmap(red: Reduced, title: str, limit: float, x_title: str, detail: str = "") -> go.Figure:
    """``red`` as a diverging heatmap at ``±limit``. The title's first line is ``title``
    alone (a third of the page is narrow); ``detail``, the reduction and the colour limits
    (with the count of cells beyond them, drawn saturated) follow in small print."""
    limit = limit if limit > 0 else 1.0
    beyond = int(np.count_nonzero(np.abs(red.values) > limit))
    notes = [
        detail,
        red.note(),
        f"±{limit:.3g} ({LIMIT_PERCENTILE:g}th pct of |value|; {beyond:,} beyond, saturated)",
    ]
    lines = [n for n in notes if n]
    sub = "<br>".join(lines)
    fig = go.Figure(
        go.Heatmap(
            z=red.values,
            x=red.col_centres(),
            y=red.row_centres(),
            colorscale="RdBu_r",
            zmin=-limit,
            zmax=limit,
            hovertemplate="token %{y:.0f}<br>feature %{x:.0f}<br>%{z:.4g}<extra></extra>",
        )
    )
    fig.update_layout(
        # Anchored at the top of the figure, growing down into a margin sized for its lines.
        title={
            "text": f"{title}<br><span style='font-size:11px'>{sub}</span>",
            "font": {"size": 14},
            "yref": "container",
            "y": 1,
            "yanchor": "top",
            "pad": {"t": 14},
        },
        xaxis_title=x_title,
        yaxis_title="token",
        yaxis_autorange="reversed",
        height=360,
        margin={"l": 50, "r": 10, "t": 44 + 15 * len(lines), "b": 40},
    )
    return fig


def matrix_heatmap(
    matrix: torch.Tensor,
    title: str,
    *,
    how: Reduction = Reduction.MEAN,
    limit: float | None = None,
    max_cells: int = LAYER_MAX_CELLS,
    x_title: str = "output feature",
) -> go.Figure:
    """A ``[tokens, features]`` matrix as a diverging heatmap around 0, reduced to at most
    ``max_cells`` cells by ``how`` (the reduction is said under the title). ``limit``: the
    colour scale's ``±limit`` (default: ``robust_limit`` of the shown cells, the 99.5th
    percentile of their ``|value|``; cells beyond are counted in the title and saturate)."""
    red = reduce_2d(matrix, max_cells, how)
    return _heatmap(red, title, _shared_limit(red) if limit is None else limit, x_title)


@dataclass(frozen=True, eq=False)
class LayerFigures:
    """``y`` and ``y_hat`` on one colour scale; ``error``, ``weight_only`` and
    ``activation_only`` (``None`` when that side is float) on another, shared."""

    y: go.Figure
    y_hat: go.Figure
    error: go.Figure
    weight_only: go.Figure | None
    activation_only: go.Figure | None


def _db(v: float) -> str:
    return "∞ dB (exact)" if np.isinf(v) and v > 0 else f"{v:.1f} dB"


def layer_figures(ev: LinearEval, max_cells: int = LAYER_MAX_CELLS) -> LayerFigures:
    """The heatmaps of one layer evaluation: ``Y = X W^T + b``, ``Y_hat``, ``Y_hat - Y``
    and the weight-only ``X W_hat^T + b - Y`` and activation-only ``X_hat W^T + b - Y``
    errors (tokens x output features). ``Y`` and ``Y_hat`` share one colour scale, the
    errors another; each at the robust limit of its maps' shown cells (``_shared_limit``)."""
    y = reduce_2d(ev.y, max_cells, Reduction.MEAN)
    y_hat = reduce_2d(ev.y_hat, max_cells, Reduction.MEAN)
    value_limit = _shared_limit(y, y_hat)
    errors = {
        "error": (ev.y_hat, ev.metrics),
        "weight_only": (ev.y_weight_only, ev.weight_only),
        "activation_only": (ev.y_activation_only, ev.activation_only),
    }
    reduced = {
        name: reduce_2d(y_q - ev.y, max_cells, Reduction.MAX_ABS)
        for name, (y_q, m) in errors.items()
        if y_q is not None and m is not None
    }
    error_limit = _shared_limit(*reduced.values())
    titles = {
        "error": "Output error Ŷ − Y",
        "weight_only": "Weight only X Ŵᵀ + b − Y",
        "activation_only": "Activation only X̂ Wᵀ + b − Y",
    }

    def error_map(name: str) -> go.Figure | None:
        m = errors[name][1]
        if name not in reduced or m is None:
            return None
        detail = f"SQNR {_db(m.sqnr_db)}, MSE {m.mse:.3g}"
        return _heatmap(reduced[name], titles[name], error_limit, "output feature", detail)

    error = error_map("error")
    if error is None:  # y_hat and metrics always exist; keeps the type checker honest
        raise ValueError("layer evaluation without an output")
    return LayerFigures(
        y=_heatmap(y, "Y = X Wᵀ + b (float)", value_limit, "output feature"),
        y_hat=_heatmap(y_hat, "Ŷ = X̂ Ŵᵀ + b (quantized)", value_limit, "output feature"),
        error=error,
        weight_only=error_map("weight_only"),
        activation_only=error_map("activation_only"),
    )


def sweep_figure(sweep: AlphaSweep, alpha: float | None, current: ErrorMetrics | None) -> go.Figure:
    """Output MSE against SmoothQuant's alpha (log scale when every point is > 0), the
    scheme without smoothing as a dashed line, and the current ``alpha`` with its
    ``current`` metrics as a marker."""
    mse = np.array(sweep.mse(), dtype=np.float64)
    fig = go.Figure(
        go.Scatter(
            x=list(sweep.alphas),
            y=mse.tolist(),
            mode="lines+markers",
            name="with SmoothQuant",
            hovertemplate="α %{x:.2f}<br>output MSE %{y:.4g}<extra></extra>",
        )
    )
    fig.add_hline(
        y=sweep.baseline.mse,
        line={"dash": "dash", "color": "grey"},
        annotation_text=f"no smoothing: {sweep.baseline.mse:.3g}",
        annotation_position="top right",
    )
    if alpha is not None and current is not None:
        fig.add_trace(
            go.Scatter(
                x=[alpha],
                y=[current.mse],
                mode="markers",
                marker={"size": 14, "color": _OUTLIER, "symbol": "diamond"},
                name=f"α = {alpha:.2f}",
                hovertemplate="current α %{x:.2f}<br>output MSE %{y:.4g}<extra></extra>",
            )
        )
    positive = bool((mse > 0).all()) and sweep.baseline.mse > 0
    fig.update_layout(
        title=f"Output error against α (best α = {sweep.best_alpha:.1f})",
        xaxis_title="α (migration strength)",
        yaxis_title="output MSE",
        yaxis_type="log" if positive else "linear",
        height=330,
        margin={"l": 60, "r": 10, "t": 40, "b": 40},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


@dataclass(frozen=True, eq=False)
class SmoothingFigures:
    """SmoothQuant before and after: the input ``X`` and ``X / s`` on one colour scale, the
    output errors without and with smoothing on another."""

    x_before: go.Figure
    x_after: go.Figure
    error_before: go.Figure
    error_after: go.Figure


def smoothing_figures(
    x: torch.Tensor, base: LinearEval, smoothed: LinearEval, max_cells: int = LAYER_MAX_CELLS
) -> SmoothingFigures:
    """``x`` ``[tokens, in]``: the evaluation input; ``base``/``smoothed``: the same scheme
    without and with SmoothQuant (``smoothed.smoothing`` holds ``s``, ``ValueError`` if
    not)."""
    if smoothed.smoothing is None:
        raise ValueError("smoothed was evaluated without SmoothQuant factors")
    x_after = x / smoothed.smoothing
    xs = {
        "before": reduce_2d(x, max_cells, Reduction.MAX_ABS),
        "after": reduce_2d(x_after, max_cells, Reduction.MAX_ABS),
    }
    es = {
        "before": reduce_2d(base.error, max_cells, Reduction.MAX_ABS),
        "after": reduce_2d(smoothed.error, max_cells, Reduction.MAX_ABS),
    }
    x_limit, e_limit = _shared_limit(*xs.values()), _shared_limit(*es.values())

    def x_map(which: str, title: str) -> go.Figure:
        return _heatmap(xs[which], title, x_limit, "input feature")

    def e_map(which: str, ev: LinearEval, title: str) -> go.Figure:
        m = ev.metrics
        detail = f"SQNR {_db(m.sqnr_db)}, MSE {m.mse:.3g}"
        return _heatmap(es[which], title, e_limit, "output feature", detail)

    return SmoothingFigures(
        x_before=x_map("before", "Input X (before smoothing)"),
        x_after=x_map("after", "Input X / s (after smoothing)"),
        error_before=e_map("before", base, "Output error without SmoothQuant"),
        error_after=e_map("after", smoothed, "Output error with SmoothQuant"),
    )
