"""A widget value fitted to the current tensor without losing the visitor's choice.

A group-size slider offers the divisors of the tensor's columns; a visit to a narrower
tensor must move an out-of-range choice to a size it offers, and the choice must come back
on a wider tensor (256 turned into 2 for good, and the sweep's list of group sizes emptied,
when the fitted value was taken for the choice). So the session keeps, next to the widget's
``key``, the value the visitor (or a link) chose (``_{key}_chosen``) and the last value set
here (``_{key}_fitted``): a widget value unlike the fitted one is a new choice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import streamlit as st

__all__ = ["fit_choice", "forget_fitted"]

T = TypeVar("T")


def _chosen_key(key: str) -> str:
    return f"_{key}_chosen"


def _fitted_key(key: str) -> str:
    return f"_{key}_fitted"


def fit_choice(key: str, read: Callable[[object], T], fit: Callable[[T], T]) -> None:
    """Set ``st.session_state[key]`` to ``fit(chosen)`` before its widget is drawn, where
    ``chosen`` is the visitor's last choice (``read`` turns the stored value into a
    comparable one). Set only when it must change: a value set here is sent back to the
    browser and overwrites a widget move in flight."""
    ss = st.session_state
    current = read(ss[key])
    if current != ss.get(_fitted_key(key)):
        ss[_chosen_key(key)] = current  # not a value set here: the visitor's or a link's
    target = fit(ss.get(_chosen_key(key), current))
    if target != current:
        ss[key] = target
        ss[_fitted_key(key)] = target


def forget_fitted(key: str) -> None:
    """The widget ``key`` is given a value from outside (a link, Back, a preset's button):
    that value is the choice, even when it equals a value fitted here before."""
    st.session_state.pop(_fitted_key(key), None)
