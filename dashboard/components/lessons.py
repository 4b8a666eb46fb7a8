"""The Lessons page's own widgets: which lesson (from the URL or the picker), the question
asked before the lab shows its result, and previous/next."""

from __future__ import annotations

import streamlit as st

from dashboard.components import url
from dashboard.components.persist import PERSIST
from dashboard.services.lessons.catalog import LESSONS, Lesson, lesson_by_slug, neighbours
from dashboard.services.state.lesson import lesson_from_query

__all__ = ["lesson_navigation", "lesson_picker", "question"]

_PICK = "lesson_pick"


def _number(lesson: Lesson) -> int:
    return LESSONS.index(lesson) + 1


def _label(slug: str) -> str:
    lesson = lesson_by_slug(slug)
    tail = "" if lesson.chapters else " (forum)"
    return f"{_number(lesson)}. {lesson.title}{tail}"


def lesson_picker() -> Lesson:
    """The lesson to show: the URL's ``lesson=`` when the address is new to the session
    (a link, Back/Forward), else the picker's; a bad value warns and opens the first."""
    if url.first_run("lessons"):
        try:
            st.session_state[_PICK] = lesson_from_query(url.query_snapshot()).slug
        except ValueError as exc:
            url.add_warning(f"Ignored the link's lesson ({exc}).")
            st.session_state[_PICK] = LESSONS[0].slug
    st.session_state.setdefault(_PICK, LESSONS[0].slug)
    slug = st.selectbox(
        "Lesson",
        [lesson.slug for lesson in LESSONS],
        format_func=_label,
        key=_PICK,
        persist_state=PERSIST,
    )
    return lesson_by_slug(slug)


def _go(slug: str) -> None:
    st.session_state[_PICK] = slug


def lesson_navigation(lesson: Lesson) -> None:
    """Previous and next, as buttons (keys ``lesson_prev`` / ``lesson_next``)."""
    prev, nxt = neighbours(lesson)
    left, right = st.columns(2)
    if prev is not None:
        left.button(
            "← Previous", key="lesson_prev", on_click=_go, args=(prev.slug,), width="stretch"
        )
        left.caption(f"Lesson {_number(prev)}: {prev.title}")
    if nxt is not None:
        right.button(
            "Next →",
            key="lesson_next",
            on_click=_go,
            args=(nxt.slug,),
            type="primary",
            width="stretch",
        )
        right.caption(f"Lesson {_number(nxt)}: {nxt.title}")


def question(lesson: Lesson) -> bool:
    """Ask the lesson's question; True once answered (or skipped), when the lab may show
    its result. The answer and why are shown then."""
    q = lesson.question
    key = f"lesson_q_{lesson.slug}"
    skip_key = f"_lesson_skipped_{lesson.slug}"
    choice = st.radio(
        f"**Predict first.** {q.prompt}",
        list(range(len(q.options))),
        format_func=q.options.__getitem__,
        index=None,
        key=key,
        persist_state=PERSIST,
    )
    if choice is None and not st.session_state.get(skip_key):
        if not st.button("Show the result without answering", key=f"lesson_skip_{lesson.slug}"):
            st.caption("Answer to open the lab with the result.")
            return False
        st.session_state[skip_key] = True
    if choice is None:
        st.info(f"The answer: **{q.options[q.answer]}**. {q.why}")
    elif choice == q.answer:
        st.success(f"Right: **{q.options[q.answer]}**. {q.why}")
    else:
        st.warning(f"Not quite: the answer is **{q.options[q.answer]}**. {q.why}")
    return True
