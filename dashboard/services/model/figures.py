"""Figures of the whole-model page: per-layer bars and per-sentence embedding cosines."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .embeddings import EmbeddingComparison
from .evaluate import LayerMetric

__all__ = ["layer_figure", "sentence_cosine_figure"]


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
