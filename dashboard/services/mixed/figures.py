"""The mixed-precision page's tables and figures: plain functions, rows in, data frames and
``plotly.graph_objects.Figure`` out.

The heatmap's colour is each cell's weighted SQNR, ``10 log10(energy / weighted_error)``
in dB (``quant_core.mixed.sensitivity``): higher is better, comparable across tensors of
any size, and equal to the plain SQNR where no input importance is known.
"""

from __future__ import annotations

import collections
import enum
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from quant_core import ggml_type
from quant_core.mixed import STORED, Allocation, CurvePoint, SensitivityRow
from quant_core.mixed.exports import NoLine, NoLineWhy

from ..compare.frontier import pareto_mask
from ..display.counts import counted
from ..display.text import html_literal
from ..model.fallbacks import SUPER_BLOCK
from .point_labels import AxisRange, PlotBox, label_annotation, place_labels
from .tasks import TaskResult

__all__ = [
    "KEPT_COLUMN",
    "HeatMetric",
    "allocation_table",
    "cell_notes",
    "curve_figure",
    "heatmap_figure",
    "mix_figure",
    "progress_table",
    "skip_reasons",
    "weighted_sqnr",
]

KEPT_COLUMN = "kept as stored"
"""The heatmap's column of the tensors kept as stored (``heatmap_figure``)."""

_MIXED = "#d62728"
_UNIFORM = "#1f77b4"


def weighted_sqnr(row: SensitivityRow) -> float:
    """``10 log10(energy / weighted_error)`` (NaN when skipped, inf when exact)."""
    if not row.ok or not math.isfinite(row.weighted_error):
        return math.nan
    if row.weighted_error == 0:
        return math.inf
    if row.energy <= 0:
        return -math.inf
    return 10 * math.log10(row.energy / row.weighted_error)


class HeatMetric(enum.Enum):
    """The heatmap's colour, higher is better. WEIGHTED_SQNR: ``10 log10(energy /
    weighted_error)`` dB (every table). OUTPUT_ERROR: ``-10 log10(output_mse)`` dB, the
    layer output's error on held-out inputs (the bundled model's linear layers; blank
    where no held-out inputs exist, as for embedding tables)."""

    WEIGHTED_SQNR = "weighted SQNR (dB)"
    OUTPUT_ERROR = "held-out output error, -10 log10(MSE) (dB)"

    def of(self, row: SensitivityRow) -> float:
        if self is HeatMetric.WEIGHTED_SQNR:
            return weighted_sqnr(row)
        if not row.ok or row.output_mse is None:
            return math.nan
        return math.inf if row.output_mse == 0 else -10 * math.log10(row.output_mse)


def _grid(
    rows: Sequence[SensitivityRow], metric: HeatMetric = HeatMetric.WEIGHTED_SQNR
) -> tuple[list[str], list[str], np.ndarray]:
    tensors: list[str] = []
    schemes: list[str] = []
    for r in rows:
        if r.tensor not in tensors:
            tensors.append(r.tensor)
        if r.scheme not in schemes:
            schemes.append(r.scheme)
    z = np.full((len(tensors), len(schemes)), np.nan, dtype=np.float32)
    t_i = {t: i for i, t in enumerate(tensors)}
    s_i = {s: j for j, s in enumerate(schemes)}
    for r in rows:
        v = metric.of(r)
        z[t_i[r.tensor], s_i[r.scheme]] = v if math.isfinite(v) else np.nan
    return tensors, schemes, z


