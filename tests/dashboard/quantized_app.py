"""What the quantized-file page tests share: the explorer and whole-model page scripts,
a fresh AppTest of one with a URL's query (every cache cleared first, so no earlier test's
file or results are reused), and the check that a run raised and showed no error."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

__all__ = ["EXPLORER", "MODEL", "VIEWS", "new_app", "no_errors"]

VIEWS = Path(__file__).resolve().parents[2] / "dashboard" / "views"
EXPLORER, MODEL = str(VIEWS / "explorer.py"), str(VIEWS / "model.py")


def new_app(path: str, **query: str) -> AppTest:
    """The page script at ``path``, not yet run, its URL ``query`` set."""
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(path, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def no_errors(at: AppTest) -> None:
    """The last run raised nothing and showed no ``st.error``."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]
