"""AppTest, whole-model page on the bundled MiniLM: prose sentences by default, a hint for
reading the cosine, an honest cosine axis, and a preset that says what it replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.model.judge import COSINE_HINT, JUDGE_SENTENCES
from dashboard.services.state.model import ActivationChoice

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "model.py"

pytestmark = pytest.mark.slow


def test_model_page_reads_clearly_and_names_what_a_preset_replaces() -> None:
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=300).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.text_area(key="m_sentences").value == "\n".join(JUDGE_SENTENCES)
    assert any(c.value == COSINE_HINT for c in at.caption)
    fig = json.loads(at.get("plotly_chart")[-1].proto.spec)  # the cosine chart
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert "1 − cosine" in fig["layout"]["xaxis"]["title"]["text"]
    at.selectbox(key="m_act").set_value(ActivationChoice.W8A8).run()
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(plain(i.value) for i in at.info)
    assert "Preset W8A8 sets the weights too: int8 sym per-channel(0), fp32 scales" in said
    assert "replaces your int4 asym g64, fp16 scales" in said