def heatmap_figure(
    rows: Sequence[SensitivityRow],
    chosen: Mapping[str, str] | None = None,
    metric: HeatMetric = HeatMetric.WEIGHTED_SQNR,
) -> go.Figure:
    """Tensors (rows, table order top to bottom) × schemes (columns), coloured by
    ``metric``; ``chosen`` (tensor → scheme) marks each row's allocated cell with a ring.
    A tensor kept as stored (``STORED``: no scheme could take it) has no cell of its
    choice: a last, blank column ``KEPT_COLUMN`` holds its ring (only when one is kept)."""
    tensors, schemes, z = _grid(rows, metric)
    label = {t: html_literal(t) for t in tensors}  # tensor names come from files
    # without it a kept tensor's row had no ring at all, as if the allocation had missed it
    kept = [t for t, s in (chosen or {}).items() if s == STORED and t in label]
    if kept:
        schemes = [*schemes, KEPT_COLUMN]
        z = np.concatenate([z, np.full((len(tensors), 1), np.nan, dtype=z.dtype)], axis=1)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=schemes,
            y=[label[t] for t in tensors],
            colorscale="Viridis",
            colorbar={"title": "dB"},
            hovertemplate="%{y}<br>%{x}: %{z:.1f} dB<extra></extra>",
        )
    )
    if chosen:
        pairs = [(s, t) for t, s in chosen.items() if t in label and s in schemes]
        pairs += [(KEPT_COLUMN, t) for t in kept]
        fig.add_trace(
            go.Scatter(
                x=[s for s, _ in pairs],
                y=[label[t] for _, t in pairs],
                mode="markers",
                name="allocated",
                marker={"symbol": "circle-open", "size": 12, "color": _MIXED, "line_width": 3},
                hovertemplate="%{y}<br>allocated: %{x}<extra></extra>",
            )
        )
    fig.update_layout(
        # In a narrow column plotly tilts the scheme names on the top axis up into the
        # title (1100 px window: 'int4_g128' over '(higher is better)'): the title, placed
        # in the container with automargin, and the axis push the plot down instead.
        title={
            "text": f"Sensitivity: {metric.value} per tensor and scheme (higher is better)",
            "yref": "container",
            "automargin": True,
        },
        height=int(min(2400, max(360, 140 + 16 * len(tensors)))),
        yaxis={"autorange": "reversed", "type": "category"},
        xaxis={"type": "category", "side": "top", "automargin": True},
        margin={"l": 10, "r": 10, "t": 90, "b": 10},
        showlegend=False,
    )
    return fig


def mix_figure(allocation: Allocation) -> go.Figure:
    """Bytes per scheme of the allocation, largest first."""
    mix = allocation.mix()
    fig = go.Figure(
        go.Bar(
            x=list(mix),
            y=[b / 1e6 for b in mix.values()],
            marker_color=_MIXED,
            hovertemplate="%{x}: %{y:.3f} MB<extra></extra>",
        )
    )
    fig.update_layout(title="The mix: MB per scheme", yaxis_title="MB", height=320)
    return fig


def _span(values: Sequence[float], pad: float, least: float) -> AxisRange:
    """``values``' extent, widened by ``pad`` of it either side (at least ``least``)."""
    lo, hi = min(values), max(values)
    margin = max((hi - lo) * pad, least)
    return AxisRange(lo - margin, hi + margin)


def _steps(
    points: Sequence[tuple[float, float]], per_segment: int = 24
) -> list[tuple[float, float]]:
    """The allocation's line as drawn (``shape="hv"``: across, then up or down), sampled
    ``per_segment`` times a segment, for the labels to keep clear of."""
    out = list(points[:1])
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        out += [(x0 + (x1 - x0) * k / per_segment, y0) for k in range(1, per_segment + 1)]
        out += [(x1, y0 + (y1 - y0) * k / per_segment) for k in range(1, per_segment + 1)]
    return out


