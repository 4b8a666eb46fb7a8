"""The metrics rows: error, storage, clipping."""

from __future__ import annotations

import math

import streamlit as st

from dashboard.services.explorer.explore import Exploration


def _db(v: float) -> str:
    return "∞ (exact)" if math.isinf(v) and v > 0 else f"{v:.2f} dB"


def metrics_row(exp: Exploration) -> None:
    """Two rows of ``st.metric``: errors, then storage and clipping."""
    m, s, c = exp.metrics, exp.storage, exp.clip
    cols = st.columns(6)
    cols[0].metric("MSE", f"{m.mse:.4g}")
    cols[1].metric("RMSE", f"{m.rmse:.4g}")
    cols[2].metric("Max abs error", f"{m.max_abs:.4g}")
    cols[3].metric("SQNR", _db(m.sqnr_db))
    cols[4].metric("Cosine similarity", f"{m.cosine:.6f}")
    cols[5].metric("Mean abs error", f"{m.mean_abs:.4g}")
    cols = st.columns(6)
    cols[0].metric(
        "Bits per element",
        f"{s.bits_per_element:.4g}",
        help=f"{s.code_bits}-bit codes + {s.n_scales:,} scales x {s.scale_bits} bits"
        + (
            f" + {s.n_zero_points:,} zero points x {s.zero_point_bits} bits"
            if s.n_zero_points
            else ""
        )
        + f", over {s.n_elements:,} elements",
    )
    cols[1].metric("Bytes", f"{s.total_bytes:,}", help=f"fp32: {s.fp32_bytes:,} bytes")
    cols[2].metric("Smaller than fp32", f"{s.ratio_vs_fp32:.2f}×")
    cols[3].metric("Smaller than fp16", f"{s.ratio_vs_fp16:.2f}×")
    cols[4].metric(
        "Clipped",
        f"{c.n_clipped:,}",
        help=f"{c.n_clipped_low:,} below and {c.n_clipped_high:,} above the representable range "
        "by more than half a step",
    )
    cols[5].metric(
        "Saturated codes",
        f"{c.n_saturated:,}",
        help=f"codes at either end of the range; {exp.levels_used} of {1 << exp.config.bits} "
        "levels used",
    )
