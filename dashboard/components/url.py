"""URL state: read once per session into widget state, written back after every run.

Query parameters are parsed by validating services (``source_from_query``,
``config_from_query``); anything bad falls back to defaults with a warning. Nothing from the
URL is evaluated or unpickled.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

_WARNINGS = "_url_warnings"


def query_snapshot() -> dict[str, str]:
    """The current query parameters as plain strings (the last value of repeated keys)."""
    return {k: st.query_params.get(k) for k in st.query_params}


def first_run(scope: str) -> bool:
    """True the first time this session asks for ``scope`` (then marks it read), so the URL
    seeds each group of widgets once and the user's changes are not overwritten."""
    flag = f"_url_read_{scope}"
    if st.session_state.get(flag):
        return False
    st.session_state[flag] = True
    return True


def add_warning(text: str) -> None:
    st.session_state.setdefault(_WARNINGS, []).append(text)


def show_warnings() -> None:
    """Show (once) the warnings collected while reading the URL."""
    for text in st.session_state.pop(_WARNINGS, []):
        st.warning(text, icon="⚠️")


def write(params: Mapping[str, str]) -> None:
    """Make the URL hold exactly ``params`` (only when it changed, to avoid churn)."""
    current = query_snapshot()
    if current != dict(params):
        st.query_params.from_dict(dict(params))
