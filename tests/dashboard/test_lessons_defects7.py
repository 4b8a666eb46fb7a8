"""AppTest: defects a demanding learner hit on the Lessons page with the shipped formats
(issue 25), each with the run that showed it."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

LESSONS_PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "lessons.py")
SLUG = "beyond-linear"


@pytest.mark.parametrize(("pick", "group"), [(None, 64), (4, 32), (5, 16)],
                         ids=["nf4", "mxfp4", "nvfp4"])  # fmt: skip
def test_the_format_table_does_not_say_mxfp4_has_an_absmax_scale_per_group(
    pick: int | None, group: int
) -> None:
    """The "beyond linear" lab's table of every format on the weight was captioned "Every
    format on this weight, one absmax scale per group of 64:" while its MXFP4 and NVFP4
    rows keep their own blocks (32, 16) and scale formats (E8M0; FP8 under an fp32 per
    tensor); with MXFP4 picked it read "per group of 32", with NVFP4 "of 16"."""
    st.cache_data.clear()
    at = AppTest.from_file(LESSONS_PAGE, default_timeout=300)
    at.query_params["lesson"] = SLUG
    at.run()
    at.radio(key=f"lesson_q_{SLUG}").set_value(1).run()
    if pick is not None:
        at.selectbox(key="lesson_format").select_index(pick).run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "bits per weight" in d.value.columns)
    assert {"MXFP4", "NVFP4"} <= set(table["format"])
    caption = next(
        plain(c.value) for c in at.caption if plain(c.value).startswith("Every format")
    )
    assert f"with one fp32 absmax scale per group of {group};" in caption, caption
    assert "MXFP4 and NVFP4 as they ship" in caption, caption
    assert "E8M0 scale per 32 values" in caption and "FP8 scale per 16" in caption, caption
