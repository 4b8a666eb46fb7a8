"""Lessons: the course "Quantization in Depth" chapter by chapter, each with its lab opened
at the course's settings, then the forum's questions."""

from __future__ import annotations

import streamlit as st

from dashboard.components import url
from dashboard.components.lesson_labs import draw_lab, reset_lab
from dashboard.components.lessons import lesson_navigation, lesson_picker, question
from dashboard.services.lessons.catalog import LESSONS
from dashboard.services.state.lesson import lesson_to_query

lesson = lesson_picker()
url.show_warnings()
url.write(lesson_to_query(lesson))
reset_lab(lesson)

number = LESSONS.index(lesson) + 1
st.title(f"{number}. {lesson.title}")
if lesson.chapters:
    st.caption("Quantization in Depth (DeepLearning.AI with Hugging Face): " + " · ".join(
        lesson.chapters
    ))
else:
    st.caption("A question from the course's forum")
for paragraph in lesson.narrative:
    st.markdown(paragraph)
if question(lesson):
    draw_lab(lesson)
st.divider()
lesson_navigation(lesson)
