"""AppTest: defects a demanding learner hit on the Lessons page, each with the run that
showed it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dashboard.services.display.decimals import fixed_decimals

LESSONS_PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "lessons.py")


def _forum(values: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(LESSONS_PAGE, default_timeout=180)
    at.query_params["lesson"] = "forum-min-max"
    at.run()
    at.radio(key="lesson_q_forum-min-max").set_value(0).run()
    at.text_area(key="lesson_values").input(values).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _cards(at: AppTest) -> dict[str, str]:
    for el in at.get("bidi_component"):
        if el.key == "lesson_course":
            data = json.loads(el.proto.json)
            return {c["label"]: c["value"] for row in data["rows"] for c in row}
    raise AssertionError("no course cards")


@pytest.mark.parametrize(
    ("values", "scale"),
    [
        ("0.00001 -0.00002 0.000015 0.00003", 0.00003 / 127),
        ("1e30 -2e30 5e29", 2e30 / 127),
    ],
    ids=["tiny", "huge"],
)
def test_forum_lab_shows_the_scale_of_tiny_and_huge_values(values: str, scale: float) -> None:
    """Pasted weights of magnitude 1e-5 showed ``s = 0.000000`` (and b, min(a) as
    ``0.0000``): six fixed decimals print any scale below 5e-7 as zero. Values near 1e30
    printed ``s`` with 28 digits before the point. The scale is shown to four significant
    digits, in the card and in the sentence."""
    at = _forum(values)
    cards = _cards(at)
    shown = cards["s = max|a| / 127"]
    assert len(shown) <= 12, shown
    assert math.isclose(float(shown), scale, rel_tol=1e-3), (shown, scale)
    assert float(cards["min(a)"]) != 0.0, cards
    (sentence,) = [m.value for m in at.markdown if m.value.startswith("**b is")]
    assert f"s = max|a| / 127 = {shown}," in sentence, sentence


def test_forum_lab_keeps_the_threads_numbers() -> None:
    """The course thread's values still read as before: six decimals for s."""
    st.cache_data.clear()
    at = AppTest.from_file(LESSONS_PAGE, default_timeout=180)
    at.query_params["lesson"] = "forum-min-max"
    at.run()
    at.radio(key="lesson_q_forum-min-max").set_value(0).run()
    cards = _cards(at)
    assert cards["s = max|a| / 127"] == "0.041719"
    assert cards["min(a)"] == "0.5491"


@pytest.mark.parametrize(
    ("value", "places", "text"),
    [
        (0.0417189, 6, "0.041719"),
        (0.5423, 4, "0.5423"),
        (0.0, 6, "0.000000"),
        (-2.0, 4, "-2.0000"),
        (2.362204724409449e-07, 6, "2.362e-07"),
        (0.0009, 4, "0.0009"),
        (-0.00009, 4, "-9e-05"),
        (1.5748e28, 6, "1.575e+28"),
        (float("nan"), 4, "nan"),
    ],
)
def test_fixed_decimals(value: float, places: int, text: str) -> None:
    assert fixed_decimals(value, places) == text


def test_fixed_decimals_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="True"):
        fixed_decimals(True, 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="-1"):
        fixed_decimals(1.0, -1)


def test_forum_lab_on_zeros_does_not_claim_max_over_127_is_one() -> None:
    """``0 0 0`` showed "s = max|a| / 127 = 1.000000": max|a| is 0, and 1 is the lab's
    stand-in scale for a block of zeros (0 / 127 would make every code 0 / 0). The card and
    the sentence say so instead of a false equation."""
    at = _forum("0 0 0")
    cards = _cards(at)
    assert "s = max|a| / 127" not in cards, cards
    assert cards["s (all of a is 0)"] == "1"
    (sentence,) = [m.value for m in at.markdown if m.value.startswith("**b is")]
    assert "max|a| / 127 = 1" not in sentence, sentence
    assert "max|a| = 0" in sentence, sentence
