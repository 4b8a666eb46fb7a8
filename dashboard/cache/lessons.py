"""Caches of the Lessons page: the labs' computations over the bundled model's weights.

See ``dashboard.cache`` for the keying rule."""

from __future__ import annotations

import pandas as pd
import streamlit as st
import torch

from dashboard.services.explorer.explore import Exploration
from dashboard.services.lessons.course import format_table
from dashboard.services.lessons.forum import ForumAnswer, forum_answer
from dashboard.services.lessons.loading import RoundTrip, round_trip

__all__ = ["lesson_formats", "lesson_forum", "lesson_round_trip"]


@st.cache_resource(max_entries=4, show_spinner=False)
def lesson_formats(key: str, _weight: torch.Tensor, group_size: int) -> pd.DataFrame:
    """``key``: the weight's source."""
    return format_table(_weight, group_size)


@st.cache_resource(max_entries=4, show_spinner=False)
def lesson_round_trip(key: str, _exp: Exploration) -> RoundTrip:
    """``key``: the exploration's (source and scheme)."""
    return round_trip(_exp)


@st.cache_resource(max_entries=8, show_spinner=False)
def lesson_forum(key: str, _a: torch.Tensor) -> ForumAnswer:
    """``key``: the values' source (a typed source's digest)."""
    return forum_answer(_a)
