"""The explorer's "Stored scales" section: what a format stores per block and per
super-block, drawn as maps, with where its bits per value go."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.services.explorer.explore import Exploration
from dashboard.services.explorer.stored import layout_text

__all__ = ["stored_maps"]


def stored_maps(key: str, exp: Exploration) -> None:
    """Maps of the stored block scales (and mins, and super-block scales) of ``exp``
    (``key``: its cache key), folded unless the format quantizes its scales; nothing for
    one scale per tensor."""
    figures = cache.scale_map_figures(key, exp)
    if not figures:
        return
    title = "Stored scales: what each level holds"
    with st.expander(title, expanded=exp.config.two_level):
        st.markdown(layout_text(exp))
        columns = st.columns(2)
        for i, (name, fig) in enumerate(figures):
            columns[i % 2].plotly_chart(
                fig, key=f"scale_map_{name}", config={"displaylogo": False}
            )
