"""Hostile text and the check that a page shows it literally: every Markdown-rendered
string of an AppTest run (alerts, captions, headings, markdown, widget labels and help
texts, radio options, expander and tab labels) parsed as CommonMark must hold no image, no
link and no HTML built from the hostile text, and no bare URL to its host that GitHub's
autolinks would turn into a link; every plotly figure's text must hold no raw ``<a`` or
``<img`` tag (plotly renders ``<a href>``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf.message import Message
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

HOST = "127.0.0.1:9"
"""Where the hostile text points (port 9, discard: nothing answers in AppTest tests)."""


def hostile(host: str = HOST, tag: str = "") -> str:
    """A name or value that is an image, a link, raw HTML and a bare URL at once."""
    return (
        f"![px{tag}](http://{host}/pixel{tag}.png) <img src=http://{host}/img{tag}.png> "
        f"[link{tag}](http://{host}/link{tag}) <a href=http://{host}/a{tag}>a</a> "
        f"http://{host}/bare{tag} :red[x]"
    )


HOSTILE = hostile()
# What a folder or file name can be (no "/"): browsers read "\" as "/" in an http URL.
HOSTILE_NAME = f"![px](http:\\\\{HOST}\\name.png) <img src=x> [l](x)"

# Proto fields that Streamlit renders as Markdown; options only for the widgets below
# (selectbox and multiselect options are plain text).
_MARKDOWN_FIELDS = frozenset({"body", "label", "help"})
_MARKDOWN_OPTIONS = frozenset({"Radio", "SelectSlider", "ButtonGroup"})
_PLAIN_ELEMENTS = frozenset({"Text", "Code"})
# mdast-util-gfm-autolink-literal's pattern (the text after escapes are resolved).
_AUTOLINK = re.compile(r"(?i)(https?://|www(?=\.))[-.\w]+")
_TAG = re.compile(r"(?i)<\s*(a|img)\b")
_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


@dataclass(frozen=True)
class Rendered:
    """One string Streamlit renders: ``where`` (proto type and field), ``text``."""

    where: str
    text: str


def _strings(msg: Message, where: str) -> Iterator[Rendered]:
    kind = where.split(".", 1)[0]
    for field, value in msg.ListFields():
        values = list(value) if field.is_repeated else [value]
        if field.message_type is not None:
            for v in values:
                if isinstance(v, Message):
                    yield from _strings(v, f"{where}.{field.name}")
            continue
        if field.type != field.TYPE_STRING or kind in _PLAIN_ELEMENTS:
            continue
        shown = (
            field.name in _MARKDOWN_FIELDS
            or (field.name in ("options", "content") and kind in _MARKDOWN_OPTIONS)
            or (kind == "PlotlyChart" and field.name == "spec")
        )
        if shown:
            yield from (Rendered(f"{where}.{field.name}", v) for v in values)


def rendered(at: AppTest) -> list[Rendered]:
    """Every Markdown-rendered string and plotly spec on the page (sidebar included)."""
    out: list[Rendered] = []

    def walk(node: object) -> None:
        proto = getattr(node, "proto", None)
        if isinstance(proto, Message):
            out.extend(_strings(proto, type(proto).__name__))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return out


def _plotly_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        if {"dtype", "bdata"} <= value.keys():
            return
        for v in value.values():
            yield from _plotly_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _plotly_strings(v)


def markdown_problems(text: str, host: str) -> list[str]:
    """What in Markdown ``text`` would render as an image, a link or HTML, or autolink to
    ``host``."""
    problems: list[str] = []

    def visit(tokens) -> None:
        for t in tokens:
            if t.type == "image":
                problems.append(f"image {t.attrs.get('src')!r}")
            elif t.type == "link_open" and host in str(t.attrs.get("href")):
                problems.append(f"link {t.attrs.get('href')!r}")
            elif t.type in ("html_inline", "html_block") and host in t.content:
                problems.append(f"html {t.content!r}")
            elif t.type == "text":
                for m in _AUTOLINK.finditer(t.content):
                    if host.split(":")[0] in t.content[m.start() : m.end() + len(host)]:
                        problems.append(f"autolink {m.group(0)!r}")
            if t.children:
                visit(t.children)

    visit(_MD.parse(text))
    return problems


def unsafe(at: AppTest, host: str = HOST) -> list[str]:
    """Each place on the page where hostile text pointing at ``host`` is not literal."""
    found: list[str] = []
    for r in rendered(at):
        if r.where.startswith("PlotlyChart"):
            for s in _plotly_strings(json.loads(r.text)):
                if host.split(":")[0] in s and _TAG.search(s):
                    found.append(f"{r.where}: {s[:160]!r}")
            continue
        for p in markdown_problems(r.text, host):
            found.append(f"{r.where}: {p} in {r.text[:160]!r}")
    return found


def shows(at: AppTest, needle: str) -> bool:
    """Whether ``needle`` (a piece of hostile text, as the visitor reads it) is on the page
    in some Markdown-rendered string: checks the hostile text reached the page at all."""
    for r in rendered(at):
        if r.where.startswith("PlotlyChart"):
            continue
        plain = "".join(_text_of(_MD.parse(r.text)))
        if needle in plain.replace("\u2060", ""):
            return True
    return False


def _text_of(tokens) -> Iterator[str]:
    for t in tokens:
        if t.type in ("text", "code_inline"):
            yield t.content
        if t.children:
            yield from _text_of(t.children)
