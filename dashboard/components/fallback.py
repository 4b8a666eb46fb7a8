"""Why a scheme cannot quantize the page's tensor, with llama-quantize's type for such a
tensor one click away: the explorer's and A/B's refusal, drawn the same way."""

from __future__ import annotations

import streamlit as st

from dashboard.components.config import use_preset
from dashboard.services.display.text import literal
from dashboard.services.model.fallbacks import fallback_name, shape_refusal
from quant_core import QuantConfig

__all__ = ["cannot_quantize"]


def cannot_quantize(
    why: object,
    scheme: object,
    shape: tuple[int, ...],
    *,
    key: str,
    side: str | None = None,
    prefix: str = "",
) -> None:
    """Draw why ``scheme`` cannot quantize a tensor of ``shape`` (``why``, an error shown
    as literal text) and, when ``scheme`` is a GGUF type whose blocks do not divide the rows
    and llama-quantize stores such a tensor in another type (Q4_K on rows of 384 values:
    Q5_0), a button (``key``) that picks that type in the scheme picker whose keys start
    with ``prefix``. ``side`` names which of a page's schemes it is about ("A": "Scheme A
    cannot ...", "Use Q5_0 for A, ..."). Draws only: the caller stops the page."""
    if isinstance(scheme, QuantConfig):  # TQ1_0's refusal worded as the K-quants'
        why = shape_refusal(scheme, shape) or why
    who = "This scheme" if side is None else f"Scheme {side}"
    st.error(f"{who} cannot quantize this tensor: {literal(why)}")
    fallback = fallback_name(scheme, shape)
    if fallback is None:
        return
    target = "" if side is None else f" for {side}"
    st.button(
        f"Use {fallback}{target}, llama-quantize's type for such a tensor",
        key=key,
        on_click=use_preset,
        args=(fallback, prefix),
    )
