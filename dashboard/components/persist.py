"""Widget values that survive page switches.

Streamlit forgets a widget's value once a run does not draw it (another page ran), unless
the widget is created with ``persist_state="session"`` (``PERSIST``): every component
widget is, so a tensor or scheme picked on one page is still there on the next. Defaults
and programmatic values (from the URL, or "open in explorer") go through session state
before the widgets are drawn, never through ``value=`` as well.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

PERSIST = "session"


def defaults(values: Mapping[str, object]) -> None:
    """Give each key its default unless it already has a value."""
    for key, value in values.items():
        st.session_state.setdefault(key, value)


def set_values(values: Mapping[str, object]) -> None:
    """Set widget values before the widgets are drawn in this run."""
    for key, value in values.items():
        st.session_state[key] = value