def curve_figure(
    curve: Sequence[CurvePoint], uniform: Sequence[CurvePoint], current: Allocation
) -> go.Figure:
    """Total weighted error against bits per weight: the allocation at budgets from the
    cheapest to the largest (a line), each uniform scheme (points, the ones no other
    uniform scheme beats on both axes ringed) and the current allocation (a star).

    Uniform schemes crowd (six between 4.1 and 4.5 bits per weight): each is labelled where
    its name fits clear of the other labels and points, beside it or out on a leader line
    (``point_labels.place_labels``, the ringed ones first), the rest by hover only, as the
    title says. The axes' ranges are set here, so the
    labels' layout knows where the points fall."""

    def err(e: float) -> float:
        return max(e, 1e-30)

    xs = [p.bits_per_weight for p in (*curve, *uniform)] + [current.bits_per_weight]
    ys = [err(p.error) for p in (*curve, *uniform)] + [err(current.total_error)]
    xr = _span(xs, 0.06, 0.25)
    yr = _span([math.log10(y) for y in ys], 0.1, 0.15)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[p.bits_per_weight for p in curve],
            y=[err(p.error) for p in curve],
            mode="lines+markers",
            name="mixed (allocated)",
            line={"color": _MIXED, "shape": "hv"},
            marker={"size": 5},
            hovertemplate="mixed: %{x:.3f} bits/w, error %{y:.4g}<extra></extra>",
        )
    )
    title = "Total error vs size: mixed against uniform"
    if uniform:
        front = pareto_mask([p.bits for p in uniform], [p.error for p in uniform])
        ux = [p.bits_per_weight for p in uniform]
        uy = [math.log10(err(p.error)) for p in uniform]
        order = sorted(range(len(uniform)), key=lambda i: (not front[i], ux[i]))
        star = (current.bits_per_weight, math.log10(err(current.total_error)))
        plot = PlotBox()
        # the star is one more point to keep clear of (it has no label)
        placed = place_labels(
            [*ux, star[0]],
            [*uy, star[1]],
            [p.label for p in uniform] + [""],
            xr,
            yr,
            plot,
            order,
            _steps([(p.bits_per_weight, math.log10(err(p.error))) for p in curve]),
        )
        for label in placed:
            i = label.index
            fig.add_annotation(label_annotation(label, ux[i], uy[i], plot.font, _UNIFORM))
        hidden = len(uniform) - len(placed)
        if hidden:
            title += (
                f"<br><sup>{hidden} of {len(uniform)} uniform schemes unlabelled where they "
                "crowd: hover a point for its name</sup>"
            )
        fig.add_trace(
            go.Scatter(
                x=ux,
                y=[err(p.error) for p in uniform],
                customdata=[p.label for p in uniform],
                mode="markers",
                name="uniform schemes",
                marker={
                    "color": _UNIFORM,
                    "size": [12 if f else 8 for f in front],
                    "symbol": ["circle" if f else "circle-open" for f in front],
                },
                hovertemplate="%{customdata}: %{x:.3f} bits/w, error %{y:.4g}<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[current.bits_per_weight],
            y=[err(current.total_error)],
            mode="markers",
            name="this allocation",
            marker={"symbol": "star", "size": 16, "color": "black"},
            hovertemplate="this allocation: %{x:.3f} bits/w, error %{y:.4g}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis={
            "title": "bits per weight (codes + scales + zero points)",
            "range": [xr.lo, xr.hi],
        },
        yaxis={"title": "total error (Σ over tensors)", "type": "log", "range": [yr.lo, yr.hi]},
        height=420,
        legend={"orientation": "h", "y": -0.25},
    )
    if uniform:
        # The labels were laid out for a plot of PlotBox's width: the figure keeps that
        # width (plus plotly's default 80 px side margins) whatever the page's width, or a
        # wider plot spreads the points under labels placed for the narrower one.
        fig.update_layout(width=int(plot.width) + 160, margin={"l": 80, "r": 80})
    return fig


ALLOCATION_COLUMNS = (
    "tensor",
    "shape",
    "scheme",
    "stored as",
    "bits per weight",
    "MB",
    "weighted SQNR (dB)",
)


def allocation_table(rows: Sequence[SensitivityRow], allocation: Allocation) -> pd.DataFrame:
    """One line per tensor of the allocation: its scheme, the type it is stored as where
    that is llama-quantize's fallback (Q4_K on rows of 384 values is Q5_0, at 5.5 bits per
    weight: without it the row reads "Q4_K, 5.5 bits"), bits per weight, size and weighted
    SQNR (the table's cell; ``None`` for a tensor kept as stored)."""
    cells = {(r.tensor, r.scheme): r for r in rows}
    # a tensor kept as stored has no cell of its choice, but its shape is every cell's
    shapes = {r.tensor: r.shape for r in rows}
    out = []
    for t, s, b, n in zip(
        allocation.tensors, allocation.choice, allocation.bits, allocation.n_elements, strict=True
    ):
        row = cells.get((t, s))
        shape = shapes.get(t)
        out.append(
            {
                "tensor": t,
                "shape": "×".join(str(d) for d in shape) if shape else "",
                "scheme": s,
                "stored as": (row.stored_as or "") if row else "",
                "bits per weight": b / max(n, 1),
                "MB": b / 8e6,
                "weighted SQNR (dB)": weighted_sqnr(row) if row else None,
            }
        )
    return pd.DataFrame(out, columns=list(ALLOCATION_COLUMNS))


