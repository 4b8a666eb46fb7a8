"""AppTest: defects a demanding user hit on the Sweep page, each with the run that showed
it."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def test_the_sweeps_group_sizes_survive_a_visit_to_a_narrower_tensor() -> None:
    """Group sizes 16, 32, 64 on a 512-column tensor; the columns set to 7 (none of them
    divides 7) emptied the list, and back at 512 columns it stayed empty: "Pick at least
    one of: group sizes. Nothing was run." The visitor's sizes are kept: on 7 columns the
    nearest divisor stands in, and at 512 columns the sizes come back."""
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"src": "synthetic", "rows": "64", "cols": "512"})
    at.run()
    at.switch_page("views/sweep.py").run()
    chosen = list(at.multiselect(key="sw_groups").value)
    assert chosen and all(512 % g == 0 for g in chosen)
    at.number_input(key="src_cols").set_value(7).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.multiselect(key="sw_groups").value == [7]
    at.number_input(key="src_cols").set_value(512).run()
    assert at.multiselect(key="sw_groups").value == chosen
    at.button(key="sw_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    warned = [plain(w.value) for w in at.warning]
    assert not any("Nothing was run" in w for w in warned), warned
    table = at.dataframe[0].value
    assert set(chosen) <= set(table["group_size"].dropna().astype(int)), table["group_size"]
