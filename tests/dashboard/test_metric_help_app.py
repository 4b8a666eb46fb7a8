"""AppTest: every metric card's help ("?") defines its metric with a formula
(``display.metric_help``) instead of repeating the number, on the explorer, A/B, whole-model
and layer pages; and a size ratio below 1 is never called "smaller"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st
from canvas import canvas_payload, metrics_shown
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.display.metric_help import Metric

VIEWS = Path(__file__).resolve().parents[2] / "dashboard" / "views"
DEFINITIONS = tuple(m.definition for m in Metric)
NUMBER = re.compile(r"^[-+]?[0-9.,e∞]+( dB)?$")


def run_page(page: str, timeout: int = 120, **query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(VIEWS / page), default_timeout=timeout)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]
    return at


def assert_defined(cards: list[dict]) -> None:
    """Each card's help is a definition from the table (and never a bare number)."""
    assert cards
    for card in cards:
        text = card["help"]
        assert not NUMBER.match(text.strip()), card
        assert text.startswith(DEFINITIONS) or "stays in float" in text, card


def test_explorer_cards_define_their_metrics() -> None:
    at = run_page("explorer.py", 60, src="synthetic", rows="16", cols="64")
    cards = metrics_shown(at)
    assert len(cards) == 12
    assert_defined(cards)
    by_label = {c["label"]: c["help"] for c in cards}
    assert "10·log10(Σx² / Σ(x − x̂)²)" in by_label["SQNR"]
    assert "mean((x − x̂)²)" in by_label["MSE"]


def test_explorer_algorithm_cards_define_their_metrics() -> None:
    at = run_page("explorer.py", 120, src="synthetic", rows="16", cols="64", algo="hqq")
    cards = metrics_shown(at)
    assert len(cards) == 12 + 5
    assert_defined(cards)


def test_a_larger_scheme_says_larger_not_smaller() -> None:
    # 8 bits with a 16-bit scale (the default scale dtype) and an 8-bit zero point for
    # every 2 values: 8 + 16/2 + 8/2 = 20 bits per element, more than fp16's 16.
    at = run_page(
        "explorer.py", 60, src="synthetic", rows="4", cols="8", bits="8", mode="asymmetric",
        gran="group", group="2",
    )  # fmt: skip
    labels = {c["label"]: c["value"] for c in metrics_shown(at)}
    assert "Smaller than fp16" not in labels
    assert labels["Larger than fp16"] == f"{20 / 16:.2f}×"
    assert labels["Smaller than fp32"] == f"{32 / 20:.2f}×"


def test_ab_metric_columns_are_defined() -> None:
    at = run_page("ab.py", 120, src="synthetic", rows="32", cols="64")
    columns = json.loads(at.dataframe[0].proto.columns)
    for name in ("MSE", "SQNR (dB)", "cosine", "max abs error", "bits/element", "bytes"):
        assert columns[name]["help"].startswith(DEFINITIONS), name


@pytest.mark.slow
def test_layer_page_metrics_are_defined() -> None:
    assert_defined(metrics_shown(run_page("layer.py", 180)))


@pytest.mark.slow
def test_whole_model_metrics_are_defined() -> None:
    at = run_page("model.py", 300)
    cards = metrics_shown(at)
    assert {"Mean embedding cosine", "Smaller than fp32"} <= {c["label"] for c in cards}
    for card in cards:
        assert card["help"] and not NUMBER.match(card["help"]), card
    assert_defined([c for c in cards if c["label"] != "Linear weights, fp32"])


@pytest.mark.slow
def test_the_layer_lessons_lab_cards_are_defined() -> None:
    at = run_page("lessons.py", 180, lesson="weights-activations")
    at.radio(key="lesson_q_weights-activations").set_value(0).run()
    lab = canvas_payload(at, "lesson_metrics")
    helps = {c["label"]: c["help"] for row in lab["rows"] for c in row}
    assert helps["Output MSE"].startswith(Metric.OUTPUT_MSE.definition)
    assert helps["Output SQNR"].startswith(Metric.OUTPUT_SQNR.definition)
