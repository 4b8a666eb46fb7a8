"""Figures for the compare pages: Pareto plot, A/B heatmaps, per-layer bars.

Plain functions, data in and ``plotly.graph_objects.Figure`` out. Every matrix is cast to
float32 numpy (float16 would fall back to a JSON list, float64 doubles the payload) and
reduced by ``reduce_2d`` to at most ``max_cells`` cells per figure, so a figure's JSON stays
under about 1.5 MB for any tensor size; a reduced chart says so in its title.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .ab import ABResult
from .model_eval import EmbeddingComparison, LayerMetric
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

DEFAULT_MAX_CELLS = 512 * 512
"""Cells per figure: 262,144 float32 values are 1 MB, about 1.4 MB as base64 JSON."""

_DIVERGING = "RdBu_r"  # negative blue, zero white, positive red
_WINNER_SCALE = [[0.0, "#2166ac"], [0.5, "#e0e0e0"], [1.0, "#b2182b"]]
_FRONTIER = "#d62728"
_DOMINATED = "#9e9e9e"


class Reduction(enum.Enum):
    """How ``reduce_2d`` summarises a block of cells.

    MEAN: the block's mean; ``[[1, 3], [-2, 2]]`` -> ``1.0``.
    MAX_ABS: the value of largest magnitude, sign kept; ``[[1, 3], [-4, 2]]`` -> ``-4.0``.
    Keeps extremes visible: the right choice for error maps.
    """

    MEAN = "mean"
    MAX_ABS = "max_abs"

    @property
    def label(self) -> str:
        return "mean" if self is Reduction.MEAN else "max |value|"


@dataclass(frozen=True, eq=False)
class Reduced:
    """``values`` (float32): the reduced matrix; cell ``(i, j)`` summarises source rows
    ``i*row_step ..`` and columns ``j*col_step ..`` (edge blocks may be smaller).
    ``source_shape``: the shape before reduction."""

    values: np.ndarray
    row_step: int
    col_step: int
    source_shape: tuple[int, int]
    how: Reduction

    @property
    def is_reduced(self) -> bool:
        return self.row_step > 1 or self.col_step > 1

    def row_starts(self) -> np.ndarray:
        """The source row each reduced row starts at (int32), for axis ticks and hover."""
        return np.arange(self.values.shape[0], dtype=np.int32) * self.row_step

    def col_starts(self) -> np.ndarray:
        return np.arange(self.values.shape[1], dtype=np.int32) * self.col_step

    def note(self) -> str:
        """``""`` when nothing was reduced, else e.g.
        ``"downsampled 4096×4096 → 512×512 (8×8 blocks, max |value|)"``."""
        if not self.is_reduced:
            return ""
        (r, c), (rr, cc) = self.source_shape, self.values.shape
        return (
            f"downsampled {r}×{c} → {rr}×{cc} "
            f"({self.row_step}×{self.col_step} blocks, {self.how.label})"
        )


def _steps(rows: int, cols: int, max_cells: int) -> tuple[int, int]:
    """The smallest square step ``s`` with ``ceil(rows/s) * ceil(cols/s) <= max_cells``,
    clipped to each dimension (so a long thin matrix is reduced along its length only)."""
    if rows * cols <= max_cells:
        return 1, 1
    lo, hi = 1, max(rows, cols)
    while lo < hi:
        mid = (lo + hi) // 2
        if math.ceil(rows / mid) * math.ceil(cols / mid) <= max_cells:
            hi = mid
        else:
            lo = mid + 1
    return min(lo, rows), min(lo, cols)


def reduce_2d(matrix: np.ndarray, max_cells: int, how: Reduction) -> Reduced:
    """Block-reduce a 2-D matrix to at most ``max_cells`` cells, as float32.

    Blocks are ``s×s`` with the smallest ``s`` that fits (``s`` clipped to a dimension that
    is shorter). A matrix already small enough comes back unchanged (as float32), steps 1.
    Example: ``4096×4096`` with ``max_cells = 512*512`` -> ``8×8`` blocks, ``512×512``.
    Raises ``ValueError`` for a matrix that is not 2-D and non-empty, or ``max_cells < 1``.
    """
    m = np.asarray(matrix)
    if m.ndim != 2 or m.size == 0:
        raise ValueError(f"reduce_2d needs a non-empty 2-D matrix, got shape {m.shape}")
    if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
        raise ValueError(f"max_cells must be a positive int, got {max_cells!r}")
    if not isinstance(how, Reduction):
        raise TypeError(f"how must be a Reduction, got {how!r}")
    rows, cols = m.shape
    rs, cs = _steps(rows, cols, max_cells)
    if rs == 1 and cs == 1:
        values = np.ascontiguousarray(m, dtype=np.float32)
        return Reduced(values, 1, 1, (rows, cols), how)
    out_r, out_c = math.ceil(rows / rs), math.ceil(cols / cs)
    if out_r * rs == rows and out_c * cs == cols:
        padded = m.astype(np.float32, copy=False)
    else:
        padded = np.zeros((out_r * rs, out_c * cs), dtype=np.float32)
        padded[:rows, :cols] = m
    blocks = padded.reshape(out_r, rs, out_c, cs)
    if how is Reduction.MEAN:
        sums = blocks.sum(axis=(1, 3), dtype=np.float64)
        row_n = np.minimum(rs, rows - np.arange(out_r) * rs)
        col_n = np.minimum(cs, cols - np.arange(out_c) * cs)
        values = sums / np.outer(row_n, col_n)
    else:
        flat = blocks.transpose(0, 2, 1, 3).reshape(out_r, out_c, rs * cs)
        idx = np.abs(flat).argmax(axis=2)[..., None]
        values = np.take_along_axis(flat, idx, axis=2)[..., 0]
    return Reduced(np.ascontiguousarray(values, dtype=np.float32), rs, cs, (rows, cols), how)


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
        title=_title("Quantization error x̂ − x (shared scale)", ra.note()),
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
