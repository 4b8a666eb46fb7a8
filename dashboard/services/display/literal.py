"""User-controlled text (typed values, names) shown as literal text inside Markdown.

Streamlit renders ``st.error``, ``st.caption``, ``st.markdown`` and labels as Markdown: a
typed ``![](//host/x)`` would become an image the visitor's browser fetches, ``[a](b)`` a
link, ``$x$`` maths, ``:smile:`` an emoji. ``literal`` puts a backslash before every ASCII
punctuation character Markdown (and Streamlit's extensions) may read, which CommonMark
renders as the character itself.
"""

from __future__ import annotations

import re

__all__ = ["literal"]

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def literal(text: str) -> str:
    """``text`` escaped so Markdown shows it as typed: ``literal("[a](b)")`` is
    ``\\[a\\]\\(b\\)``. Line breaks are kept."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _PUNCTUATION.sub(r"\\\1", text)
