"""Figures of the whole-model page: per-layer bars and per-sentence embedding cosines."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..display.text import html_literal
from .embeddings import EmbeddingComparison
from .evaluate import LayerMetric, order_by

__all__ = ["cosine_figure", "layer_figure", "sentence_cosine_figure"]


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


def cosine_figure(sentences: Sequence[str], cosines: Sequence[float], scheme: str) -> go.Figure:
    """One bar per sentence: the cosine of its fp32 and quantized (``scheme``) embeddings."""
    if len(sentences) != len(cosines):
        raise ValueError(f"{len(sentences)} sentences but {len(cosines)} cosines")
    cos = np.asarray(cosines, dtype=np.float64)
    lo = float(cos.min()) if cos.size else 0.0
    fig = go.Figure(
        go.Bar(
            x=cos,
            # Typed text: plotly reads HTML in labels and hovers.
            y=[html_literal(s if len(s) <= 48 else s[:45] + "…") for s in sentences],
            orientation="h",
            hovertext=[html_literal(s) for s in sentences],
            hovertemplate="%{hovertext}<br>cosine %{x:.6f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"fp32 vs {scheme}: embedding cosine similarity",
        xaxis={"title": "cosine similarity", "range": [min(lo, 0.99) - 0.005, 1.0005]},
        height=max(250, 36 * len(sentences) + 140),
    )
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig
