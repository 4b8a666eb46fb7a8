"""AppTest: the explorer shows only the controls that change what is drawn."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.display.reduce import Reduction

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")


def run_explorer(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]
    return at


def radio_keys(at: AppTest) -> set[str]:
    return {r.key for r in at.radio}


def test_the_block_reduction_is_offered_only_where_blocks_are_drawn() -> None:
    small = run_explorer(src="synthetic", rows="16", cols="64")
    assert "v_red" not in radio_keys(small)
    assert small.checkbox(key="v_bounds").value is True
    # 1024 x 512 cells: more than the 512² drawn cell by cell, so each cell is a block's
    large = run_explorer(src="synthetic", rows="1024", cols="512")
    assert "v_red" in radio_keys(large)


def test_a_links_reduction_survives_a_small_tensor() -> None:
    at = run_explorer(src="synthetic", rows="16", cols="64", red="max_abs")
    assert "v_red" not in radio_keys(at)
    assert at.session_state["v_red"] is Reduction.MAX_ABS
    assert at.query_params["red"] in ("max_abs", ["max_abs"])
