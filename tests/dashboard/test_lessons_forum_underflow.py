"""AppTest: the forum lab on values so small that ``max|a| / 127`` underflows float32."""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

LESSONS_PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "lessons.py")


def test_a_scale_that_underflows_float32_is_called_a_stand_in() -> None:
    """a = [1.4e-45, 1.4e-45] (float32's smallest subnormal): max|a| / 127 = 1.1e-47
    rounds to 0 in float32, and the lab stands in s = 1.4e-45. The card and the sentence
    said "s = max|a| / 127 = 1.401e-45", a false equation. Both now say it underflowed."""
    st.cache_data.clear()
    at = AppTest.from_file(LESSONS_PAGE, default_timeout=180)
    at.query_params["lesson"] = "forum-min-max"
    at.run()
    at.radio(key="lesson_q_forum-min-max").set_value(0).run()
    at.text_area(key="lesson_values").input("1e-45, 1.4e-45").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (el,) = [e for e in at.get("bidi_component") if e.key == "lesson_course"]
    cards = {c["label"]: c["value"] for row in json.loads(el.proto.json)["rows"] for c in row}
    assert "s = max|a| / 127" not in cards, cards
    assert cards["s (max|a| / 127 underflows)"] == "1.401e-45", cards
    (sentence,) = [m.value for m in at.markdown if m.value.startswith("**b is")]
    assert "underflows float32, so the lab stands in s = 1.401e-45" in sentence, sentence
    assert "s = max|a| / 127 =" not in sentence, sentence
