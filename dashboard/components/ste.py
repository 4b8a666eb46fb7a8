"""The straight-through estimator's panel (``services.explorer.ste``): formulas, notes, the
forward staircase and the gradient autograd passes back, and a table of the first values."""

from __future__ import annotations

import streamlit as st
import torch

from dashboard import cache
from dashboard.components.charts import static_table
from quant_core import QkVariant

__all__ = ["ste_section"]


def ste_section(
    source_key: str, matrix: torch.Tensor, bits: int, variant: QkVariant, rescale: bool, key: str
) -> None:
    """Draw the panel for ``matrix`` (the shown tensor, finite; ``source_key`` names it)
    under ``key`` (the chart and table keys start with it)."""
    try:
        panel = cache.ste_panel(source_key, matrix, bits, variant, rescale)
    except ValueError as exc:
        st.info(f"No backward pass to show: {exc}.")
        return
    st.markdown("\n\n".join(f"$$\n{line}\n$$" for line in panel.formulas))
    for note in panel.notes:
        st.info(note)
    st.plotly_chart(panel.figure, key=f"{key}_figure", config={"displaylogo": False})
    static_table(panel.table, key=f"{key}_table")
