"""What a visitor reads from the Markdown source AppTest gives (``element.value``): escapes
resolved, emphasis and code markers dropped, invisible word joiners removed. Pages escape
user text (``dashboard.services.display.text.literal``), so a message quoting a value reads
``tensor\\=\\'x\\'`` in the source and ``tensor='x'`` on the page."""

from __future__ import annotations

from collections.abc import Iterator

from markdown_it import MarkdownIt

from dashboard.services.display.text import WORD_JOINER

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _text(tokens) -> Iterator[str]:
    for t in tokens:
        if t.type in ("text", "code_inline", "html_inline"):
            yield t.content
        elif t.type in ("softbreak", "hardbreak"):
            yield " "
        if t.children:
            yield from _text(t.children)


def plain(source: str) -> str:
    """The text ``source`` shows, paragraphs joined by one space."""
    blocks = [
        "".join(_text(t.children or []))
        for t in _MD.parse(source)
        if t.type == "inline"
    ]
    return " ".join(blocks).replace(WORD_JOINER, "")
