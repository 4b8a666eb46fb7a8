"""Run one page script by itself in AppTest, starting from a URL's query: what the page
tests share."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

VIEWS = Path(__file__).resolve().parents[2] / "dashboard" / "views"


def open_page(page: str, **query: str) -> AppTest:
    """``dashboard/views/<page>`` run once with ``query`` as its URL, the data cache
    cleared first so no earlier test's results are reused."""
    st.cache_data.clear()
    at = AppTest.from_file(str(VIEWS / page), default_timeout=300)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()
