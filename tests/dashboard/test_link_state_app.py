"""AppTest: links the pages change say so (issue 29, item 12), the Layer outputs page keeps
its choices in its URL, and heavy links wait for a click (item 11)."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.slow

VIEWS = Path(__file__).resolve().parents[2] / "dashboard" / "views"


def open_page(page: str, **query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(VIEWS / page), default_timeout=300)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def warnings(at: AppTest) -> str:
    return " ".join(plain(w.value) for w in at.warning)


def query(at: AppTest, key: str) -> str | None:
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) else value


@pytest.mark.parametrize(("asked", "used"), [("7", "6"), ("1048576", "1536")])
def test_whole_model_warns_when_it_changes_the_links_group_size(asked: str, used: str) -> None:
    at = open_page("model.py", **{"m.gran": "group", "m.group": asked, "m.bits": "4"})
    no_errors(at)
    assert at.select_slider(key="m_q_group").value == int(used)
    text = warnings(at)
    assert f"group={asked}" in text and f"using {used}" in text, text
    assert query(at, "m.group") == used
