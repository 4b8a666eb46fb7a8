"""Figures for the compare pages: Pareto plot, A/B heatmaps, per-layer bars.

Plain functions, data in and ``plotly.graph_objects.Figure`` out. Every matrix is cast to
float32 numpy (float16 would fall back to a JSON list, float64 doubles the payload) and
reduced by ``reduce_2d`` to at most ``max_cells`` cells per figure, so a figure's JSON stays
under about 1.5 MB for any tensor size; a reduced chart says so in its title.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .ab import ABResult
from .model_eval import EmbeddingComparison, LayerMetric
from .reduce import DEFAULT_MAX_CELLS, Reduced, Reduction, reduce_2d
from .sweep import ErrorAxis, pareto_mask

__all__ = [
    "DEFAULT_MAX_CELLS",
    "Reduced",
    "Reduction",
    "ab_difference_figure",
    "ab_error_figure",
    "ab_winner_figure",
    "layer_figure",
    "pareto_figure",
    "reduce_2d",
    "sentence_cosine_figure",
]

_DIVERGING = "RdBu_r"  # negative blue, zero white, positive red
_WINNER_SCALE = [[0.0, "#2166ac"], [0.5, "#e0e0e0"], [1.0, "#b2182b"]]
_FRONTIER = "#d62728"
_DOMINATED = "#9e9e9e"


# --- Pareto -------------------------------------------------------------------------------


def pareto_figure(table: pd.DataFrame, axis: ErrorAxis = ErrorAxis.MSE) -> go.Figure:
    """Error (``axis``) against bits per element, one point per row of ``sweep_table``.

    Frontier points (minimise bits and MSE, or maximise SQNR) are red and joined by a
    line; the rest are grey. Every point's ``customdata`` is its ``scheme_id``: a page reads
    it from a plotly selection event to open the scheme. MSE uses a log axis. Points that
    cannot be drawn (zero MSE on a log axis, infinite SQNR) are left out and counted in the
    title; they still count when the frontier is computed.
    """
    if not isinstance(axis, ErrorAxis):
        raise TypeError(f"axis must be an ErrorAxis, got {axis!r}")
    col = axis.value
    bits = table["bits_per_element"].to_numpy(dtype=np.float64)
    err = table[col].to_numpy(dtype=np.float64)
    front = np.asarray(pareto_mask(bits, err, minimize=axis.minimize), dtype=bool)
    drawable = np.isfinite(err) & ((err > 0) if axis is ErrorAxis.MSE else True)
    fig = go.Figure()
    hover = "%{text}<br>%{x:.4g} bits/element<br>" + axis.label + " %{y:.4g}<extra></extra>"
    for on_front, name, color in ((False, "dominated", _DOMINATED), (True, "frontier", _FRONTIER)):
        sel = drawable & (front == on_front)
        order = np.argsort(bits[sel], kind="stable") if on_front else slice(None)
        x = bits[sel][order]
        y = err[sel][order]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers" if on_front else "markers",
                name=name,
                text=table["scheme"].to_numpy()[sel][order].tolist(),
                customdata=table["scheme_id"].to_numpy()[sel][order].tolist(),
                hovertemplate=hover,
                marker={"color": color, "size": 10 if on_front else 8},
                # Sorted by bits, "hv" draws the best error reachable at each bit budget.
                line={"color": color, "shape": "hv"},
            )
        )
    title = f"{axis.label} vs bits per element ({int(front.sum())} on the frontier)"
    hidden = int((~drawable).sum())
    if hidden:
        title += f"; {hidden} exact scheme(s) not drawn"
    fig.update_layout(
        title=title,
        xaxis_title="bits per element (codes + scales + zero points)",
        yaxis_title=axis.label,
        yaxis_type="log" if axis is ErrorAxis.MSE else "linear",
        clickmode="event+select",
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


# --- A/B ----------------------------------------------------------------------------------


def _heatmap(reduced: Reduced, **kwargs: object) -> go.Heatmap:
    return go.Heatmap(
        z=reduced.values,
        x=reduced.col_starts(),
        y=reduced.row_starts(),
        hovertemplate="row %{y}, col %{x}<br>%{z:.4g}<extra></extra>",
        **kwargs,
    )


def _title(text: str, *notes: str) -> str:
    extra = "; ".join(n for n in notes if n)
    return f"{text}<br><sup>{extra}</sup>" if extra else text


def ab_error_figure(
    ab: ABResult, max_cells: int = DEFAULT_MAX_CELLS, how: Reduction = Reduction.MAX_ABS
) -> go.Figure:
    """A's and B's error maps ``x - x_hat`` side by side on one symmetric colour scale
    ``[-m, m]``, ``m`` the largest ``|error|`` of either scheme (from the full maps).
    Each panel gets ``max_cells // 2`` cells."""
    half = max(1, max_cells // 2)
    ra = reduce_2d(ab.error_a, half, how)
    rb = reduce_2d(ab.error_b, half, how)
    m = ab.max_abs_error or 1.0
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=(f"A: {ab.config_a.describe()}", f"B: {ab.config_b.describe()}"),
    )
    fig.add_trace(_heatmap(ra, coloraxis="coloraxis"), row=1, col=1)
    fig.add_trace(_heatmap(rb, coloraxis="coloraxis"), row=1, col=2)
    fig.update_layout(
        title=_title("Quantization error x − x̂ (shared scale)", ra.note()),
        coloraxis={"colorscale": _DIVERGING, "cmin": -m, "cmax": m, "colorbar_title": "error"},
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def ab_difference_figure(
    ab: ABResult, max_cells: int = DEFAULT_MAX_CELLS, how: Reduction = Reduction.MAX_ABS
) -> go.Figure:
    """``|e_a| - |e_b|`` on a symmetric scale: blue where A is closer, red where B is."""
    r = reduce_2d(ab.abs_error_difference(), max_cells, how)
    m = float(np.abs(r.values).max()) or 1.0
    fig = go.Figure(
        _heatmap(r, colorscale=_DIVERGING, zmin=-m, zmax=m, colorbar={"title": "|eA|−|eB|"})
    )
    fig.update_layout(
        title=_title("|error A| − |error B| (blue: A closer, red: B closer)", r.note())
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def ab_winner_figure(ab: ABResult, max_cells: int = DEFAULT_MAX_CELLS) -> go.Figure:
    """Which scheme has the lower MSE in each block (blue A, grey tie, red B), with totals.

    Reduced maps show each cell's mean of the winner codes (-1 A, 0 tie, +1 B): the net
    share of blocks won."""
    r = reduce_2d(ab.winner.astype(np.float32), max_cells, Reduction.MEAN)
    t = ab.totals
    fig = go.Figure(
        _heatmap(
            r,
            colorscale=_WINNER_SCALE,
            zmin=-1,
            zmax=1,
            colorbar={
                "tickvals": [-1, 0, 1],
                "ticktext": ["A wins", "tie", "B wins"],
            },
        )
    )
    head = f"Lower MSE per block: A won {t.a}, B won {t.b}, ties {t.ties} (of {t.total})"
    fig.update_layout(title=_title(head, r.note()))
    fig.update_yaxes(autorange="reversed")
    return fig


# --- Model ---------------------------------------------------------------------------------


def layer_figure(table: pd.DataFrame, metric: LayerMetric = LayerMetric.SQNR_DB) -> go.Figure:
    """Horizontal bars of ``metric`` per layer, in the table's order (``layer_table`` puts
    the most sensitive layer first, drawn at the top). MSE uses a log axis."""
    if not isinstance(metric, LayerMetric):
        raise TypeError(f"metric must be a LayerMetric, got {metric!r}")
    values = table[metric.value].to_numpy(dtype=np.float64)
    names = table["name"].tolist()
    fig = go.Figure(
        go.Bar(
            x=values,
            y=names,
            orientation="h",
            hovertemplate="%{y}<br>" + metric.label + " %{x:.4g}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"{metric.label} per layer (most sensitive first)",
        xaxis_title=metric.label,
        xaxis_type="log" if metric is LayerMetric.MSE else "linear",
        height=max(300, 22 * len(names) + 140),
    )
    # Every layer labelled (a category axis would otherwise skip labels that crowd).
    fig.update_yaxes(autorange="reversed", automargin=True, type="category", dtick=1)
    return fig


def sentence_cosine_figure(comparison: EmbeddingComparison) -> go.Figure:
    """Cosine similarity of each sentence's fp32 and quantized embeddings."""
    sentences = [s.sentence for s in comparison.sentences]
    cos = np.asarray([s.cosine for s in comparison.sentences], dtype=np.float64)
    lo = float(cos.min()) if cos.size else 0.0
    fig = go.Figure(
        go.Bar(
            x=cos,
            y=[s if len(s) <= 48 else s[:45] + "…" for s in sentences],
            orientation="h",
            hovertext=sentences,
            hovertemplate="%{hovertext}<br>cosine %{x:.6f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"fp32 vs {comparison.config.describe()}: embedding cosine similarity",
        xaxis={"title": "cosine similarity", "range": [min(lo, 0.99) - 0.005, 1.0005]},
        height=max(250, 36 * len(sentences) + 140),
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig
