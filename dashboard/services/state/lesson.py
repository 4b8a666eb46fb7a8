"""The Lessons page's URL: ``lesson=<slug>`` names the lesson (a teacher's link to one), and
the links a lesson opens elsewhere (the explorer, the whole-model and layer pages) at the
lesson's state, as relative addresses built from the pages' own URL keys."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

from ..lessons.catalog import LESSONS, Lesson, lesson_by_slug

__all__ = ["LESSON_KEY", "lesson_from_query", "lesson_to_query", "page_href"]

LESSON_KEY = "lesson"
_MAX_LEN = 64


def lesson_to_query(lesson: Lesson) -> dict[str, str]:
    return {LESSON_KEY: lesson.slug}


def lesson_from_query(params: Mapping[str, str]) -> Lesson:
    """The lesson ``params`` names; the first lesson when it names none. ``ValueError``
    naming the value and the known lessons for anything else."""
    raw = params.get(LESSON_KEY)
    if raw is None:
        return LESSONS[0]
    if not isinstance(raw, str) or len(raw) > _MAX_LEN:
        raise ValueError(f"{LESSON_KEY} must be a lesson's name of at most {_MAX_LEN} characters")
    return lesson_by_slug(raw)


def page_href(page: str, query: Mapping[str, str]) -> str:
    """A relative address of the app's ``page`` (``""``: the explorer, the default page;
    ``"model"``, ``"layer"``, ``"lessons"``) with ``query``, URL-encoded: it works from any
    page of the app and under a base path."""
    tail = f"?{urlencode(dict(query))}" if query else ""
    return f"./{page}{tail}"
