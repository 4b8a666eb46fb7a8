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

from ..display.reduce import Reduction, reduce_2d

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
    ``max_cells`` cells by ``how`` (the reduction is said in the title). ``limit``: the
    colour scale's ``±limit`` (default: the matrix's largest ``|value|``), shared by figures
    that should be compared."""
    red = reduce_2d(matrix, max_cells, how)
    if limit is None:
        limit = float(np.abs(red.values).max()) if red.values.size else 1.0
    limit = limit if limit > 0 else 1.0
    note = red.note()
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
        title=title + (f"<br><sup>{note}</sup>" if note else ""),
        xaxis_title=x_title,
        yaxis_title="token",
        yaxis_autorange="reversed",
        height=330,
        margin={"l": 50, "r": 10, "t": 60, "b": 40},
    )
    return fig


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
    errors (tokens x output features)."""
    value_limit = float(max(ev.y.abs().max(), ev.y_hat.abs().max()))
    parts = [(ev.y_hat, ev.metrics)]
    if ev.y_weight_only is not None:
        parts.append((ev.y_weight_only, ev.weight_only))
    if ev.y_activation_only is not None:
        parts.append((ev.y_activation_only, ev.activation_only))
    error_limit = max(m.max_abs for _, m in parts if m is not None)

    def error_map(y_q: torch.Tensor | None, label: str, m: ErrorMetrics | None) -> go.Figure | None:
        if y_q is None or m is None:
            return None
        return matrix_heatmap(
            y_q - ev.y,
            f"{label}: SQNR {_db(m.sqnr_db)}, MSE {m.mse:.3g}",
            how=Reduction.MAX_ABS,
            limit=error_limit,
            max_cells=max_cells,
        )

    error = error_map(ev.y_hat, "Output error Ŷ − Y", ev.metrics)
    if error is None:  # y_hat and metrics always exist; keeps the type checker honest
        raise ValueError("layer evaluation without an output")
    return LayerFigures(
        y=matrix_heatmap(ev.y, "Y = X Wᵀ + b (float)", limit=value_limit, max_cells=max_cells),
        y_hat=matrix_heatmap(
            ev.y_hat, "Ŷ = X̂ Ŵᵀ + b (quantized)", limit=value_limit, max_cells=max_cells
        ),
        error=error,
        weight_only=error_map(ev.y_weight_only, "Weight only X Ŵᵀ + b − Y", ev.weight_only),
        activation_only=error_map(
            ev.y_activation_only, "Activation only X̂ Wᵀ + b − Y", ev.activation_only
        ),
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
    x_limit = float(max(x.abs().max(), x_after.abs().max()))
    e_limit = max(base.metrics.max_abs, smoothed.metrics.max_abs)

    def x_map(m: torch.Tensor, title: str) -> go.Figure:
        return matrix_heatmap(
            m,
            title,
            how=Reduction.MAX_ABS,
            limit=x_limit,
            max_cells=max_cells,
            x_title="input feature",
        )

    def e_map(ev: LinearEval, title: str) -> go.Figure:
        m = ev.metrics
        return matrix_heatmap(
            ev.error,
            f"{title}: SQNR {_db(m.sqnr_db)}, MSE {m.mse:.3g}",
            how=Reduction.MAX_ABS,
            limit=e_limit,
            max_cells=max_cells,
        )

    return SmoothingFigures(
        x_before=x_map(x, "Input X (before smoothing)"),
        x_after=x_map(x_after, "Input X / s (after smoothing)"),
        error_before=e_map(base, "Output error without SmoothQuant"),
        error_after=e_map(smoothed, "Output error with SmoothQuant"),
    )