def progress_table(results: Iterable[TaskResult]) -> pd.DataFrame:
    """The tensors measured so far, in arrival order: the best scheme's weighted SQNR at
    the fewest bits, the seconds it took and where it ran."""
    out = []
    for res in results:
        ok = [r for r in res.rows if r.ok]
        cheapest = min(ok, key=lambda r: r.total_bits, default=None)
        out.append(
            {
                "tensor": res.tensor,
                "cheapest scheme": cheapest.scheme if cheapest else None,
                "its weighted SQNR (dB)": weighted_sqnr(cheapest) if cheapest else None,
                "seconds": res.seconds,
                "worker": res.worker,
            }
        )
    return pd.DataFrame(out)


def _blocks_of(scheme: str) -> str:
    """How the Whole model page names ``scheme``'s blocks: "super-blocks of 256 values"
    for llama.cpp's QK_K types (K-quants, IQ4_XS, TQ1_0/TQ2_0), else "blocks of N values"."""
    try:
        size = ggml_type(scheme).block_size
    except ValueError:
        return "blocks"
    return f"{'super-blocks' if size == SUPER_BLOCK else 'blocks'} of {size} values"


def cell_notes(rows: Sequence[SensitivityRow]) -> tuple[str, ...]:
    """One sentence per scheme measured in llama-quantize's fallback type somewhere, and
    per scheme that could not take some tensors (with the first reason), e.g. ``Q4_K is
    stored as Q5_0 on 36 tensor(s) (llama-quantize's fallback: ...)``."""
    fallback: dict[tuple[str, str], int] = {}
    skipped: dict[str, tuple[int, str]] = {}
    # a tensor no scheme takes (its weight holds NaN or Inf) is said once, not per scheme
    schemes = {r.scheme for r in rows}
    by_tensor: dict[str, list[SensitivityRow]] = {}
    for r in rows:
        by_tensor.setdefault(r.tensor, []).append(r)
    none_take = {
        t: rs[0].skipped
        for t, rs in by_tensor.items()
        if len(schemes) > 1
        and {r.scheme for r in rs} == schemes
        and all(r.skipped for r in rs)
        and len({r.skipped for r in rs}) == 1
    }
    for r in rows:
        if r.tensor in none_take:
            continue
        if r.stored_as:
            fallback[r.scheme, r.stored_as] = fallback.get((r.scheme, r.stored_as), 0) + 1
        if r.skipped:
            count, why = skipped.get(r.scheme, (0, r.skipped))
            skipped[r.scheme] = (count + 1, why)
    notes = [
        f"{scheme} is stored as {target} on {counted(n, 'tensor')} (llama-quantize's fallback: its "
        f"{_blocks_of(scheme)} do not divide their rows)."
        for (scheme, target), n in fallback.items()
    ]
    notes += [
        f"{scheme} cannot take {counted(n, 'tensor')}, e.g.: {why}."
        for scheme, (n, why) in skipped.items()
    ]
    notes += [f"No scheme can take {t}: {why}." for t, why in none_take.items()]
    return tuple(notes)


# How the page's caption names each kind, in this order.
_NO_LINE_WORDS = {
    NoLineWhy.NO_NAME: "with no llama.cpp name (the export knows Llama-family and BERT names)",
    NoLineWhy.NO_GGUF_TYPE: "whose scheme has no GGUF type",
    NoLineWhy.KEPT_TYPE: "kept as stored in a type llama-quantize does not write",
    NoLineWhy.NEVER_QUANTIZED: (
        "that llama-quantize never quantizes (BERT's position and token-type embeddings)"
    ),
}


def skip_reasons(skipped: Sequence[NoLine]) -> str:
    """Why the tensors got no ``--tensor-type`` line, counted by kind:
    ``"1 with no llama.cpp name (the export knows Llama-family and BERT names)"``."""
    counts = collections.Counter(s.why for s in skipped)
    return "; ".join(f"{counts[w]} {text}" for w, text in _NO_LINE_WORDS.items() if counts[w])
