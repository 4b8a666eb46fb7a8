"""Defects a demanding user hit on the Lessons page (defect pass 8), each with the run
that showed it."""

from __future__ import annotations

from markdown_text import plain
from page_runs import open_page

FORUM = "forum-min-max"


def _forum():
    at = open_page("lessons.py", lesson=FORUM)
    at.button(key=f"lesson_skip_{FORUM}").click().run()
    return at


def test_the_forum_lab_says_how_it_read_the_values() -> None:
    """``1e39, 2`` typed into the forum's box: 1e39 is past float32's largest value and
    became inf when read, and the lab said only "min_max_quantize needs finite values: the
    text holds NaN or Inf" (the text holds neither). The explorer shows how typed text was
    read (``TypedValues.notes``); the forum lab dropped those notes."""
    at = _forum()
    at.text_area(key="lesson_values").set_value("1e39, 2").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [plain(c.value) for c in (*at.caption, *at.error)]
    assert any("1 value beyond float32's range became ±inf." in s for s in shown), shown
    assert "a: min_max_quantize needs finite values: a holds NaN or ±inf" in shown, shown

    at.text_area(key="lesson_values").set_value("1\n2\n3").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [plain(c.value) for c in at.caption]
    assert "One value per line: read as a vector of 3." in shown, shown
