"""The Pareto frontier of a sweep: which schemes no other beats on both bits and error, and
its plot; and where the weight-error and output-error frontiers part.

Plain functions, data in and ``plotly.graph_objects.Figure`` out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from numpy.typing import ArrayLike

from ..display.counts import counted
from ..display.labels import FORMAT_LABELS

__all__ = [
    "POINTS_META",
    "ErrorAxis",
    "FrontierDifference",
    "frontier_difference",
    "frontier_mask",
    "pareto_figure",
    "pareto_mask",
]

_FRONTIER = "#d62728"
_OTHER = "#000000"


class ErrorAxis(enum.Enum):
    """The error a Pareto plot puts on its y axis; the value is the ``sweep_table`` column.

    Weight MSE (minimised, log axis) or weight SQNR in dB (maximised, linear axis): for one
    tensor both order the schemes identically, since ``sqnr_db = 10 log10(sum x^2 / (n *
    mse))``. Output MSE (held-out): the layer's output ``x ŵᵀ + b`` against ``x wᵀ + b`` on
    sentences no algorithm calibrated on; a model layer's sweep only.
    """

    MSE = "mse"
    SQNR_DB = "sqnr_db"
    OUTPUT_MSE = "output_mse"

    @property
    def minimize(self) -> bool:
        return self is not ErrorAxis.SQNR_DB

    @property
    def log(self) -> bool:
        return self is not ErrorAxis.SQNR_DB

    @property
    def needs_layer(self) -> bool:
        """Whether the column exists only for a model layer's sweep."""
        return self is ErrorAxis.OUTPUT_MSE

    @property
    def label(self) -> str:
        return _AXIS_LABELS[self]


_AXIS_LABELS = {
    ErrorAxis.MSE: "weight MSE",
    ErrorAxis.SQNR_DB: "weight SQNR (dB)",
    ErrorAxis.OUTPUT_MSE: "output MSE (held-out)",
}


def pareto_mask(bits: ArrayLike, errors: ArrayLike, minimize: bool = True) -> list[bool]:
    """Which points are non-dominated: no other point has ``bits`` <= and an error at least
    as good (<= when ``minimize``, >= otherwise) with one of the two strictly better.

    Equal points do not dominate each other, so duplicates on the frontier are all kept.
    ``inf``/``-inf`` errors compare as usual; NaN raises ``ValueError``.
    Example (minimise): bits ``[4, 4, 8, 8]``, errors ``[1.0, 2.0, 0.5, 1.0]`` gives
    ``[True, False, True, False]``.
    """
    b = np.asarray(bits, dtype=np.float64).reshape(-1)
    e = np.asarray(errors, dtype=np.float64).reshape(-1)
    if b.shape != e.shape:
        raise ValueError(f"bits ({b.size}) and errors ({e.size}) differ in length")
    if np.isnan(b).any() or np.isnan(e).any():
        raise ValueError("bits and errors must not hold NaN")
    if not minimize:
        e = -e
    # dominates[j, i]: point j dominates point i.
    no_worse = (b[:, None] <= b[None, :]) & (e[:, None] <= e[None, :])
    better = (b[:, None] < b[None, :]) | (e[:, None] < e[None, :])
    dominated = (no_worse & better).any(axis=0)
    return [not d for d in dominated.tolist()]


def _errors(table: pd.DataFrame, axis: ErrorAxis) -> np.ndarray:
    if not isinstance(axis, ErrorAxis):
        raise TypeError(f"axis must be an ErrorAxis, got {axis!r}")
    err = table[axis.value].to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isnan(err).any():
        raise ValueError(
            f"the table has no {axis.label} for every scheme (output errors need a linear "
            "layer of the bundled model)"
        )
    return err


def frontier_mask(table: pd.DataFrame, axis: ErrorAxis) -> np.ndarray:
    """``pareto_mask`` of bits per element against ``axis`` for every row (bool array).
    ``ValueError`` when the table lacks that error for a row (output MSE of a tensor with
    no layer)."""
    bits = table["bits_per_element"].to_numpy(dtype=np.float64)
    err = _errors(table, axis)
    return np.asarray(pareto_mask(bits, err, minimize=axis.minimize), dtype=bool)


