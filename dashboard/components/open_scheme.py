"""Opening a scheme chosen on a comparison page in the explorer."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from dashboard.components.config import apply_config
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.state.scheme import config_from_scheme_id, config_to_query
from dashboard.services.state.source import source_to_query
from quant_core import QuantConfig

EXPLORER = "views/explorer.py"


def explorer_link(source: PreparedSource, cfg: QuantConfig) -> str:
    """A relative URL of the explorer showing ``source`` under ``cfg``."""
    return "./?" + urlencode({**source_to_query(source.choice), **config_to_query(cfg)})


def open_in_explorer(source: PreparedSource, scheme: str, key: str) -> None:
    """Buttons to open scheme ``scheme`` (a scheme id) here or via a shareable link."""
    try:
        cfg = config_from_scheme_id(scheme)
    except ValueError as exc:
        st.error(f"Cannot open that scheme: {exc}")
        return
    c1, c2 = st.columns([1, 3])
    if c1.button(f"Open {cfg.describe()} in the explorer", key=key, type="primary"):
        apply_config(cfg)
        st.switch_page(EXPLORER)
    c2.markdown(f"[Shareable link to this view]({explorer_link(source, cfg)})")
