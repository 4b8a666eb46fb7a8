"""Opening a scheme chosen on a comparison page in the explorer: its config and algorithm
travel as the explorer's URL keys (``config_to_query`` and ``algorithm_to_query``)."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from dashboard.components import cost_gate, url
from dashboard.components.config import apply_config
from dashboard.services.compare.weights import WeightScheme
from dashboard.services.display.text import literal
from dashboard.services.sources.choice import SourceChoice
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.state.algorithm import algorithm_to_query
from dashboard.services.state.scheme import config_to_query
from dashboard.services.state.source import source_from_query, source_to_query

__all__ = ["EXPLORER", "explorer_link", "explorer_query", "open_in_explorer"]

EXPLORER = "views/explorer.py"


def explorer_query(
    choice: SourceChoice, scheme: WeightScheme, custom_calibration: bool = False
) -> dict[str, str]:
    """The explorer's URL keys for ``choice`` under ``scheme``: source, config and
    algorithm (``calib=custom`` when the scheme was calibrated on the user's sentences,
    which a link does not carry)."""
    algorithm = scheme.algorithm_choice(custom=custom_calibration)
    return {
        **source_to_query(choice),
        **config_to_query(scheme.config),
        **algorithm_to_query(algorithm),
    }


def explorer_link(source: PreparedSource, scheme: WeightScheme) -> str:
    """A relative URL of the explorer showing ``source`` under ``scheme``."""
    return "./?" + urlencode(explorer_query(source.choice, scheme))


def _travels(choice: SourceChoice) -> bool:
    """Whether a link restores ``choice`` itself (not an upload, nor own sentences)."""
    try:
        return source_from_query(source_to_query(choice), choice) == choice
    except ValueError:
        return False


def open_in_explorer(
    source: PreparedSource, sid: str, key: str, custom_calibration: bool = False
) -> None:
    """The scheme's name, a button that opens scheme ``sid`` (a ``WeightScheme.scheme_id``)
    in the explorer, and a shareable link to that view."""
    try:
        scheme = WeightScheme.from_id(sid)
    except ValueError as exc:
        st.error(f"Cannot open that scheme: {literal(exc)}")
        return
    st.container(key=f"{key}_name").markdown(f"**{literal(scheme.label)}**")
    if st.button("Open in the explorer", key=key, type="primary", width="stretch"):
        apply_config(scheme.config)
        params = explorer_query(source.choice, scheme, custom_calibration)
        if not _travels(source.choice):
            # The explorer would re-read an address this session did not write, and an
            # upload cannot come back from one: mark it as ours, the widgets carry the rest.
            url.write(params)
        cost_gate.visitor_asked("explorer")  # a click, not a link: no "Run" button there
        st.switch_page(EXPLORER, query_params=params)
    st.markdown(f"[Shareable link to this view]({explorer_link(source, scheme)})")