@dataclass(frozen=True)
class FrontierDifference:
    """Scheme labels on the ``first`` axis's frontier only, on the ``second``'s only, and on
    both (table order)."""

    first: ErrorAxis
    second: ErrorAxis
    first_only: tuple[str, ...]
    second_only: tuple[str, ...]
    both: tuple[str, ...]

    @property
    def differ(self) -> bool:
        return bool(self.first_only or self.second_only)

    def describe(self) -> str:
        """One or two sentences for the page (Markdown)."""
        if not self.differ:
            return (
                f"The {self.first.label} and {self.second.label} frontiers hold the same "
                f"{len(self.both)} schemes."
            )
        parts = [f"The {self.first.label} and {self.second.label} frontiers differ."]
        for axis, only in ((self.first, self.first_only), (self.second, self.second_only)):
            if only:
                # "; " between labels: a label holds commas ("int4 sym g32, fp16 scales")
                parts.append(f"Only on the {axis.label} frontier: {'; '.join(only)}.")
        return " ".join(parts)


def frontier_difference(
    table: pd.DataFrame,
    first: ErrorAxis = ErrorAxis.MSE,
    second: ErrorAxis = ErrorAxis.OUTPUT_MSE,
) -> FrontierDifference:
    """Which schemes are on one frontier and not the other (``ValueError`` as
    ``frontier_mask`` when an axis has no values)."""
    a, b = frontier_mask(table, first), frontier_mask(table, second)
    labels = table["scheme"].to_numpy()
    return FrontierDifference(
        first=first,
        second=second,
        first_only=tuple(labels[a & ~b].tolist()),
        second_only=tuple(labels[b & ~a].tolist()),
        both=tuple(labels[a & b].tolist()),
    )


# One colour per element format (or shipped family), one marker per algorithm: the points of
# a sweep differ at a glance (int vs NF4 vs FP4, GGUF vs MX, RTN vs GPTQ), and the legend
# names each pair.
_FORMAT_COLOURS = (
    "#1f77b4",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#393b79",
)
_ALGORITHM_SYMBOLS = {"RTN": "circle", "GPTQ": "diamond", "AWQ": "square", "HQQ": "triangle-up"}
_SYMBOLS_LEFT = ("cross", "x", "star", "pentagon")
POINTS_META = "points"
"""The ``meta`` of every point trace of ``pareto_figure`` (one per format and algorithm)."""


def _algorithm_name(label: str) -> str:
    """``"GPTQ (damp 0.1, act-order)"`` -> ``"GPTQ"``: the marker follows the algorithm,
    not its options."""
    return label.split(" (", 1)[0]


def _colour_keys(table: pd.DataFrame) -> np.ndarray:
    """What a point's colour follows: its shipped family (``"GGUF"``, ``"OCP MX"``,
    ``"NVIDIA"``: MXFP4 and NVFP4 share FP4 elements but not their colour), else its element
    format as the format picker names it (``"int"``, ``"NF4"``). Tables without a
    ``family`` column: the format."""
    # the format picker's names ("NF4", "FP4 E2M1"), not the enum's ("nf4", "fp4_e2m1")
    names = {f.value: label for f, label in FORMAT_LABELS.items()}
    formats = np.array([names.get(f, f) for f in table["format"].astype(str)], dtype=object)
    if "family" not in table:
        return formats
    family = table["family"].fillna("").astype(str).to_numpy()
    return np.where(family != "", family, formats)


def _groups(table: pd.DataFrame) -> list[tuple[str, str, np.ndarray]]:
    """``(colour key, algorithm, row mask)`` for each pair present (``_colour_keys``),
    keys and algorithms in the order they first appear."""
    formats = _colour_keys(table)
    algorithms = np.array([_algorithm_name(a) for a in table["algorithm"].astype(str)])
    pairs = dict.fromkeys(zip(formats.tolist(), algorithms.tolist(), strict=True))
    return [(f, a, (formats == f) & (algorithms == a)) for f, a in pairs]


def _style(table: pd.DataFrame) -> tuple[dict[str, str], dict[str, str]]:
    formats = list(dict.fromkeys(_colour_keys(table).tolist()))
    colours = {f: _FORMAT_COLOURS[i % len(_FORMAT_COLOURS)] for i, f in enumerate(formats)}
    algorithms = list(dict.fromkeys(_algorithm_name(a) for a in table["algorithm"].astype(str)))
    unknown = iter(_SYMBOLS_LEFT * len(algorithms))
    symbols = {a: _ALGORITHM_SYMBOLS.get(a) or next(unknown) for a in algorithms}
    return colours, symbols


