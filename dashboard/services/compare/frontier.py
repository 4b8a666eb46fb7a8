"""The Pareto frontier of a sweep: which schemes no other beats on both bits and error, and
its plot.

Plain functions, data in and ``plotly.graph_objects.Figure`` out.
"""

from __future__ import annotations

import enum

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from numpy.typing import ArrayLike

__all__ = ["ErrorAxis", "pareto_figure", "pareto_mask"]

_FRONTIER = "#d62728"
_DOMINATED = "#9e9e9e"


class ErrorAxis(enum.Enum):
    """The error a Pareto plot puts on its y axis: MSE (minimised, log axis) or SQNR in dB
    (maximised, linear axis). For one tensor both order the schemes identically, since
    ``sqnr_db = 10 log10(sum x^2 / (n * mse))``."""

    MSE = "mse"
    SQNR_DB = "sqnr_db"

    @property
    def minimize(self) -> bool:
        return self is ErrorAxis.MSE

    @property
    def label(self) -> str:
        return "MSE" if self is ErrorAxis.MSE else "SQNR (dB)"


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
