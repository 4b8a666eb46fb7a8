"""The metrics rows: error, storage, clipping.

Values are written compactly (at most about 7 characters: ``5.39e-5``, ``1.31 MB``,
``12.3k``) so six metrics fit a row at laptop widths (1280 px with the sidebar open); the
exact number is in each metric's help.
"""

from __future__ import annotations

import math

import streamlit as st

from dashboard.services.explorer.algorithm import AlgorithmExploration
from dashboard.services.explorer.explore import Exploration


def compact(v: float) -> str:
    """``v`` in at most 7 characters (``-`` adds one): 3 significant digits below 1, 4 from 1
    to 10,000 (``0.0123``, ``1235``), ``5.39e-5`` style outside; ``∞``/``-∞``/``nan``."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e4:
        text = f"{v:.3g}" if abs(v) < 1 else f"{v:.4g}"
        if "e" not in text:  # 9999.9 rounds up to 1e+04: written as below
            return text
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{float(mantissa):.3g}e{int(exponent)}"


def compact_count(n: int) -> str:
    """A count: exact below 10,000, else ``12.3k``, ``4.19M``, ``1.07G``."""
    if abs(n) < 10_000:
        return f"{n:,}"
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:,}"  # unreachable: |n| >= 10,000 meets the last unit


def compact_bytes(n: int) -> str:
    """A size: ``812 B``, ``45.1 kB``, ``8.39 MB``, ``1.07 GB`` (powers of 1000)."""
    if n < 1000:
        return f"{n} B"
    for div, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n} B"  # unreachable: n >= 1000 meets the last unit


def _db(v: float) -> str:
    return "∞ (exact)" if math.isinf(v) and v > 0 else f"{v:.1f} dB"


def metrics_row(exp: Exploration) -> None:
    """Two rows of ``st.metric``: errors, then storage and clipping."""
    m, s, c = exp.metrics, exp.storage, exp.clip
    cols = st.columns(6)
    cols[0].metric("MSE", compact(m.mse), help=f"{m.mse!r}")
    cols[1].metric("RMSE", compact(m.rmse), help=f"{m.rmse!r}")
    cols[2].metric("Max abs error", compact(m.max_abs), help=f"{m.max_abs!r}")
    cols[3].metric("SQNR", _db(m.sqnr_db), help=f"{m.sqnr_db!r} dB")
    cols[4].metric("Cosine similarity", f"{m.cosine:.5f}", help=f"{m.cosine!r}")
    cols[5].metric("Mean abs error", compact(m.mean_abs), help=f"{m.mean_abs!r}")
    cols = st.columns(6)
    stored = (
        f"{s.code_bits}-bit codes + {s.n_scales:,} scales x {s.scale_bits} bits"
        + (
            f" + {s.n_zero_points:,} zero points x {s.zero_point_bits} bits"
            if s.n_zero_points
            else ""
        )
        if not exp.storage_note
        else f"{s.code_bits}-bit codes + {exp.storage_note}"
    )
    cols[0].metric(
        "Bits per element",
        f"{s.bits_per_element:.4g}",
        help=f"{stored}, over {s.n_elements:,} elements",
    )
    cols[1].metric(
        "Bytes",
        compact_bytes(s.total_bytes),
        help=f"{s.total_bytes:,} bytes (fp32: {s.fp32_bytes:,} bytes)",
    )
    cols[2].metric("Smaller than fp32", f"{s.ratio_vs_fp32:.2f}×")
    cols[3].metric("Smaller than fp16", f"{s.ratio_vs_fp16:.2f}×")
    cols[4].metric(
        "Clipped",
        compact_count(c.n_clipped),
        help=f"{c.n_clipped:,} values: {c.n_clipped_low:,} below and {c.n_clipped_high:,} "
        "above the representable range by more than half a step",
    )
    cols[5].metric(
        "Saturated codes",
        compact_count(c.n_saturated),
        help=f"{c.n_saturated:,} codes at either end of the range; {exp.levels_used} of "
        f"{1 << exp.config.bits} levels used",
    )


def algorithm_row(run: AlgorithmExploration) -> None:
    """One row of ``st.metric`` for GPTQ/AWQ/HQQ: the layer's held-out output MSE against
    RTN's (model layers only), the weight error of what the layer computes, the codes that
    differ from RTN's and the time; then the run's notes."""
    out, label = run.output, run.choice.algorithm.label
    cols = st.columns(5)
    if out is not None:
        cols[0].metric(
            f"Output MSE, {label}",
            compact(out.mse),
            help=f"{out.describe()}. Exact: {out.mse!r}",
        )
        cols[1].metric("Output MSE, RTN", compact(out.rtn_mse), help=f"{out.rtn_mse!r}")
        cols[2].metric(
            "Output vs RTN",
            f"{out.ratio:.2f}×",
            help="below 1: the algorithm's layer output is closer to the float layer's on "
            "the held-out sentences",
        )
    else:
        cols[0].metric(
            f"Weight MSE, {label}", compact(run.effective.mse), help=f"{run.effective.mse!r}"
        )
        cols[1].metric(
            "Weight MSE, RTN", compact(run.rtn_effective.mse), help=f"{run.rtn_effective.mse!r}"
        )
        cols[2].metric("Output vs RTN", "n/a", help="no model inputs for this tensor")
    n = run.exploration.original.numel()
    cols[3].metric(
        "Codes ≠ RTN",
        f"{run.codes_changed / n:.1%}",
        help=f"{run.codes_changed:,} of {n:,} stored codes differ from round-to-nearest's",
    )
    cols[4].metric("Time", f"{run.result.seconds:.2f} s", help="wall time of the algorithm")
    if out is not None:
        st.caption(f"Layer {out.describe()}.")
    for line in run.notes():
        st.caption(line)
