"""Text from users shown as it is: URL values, file, folder, tensor and upload names, typed
sentences, and messages that quote them.

Streamlit renders Markdown in ``st.markdown``, ``st.caption``, ``st.info``/``warning``/
``error``, headers, widget labels, help texts, radio options and expander labels: a tensor
named ``![](//host/a)`` would become an image every visitor's browser fetches, and
``[text](url)`` a link that hides where it goes. Plotly renders a subset of HTML
(``<a href>``, ``<b>``, ``<br>``) in titles, tick labels, hovers and annotations. So:

- ``literal(text)``: Markdown source that shows ``text`` character for character.
- ``html_literal(text)``: the same for plotly's HTML-like text.

Selectbox and multiselect options, ``st.text``, ``st.code`` and dataframe cells show their
text as it is and must not be escaped (the backslashes would show).
"""

from __future__ import annotations

import html
import re

__all__ = ["html_literal", "literal"]

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and an escaped
# one is always its literal self: no emphasis, link, image, code span, HTML, table cell,
# heading, list marker, Streamlit directive (``:red[...]``, ``:material/...:``, emoji
# shortcodes) or ``$`` math can start from it.
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# GitHub's autolinks ("http://...", "www.x", "a@b.c") are found in the text *after* escapes
# are resolved (remark's mdast-util-gfm-autolink-literal), so escaping alone leaves a bare
# URL a link. An invisible WORD JOINER (U+2060) at the point the pattern needs contiguous
# characters breaks it: before the escaped ":" of a scheme, before the escaped "." after
# "www", and before an escaped "@".
_AUTOLINK = re.compile(r"(?i)(?<=https)(?=\\:)|(?<=http)(?=\\:)|(?<=www)(?=\\\.)|(?=\\@)")
WORD_JOINER = "\u2060"
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")


def literal(text: object) -> str:
    """Markdown source that Streamlit shows as ``str(text)``, character for character.

    Each ASCII punctuation character gets a backslash (``![a](b)`` -> ``\\!\\[a\\]\\(b\\)``),
    line breaks become spaces (a name or message is one line; a blank line would start a
    new block), and a word joiner (U+2060, invisible) keeps ``http://``, ``www.`` and
    ``@`` from becoming GitHub autolinks. Use it for every user-controlled string (and
    every message that may quote one, such as a parser's ``ValueError``) put into a
    Markdown context, and only there: ``f"**{literal(name)}** · shape {shape}"``.
    """
    escaped = _PUNCTUATION.sub(r"\\\1", _LINE_BREAKS.sub(" ", str(text)))
    return _AUTOLINK.sub(WORD_JOINER, escaped)


def html_literal(text: object) -> str:
    """``str(text)`` for plotly's titles, axis and tick labels, hovers and annotations:
    ``&``, ``<``, ``>`` and quotes as entities, so ``<a href=...>`` shows as text."""
    return html.escape(str(text), quote=True)
