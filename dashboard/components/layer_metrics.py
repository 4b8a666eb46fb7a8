"""The layer page's metric rows: output error, and where it comes from."""

from __future__ import annotations

import math

import streamlit as st

from dashboard.services.display.metric_help import Metric, metric_help
from quant_core import ErrorMetrics, LinearEval


def _db(v: float) -> str:
    return "∞ (exact)" if math.isinf(v) and v > 0 else f"{v:.2f} dB"


def output_metrics(ev: LinearEval, suffix: str = "") -> None:
    """MSE, SQNR and cosine of ``Ŷ`` against ``Y``, and the inputs that clipped; labels end
    with ``suffix`` (e.g. ``" (SmoothQuant)"``) so two rows stay apart."""
    m = ev.metrics
    cols = st.columns(4)
    cols[0].metric(
        f"Output MSE{suffix}", f"{m.mse:.4g}", help=metric_help(Metric.OUTPUT_MSE, repr(m.mse))
    )
    cols[1].metric(
        f"Output SQNR{suffix}",
        _db(m.sqnr_db),
        help=metric_help(Metric.OUTPUT_SQNR, f"{m.sqnr_db!r} dB"),
    )
    cols[2].metric(
        f"Output cosine{suffix}",
        f"{m.cosine:.6f}",
        help=metric_help(Metric.OUTPUT_COSINE, repr(m.cosine)),
    )
    clip = ev.activation_clip
    cols[3].metric(
        f"Inputs clipped{suffix}",
        "—" if clip is None else f"{clip.n_clipped:,}",
        help=metric_help(Metric.INPUTS_CLIPPED)
        if clip is not None
        else "Activations stay in float: nothing is clipped.",
    )


def _side(col: st.delta_generator.DeltaGenerator, label: str, m: ErrorMetrics | None) -> None:
    if m is None:
        col.metric(f"{label} SQNR", "float (no error)", help="This side stays in float.")
    else:
        col.metric(
            f"{label} SQNR",
            _db(m.sqnr_db),
            help=metric_help(Metric.OUTPUT_SQNR, f"MSE {m.mse:.4g}, cosine {m.cosine:.6f}"),
        )


def contribution_metrics(ev: LinearEval) -> None:
    """Weight-only ``X Ŵᵀ + b`` and activation-only ``X̂ Wᵀ + b`` errors side by side."""
    cols = st.columns(2)
    _side(cols[0], "Weight-only", ev.weight_only)
    _side(cols[1], "Activation-only", ev.activation_only)
