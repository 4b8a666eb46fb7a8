"""AppTest: a lesson lab's group size that does not fit its tensor is fitted to the nearest
size that does, with a note, and the learner's own size comes back where it fits."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dashboard.services.lessons.settings import LabGranularity
from dashboard.services.state.group_size import nearest_size

LESSONS_PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "lessons.py")


def _open(at: AppTest, slug: str) -> None:
    at.selectbox(key="lesson_pick").set_value(slug).run()
    at.radio(key=f"lesson_q_{slug}").set_value(0).run()
    at.selectbox(key="lesson_gran").set_value(LabGranularity.GROUP).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _notes(at: AppTest) -> list[str]:
    return [c.value for c in at.caption if "Group size" in c.value]


def test_a_group_size_the_tensor_cannot_take_is_fitted_with_a_note_and_kept() -> None:
    """A group of 96 picked on the 384-column query weight became 3 on the 3x3 course
    tensor, then 64 (not 96) back on the query weight: the lab put the largest size up to
    64 in its place without a word. Now the nearest size that fits is used, a caption
    says so, and the learner's 96 comes back on a tensor it divides."""
    st.cache_data.clear()
    at = AppTest.from_file(LESSONS_PAGE, default_timeout=180)
    at.query_params["lesson"] = "custom-quantizer"
    at.run()
    _open(at, "custom-quantizer")
    at.select_slider(key="lesson_group").set_value(96).run()
    assert not _notes(at), _notes(at)

    _open(at, "granularity")  # the 3x3 course tensor: sizes 1 and 3
    assert at.select_slider(key="lesson_group").value == 3
    (note,) = _notes(at)
    assert "96" in note and "3" in note, note

    _open(at, "load-back")  # the query weight again: 96 divides 384
    assert at.select_slider(key="lesson_group").value == 96
    assert not _notes(at), _notes(at)


def test_nearest_size_keeps_an_offered_size_and_takes_the_smaller_on_a_tie() -> None:
    assert nearest_size(96, (1, 3)) == 3
    assert nearest_size(6, (4, 8)) == 4
    assert nearest_size(64, (32, 64, 128)) == 64
    with pytest.raises(ValueError, match="96"):
        nearest_size(96, ())