def _trace(
    table: pd.DataFrame, sel: np.ndarray, bits: np.ndarray, err: np.ndarray, hover: str, **kw
) -> go.Scatter:
    order = np.argsort(bits[sel], kind="stable")
    return go.Scatter(
        x=bits[sel][order],
        y=err[sel][order],
        text=table["scheme"].to_numpy()[sel][order].tolist(),
        customdata=table["scheme_id"].to_numpy()[sel][order].tolist(),
        hovertemplate=hover,
        **kw,
    )


def pareto_figure(
    table: pd.DataFrame, axis: ErrorAxis = ErrorAxis.MSE, compare_with: ErrorAxis | None = None
) -> go.Figure:
    """Error (``axis``) against bits per element, one point per row of ``sweep_table``.

    Points are coloured by element format (a shipped format: by its family, ``_colour_keys``)
    and shaped by algorithm, one trace (``meta``
    ``POINTS_META``, named ``"int · RTN"``) per pair, so the legend tells them apart; the
    ``"frontier"`` trace rings the frontier points (minimise bits and MSE, or maximise
    SQNR) in red and joins them with a red step line. ``compare_with``:
    also draw, dashed and black (larger black rings joined by a dashed black step line) at
    their place on this axis, the schemes on that axis's frontier (e.g. the weight-MSE
    frontier on the output-MSE plot), so a user sees where the two frontiers part. Every
    point's ``customdata`` is its ``scheme_id``: a page reads it from a plotly selection
    event to open the scheme. MSE axes are logarithmic. Points
    that cannot be drawn (zero MSE on a log axis, infinite SQNR) are left out and counted
    in the title; they still count when the frontier is computed. ``ValueError`` when the
    table lacks an axis's values.
    """
    front = frontier_mask(table, axis)
    bits = table["bits_per_element"].to_numpy(dtype=np.float64)
    err = _errors(table, axis)
    drawable = np.isfinite(err) & ((err > 0) if axis.log else True)
    fig = go.Figure()
    hover = "%{text}<br>%{x:.4g} bits/element<br>" + axis.label + " %{y:.4g}<extra></extra>"
    colours, symbols = _style(table)
    for fmt, algorithm, rows in _groups(table):
        sel = drawable & rows
        if not sel.any():
            continue
        fig.add_trace(
            _trace(
                table,
                sel,
                bits,
                err,
                hover,
                mode="markers",
                name=f"{fmt} · {algorithm}",
                meta=POINTS_META,
                marker={"color": colours[fmt], "symbol": symbols[algorithm], "size": 9},
            )
        )
    fig.add_trace(
        _trace(
            table,
            drawable & front,
            bits,
            err,
            hover,
            mode="lines+markers",
            name="frontier",
            # Sorted by bits, "hv" draws the best error reachable at each bit budget; the
            # frontier's points get a red ring over their own marker.
            line={"color": _FRONTIER, "shape": "hv"},
            marker={"color": _FRONTIER, "size": 14, "symbol": "circle-open", "line_width": 2},
        )
    )
    if compare_with is not None and compare_with is not axis:
        other = frontier_mask(table, compare_with)
        fig.add_trace(
            _trace(
                table,
                drawable & other,
                bits,
                err,
                hover,
                mode="lines+markers",
                name=f"{compare_with.label} frontier",
                marker={"color": _OTHER, "size": 16, "symbol": "circle-open", "line_width": 2},
                line={"color": _OTHER, "dash": "dash", "shape": "hv"},
            )
        )
    title = f"{axis.label} vs bits per element ({int(front.sum())} on the frontier)"
    hidden = int((~drawable).sum())
    if hidden:
        title += f"; {counted(hidden, 'exact scheme')} not drawn"
    fig.update_layout(
        title=title,
        xaxis_title="bits per element (codes + scales + zero points)",
        yaxis_title=axis.label,
        yaxis_type="log" if axis.log else "linear",
        clickmode="event+select",
        legend={"title": {"text": "format · algorithm"}},
    )
    return fig
