"""The research formats' widgets (bits, ``q_k`` variant, DoReFa's rescale), drawn by the
scheme picker when its format choice is a research format (``config_picker(research=True)``);
and their URL seeding. Keys: ``{prefix}q_fmt`` (shared with the picker), ``{prefix}q_bits``
(shared, clamped to 2..8), ``{prefix}q_qk``, ``{prefix}q_rescale``."""

from __future__ import annotations

import streamlit as st

from dashboard.components import persist
from dashboard.components.persist import PERSIST
from dashboard.services.state.research import (
    RESEARCH_BITS,
    ResearchFormat,
    ResearchScheme,
)
from quant_core import QkVariant

__all__ = ["apply_research", "research_options"]

_VARIANT_LABELS = {
    QkVariant.ORIGINAL: "original: round((2^k−1)u)/(2^k−1)",
    QkVariant.MODIFIED: "modified (AdaBits): floor(2^k·u)/2^k",
    QkVariant.CENTERED: "centered: (floor(2^k·u)+½)/2^k",
}
_HELP = {
    ResearchFormat.MINMAX_LEVELS: "2^n levels spread from the tensor's min to its max: "
    "u = (x − min)/(max − min), x̂ = min + q_k(u)(max − min). One normalisation for the "
    "whole tensor; nothing is clipped.",
    ResearchFormat.DOREFA: "DoReFa-Net's weights: u = tanh(w)/(2 max|tanh w|) + ½, "
    "w_q = 2 q_k(u) − 1 (× max|w| when rescaled). The grid is uniform in tanh(w), not in w.",
}


def apply_research(scheme: ResearchScheme, prefix: str = "") -> None:
    """Set the research widgets (and the shared format and bits) to ``scheme``."""
    persist.set_values(
        {
            f"{prefix}q_preset": "custom",
            f"{prefix}q_fmt": scheme.format,
            f"{prefix}q_bits": scheme.bits,
            f"{prefix}q_qk": scheme.variant,
            f"{prefix}q_rescale": scheme.rescale
            if scheme.format is ResearchFormat.DOREFA
            else True,
        }
    )


def research_options(fmt: ResearchFormat, prefix: str = "") -> ResearchScheme:
    """Draw bits, the ``q_k`` variant and (DoReFa) the rescale toggle for ``fmt``; return
    the ``ResearchScheme``."""
    p = prefix
    persist.defaults({f"{p}q_qk": QkVariant.ORIGINAL, f"{p}q_rescale": True})
    st.caption(_HELP[fmt])
    lo, hi = RESEARCH_BITS
    ss = st.session_state
    ss[f"{p}q_bits"] = min(max(int(ss.get(f"{p}q_bits", 4)), lo), hi)
    bits = st.slider("Bit width", lo, hi, key=f"{p}q_bits", persist_state=PERSIST)
    variant = st.radio(
        "q_k variant",
        list(QkVariant),
        format_func=_VARIANT_LABELS.__getitem__,
        key=f"{p}q_qk",
        persist_state=PERSIST,
        help="How u in [0, 1] becomes one of 2^k codes: original rounds (end bins half "
        "wide), modified (AdaBits) floors into equal bins, each at its lower edge, centered "
        "maps each equal bin to its centre.",
    )
    rescale = False
    if fmt is ResearchFormat.DOREFA:
        rescale = st.checkbox(
            "Rescale by max|w|",
            key=f"{p}q_rescale",
            persist_state=PERSIST,
            help="Multiply w_q (in [−1, 1]) by max|w| so it is in the weights' own units "
            "(costs one float32); off: the paper's plain w_q.",
        )
    return ResearchScheme(format=fmt, bits=int(bits), variant=variant, rescale=bool(rescale))
