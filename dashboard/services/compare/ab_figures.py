"""Figures of the A/B page: both error maps on one scale, their difference, the winners.

Plain functions, data in and ``plotly.graph_objects.Figure`` out. Every matrix is cast to
float32 numpy (float16 would fall back to a JSON list, float64 doubles the payload) and
reduced by ``reduce_2d`` to at most ``max_cells`` cells per figure, so a figure's JSON stays
under about 1.5 MB for any tensor size; a reduced chart says so in its title.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..display.reduce import DEFAULT_MAX_CELLS, Reduced, Reduction, reduce_2d
from .ab import ABResult
from .ab_summary import block_unit

__all__ = ["ab_difference_figure", "ab_error_figure", "ab_winner_figure"]

_DIVERGING = "RdBu_r"  # negative blue, zero white, positive red
_WINNER_SCALE = [[0.0, "#2166ac"], [0.5, "#e0e0e0"], [1.0, "#b2182b"]]


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
        subplot_titles=(f"A: {ab.scheme_a.label}", f"B: {ab.scheme_b.label}"),
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
    head = (
        f"Lower MSE in each {block_unit(ab)}: A won {t.a}, B won {t.b}, ties {t.ties} "
        f"(of {t.total})"
    )
    fig.update_layout(title=_title(head, r.note()))
    fig.update_yaxes(autorange="reversed")
    return fig
