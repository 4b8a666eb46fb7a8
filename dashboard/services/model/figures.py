"""Figures of the whole-model page: per-layer bars and per-sentence embedding cosines."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..display.text import html_literal
from .embeddings import EmbeddingComparison
from .evaluate import LayerMetric, order_by

__all__ = ["COSINE_GAP_FLOOR", "cosine_figure", "layer_figure", "sentence_cosine_figure"]


def layer_figure(table: pd.DataFrame, metric: LayerMetric = LayerMetric.SQNR_DB) -> go.Figure:
    """Horizontal bars of ``metric`` per layer, worst first (drawn at the top): ordered by
    the plotted values themselves (``order_by``: descending for MSE, bits and bytes,
    ascending for SQNR and cosine), so the bars are in the order of what they show. The
    title and axis say which way is worse. MSE uses a log axis. ``ValueError`` when the
    table has no column for ``metric``."""
    ordered = order_by(table, metric)
    values = ordered[metric.value].to_numpy(dtype=np.float64)
    names = [html_literal(n) for n in ordered["name"]]  # a file's names: plotly reads HTML
    fig = go.Figure(
        go.Bar(
            x=values,
            y=names,
            orientation="h",
            hovertemplate="%{y}<br>" + metric.label + " %{x:.4g}<extra></extra>",
        )
    )
    first = "most sensitive first" if metric.is_error else "largest first"
    fig.update_layout(
        title=f"{metric.label} per layer ({first}; {metric.worse})",
        xaxis_title=f"{metric.label} ({metric.worse})",
        xaxis_type="log" if metric in (LayerMetric.MSE, LayerMetric.OUTPUT_MSE) else "linear",
        height=max(300, 22 * len(names) + 140),
    )
    # Every layer labelled (a category axis would otherwise skip labels that crowd).
    fig.update_yaxes(autorange="reversed", automargin=True, type="category", dtick=1)
    return fig


def sentence_cosine_figure(comparison: EmbeddingComparison) -> go.Figure:
    """Cosine similarity of each sentence's fp32 and quantized embeddings."""
    return cosine_figure(
        [s.sentence for s in comparison.sentences],
        [s.cosine for s in comparison.sentences],
        comparison.config.name,
    )


# 1 - cosine of two float32 embeddings is exact only to about float32's epsilon: a smaller
# gap (or an identical embedding, 0) is drawn at this floor, and the title says so.
COSINE_GAP_FLOOR = 1e-7
# Where the page's hint puts its marks: cosine 0.999 and 0.99.
_MARKS = (1e-3, 1e-2)


def cosine_figure(sentences: Sequence[str], cosines: Sequence[float], scheme: str) -> go.Figure:
    """One point per sentence: ``1 − cosine`` of its fp32 and quantized (``scheme``)
    embeddings, on a logarithmic axis with dotted marks at 0.001 and 0.01 (cosine 0.999 and
    0.99). Cosines of a good scheme all sit in 0.99..1, where a linear cosine axis either
    starts near 0.99 (small differences look large) or at 0 (every bar looks the same);
    the gap to 1 on a log axis shows each decade honestly. Gaps below
    ``COSINE_GAP_FLOOR`` are drawn at it; the hover gives the exact cosine."""
    if len(sentences) != len(cosines):
        raise ValueError(f"{len(sentences)} sentences but {len(cosines)} cosines")
    cos = np.asarray(cosines, dtype=np.float64)
    gap = 1.0 - cos
    floored = int((gap < COSINE_GAP_FLOOR).sum())
    drawn = np.maximum(gap, COSINE_GAP_FLOOR)
    fig = go.Figure(
        go.Scatter(
            x=drawn,
            # Typed text: plotly reads HTML in labels and hovers.
            y=[html_literal(s if len(s) <= 48 else s[:45] + "…") for s in sentences],
            mode="markers",
            marker={"size": 11},
            customdata=cos,
            hovertext=[html_literal(s) for s in sentences],
            hovertemplate="%{hovertext}<br>cosine %{customdata:.6f}<br>"
            "1 − cosine %{x:.3g}<extra></extra>",
        )
    )
    for mark in _MARKS:
        fig.add_vline(
            x=mark,
            line={"dash": "dot", "color": "#888"},
            annotation_text=f"cosine {1 - mark:g}",
            annotation_position="top",
        )
    top = float(drawn.max()) if drawn.size else _MARKS[-1]
    title = f"fp32 vs {html_literal(scheme)}: how far each sentence's embedding moved"
    if floored:
        title += f" ({floored} at or below {COSINE_GAP_FLOOR:g})"
    fig.update_layout(
        title=title,
        xaxis={
            "title": "1 − cosine similarity (log scale; left is closer to fp32)",
            "type": "log",
            "range": [np.log10(COSINE_GAP_FLOOR) - 0.2, np.log10(max(top, 0.05)) + 0.2],
        },
        height=max(250, 36 * len(sentences) + 140),
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig
