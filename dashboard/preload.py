"""Preload hints, in the page a new browser opens, for the code Streamlit loads lazily.

Why: Streamlit's ``index.html`` preloads its core bundle only. Each element's code (the
widgets, the components' runtime with Arrow, KaTeX) is fetched when the first element of
its kind arrives over the websocket, and then the files that code imports: a chain of
round trips to a server that is busy running the script meanwhile. On the explorer the
last of those 48 files arrived 250-300 ms after the server's last message
(``benchmarks/first_display.py``). With ``<link rel="modulepreload">`` for them and
``<link rel="preload">`` for the fonts in ``index.html``, the browser fetches them with the
bundle, while the server is idle. Cold first displays from two launched servers, 8 each,
alternating: 1,401 instead of 1,454 ms for the word embeddings, 1,389 instead of 1,522 ms
at 4096x4096 (the links with ``fetchpriority="low"`` gained less in a first trial).

The launcher (``python -m dashboard``) serves Streamlit's static folder from a copy whose
``index.html`` carries them, everything else linked to the original
(``serve_static_with_preloads``); ``QLAB_PRELOAD=0`` turns it off. Under a plain
``streamlit run`` nothing changes.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ELEMENT_CHUNKS",
    "ENV",
    "FONTS",
    "Preloads",
    "plan_preloads",
    "serve_static_with_preloads",
    "with_preloads",
]

_log = logging.getLogger(__name__)

ENV = "QLAB_PRELOAD"
"""``0`` serves Streamlit's own ``index.html`` (to compare, or should a preload misbehave)."""

ELEMENT_CHUNKS = (
    "Selectbox",
    "Checkbox",
    "Slider",
    "Radio",
    "NumberInput",
    "Button",
    "BidiComponent",
    "rehype-katex",
)
"""The lazily loaded chunks the explorer's first display needs (its widgets, the
``st.components.v2`` runtime, the teaching panel's KaTeX), by the name before the hash:
``Slider`` is ``static/js/Slider.<hash>.js``."""

FONTS = (
    "SourceCodeVF-Upright",
    "SourceSansVF-Italic",
    "KaTeX_Math-Italic",
    "KaTeX_Main-Regular",
    "KaTeX_Size2-Regular",
)
"""The fonts it draws with besides the one ``index.html`` preloads (``static/media``)."""

# A static import in a chunk: `import{a as b}from"./x.js"` or `import"./x.js"`; a dynamic
# `import("./x.js")` is lazy in its turn and not followed.
_STATIC_IMPORT = re.compile(r'(?:\bfrom|\bimport)\s*"\./([^"/]+\.js)"')
_LOADED = re.compile(r'(?:href|src)="\./static/js/([^"/]+\.js)"')


@dataclass(frozen=True)
class Preloads:
    """What to preload: ``modules`` (file names in ``static/js``) and ``fonts`` (file names
    in ``static/media``); ``missing``: the chunk and font names not found."""

    modules: tuple[str, ...]
    fonts: tuple[str, ...]
    missing: tuple[str, ...]


def _stem(name: str) -> str:
    return name.split(".", 1)[0]


def plan_preloads(
    static_dir: Path, chunks: Sequence[str] = ELEMENT_CHUNKS, fonts: Sequence[str] = FONTS
) -> Preloads:
    """The files of ``chunks`` in ``static_dir/static/js`` and every file they import
    statically, transitively, less those ``index.html`` already loads; and the ``fonts`` in
    ``static_dir/static/media`` (``.woff2``). Raises ``FileNotFoundError`` when
    ``static_dir`` has no ``index.html``."""
    static_dir = Path(static_dir)
    index = (static_dir / "index.html").read_text(encoding="utf-8")
    loaded = set(_LOADED.findall(index))
    js = {p.name: p for p in (static_dir / "static" / "js").glob("*.js")}
    roots = [name for name in sorted(js) if _stem(name) in chunks]
    modules: list[str] = []
    todo = list(roots)
    while todo:
        name = todo.pop(0)
        if name in modules or name in loaded:
            continue
        modules.append(name)
        todo += [m for m in _STATIC_IMPORT.findall(js[name].read_text(encoding="utf-8")) if m in js]
    media = sorted(p.name for p in (static_dir / "static" / "media").glob("*.woff2"))
    found_fonts = tuple(name for name in media if _stem(name) in fonts)
    found = {_stem(name) for name in (*roots, *found_fonts)}
    missing = tuple(name for name in (*chunks, *fonts) if name not in found)
    return Preloads(tuple(modules), found_fonts, missing)


def with_preloads(index_html: str, preloads: Preloads) -> str:
    """``index_html`` with a ``modulepreload`` link per module and a font ``preload`` link
    per font just before ``</head>`` (relative, as Streamlit's own, so a base URL path is
    kept). Raises ``ValueError`` when it has no ``</head>``."""
    if "</head>" not in index_html:
        raise ValueError("index.html has no </head> to put the preload links before")
    links = [
        f'<link rel="modulepreload" crossorigin href="./static/js/{name}">'
        for name in preloads.modules
    ]
    font = '<link rel="preload" href="./static/media/{}" as="font" type="font/woff2" crossorigin>'
    links += [font.format(name) for name in preloads.fonts]
    return index_html.replace("</head>", "\n    ".join(["", *links]) + "\n  </head>", 1)


def serve_static_with_preloads() -> Preloads | None:
    """Point Streamlit's static folder (``streamlit.file_util.get_static_dir``, read when
    the server makes its routes: call this before it starts) at a temporary copy whose
    ``index.html`` has ``with_preloads``; every other entry is a symbolic link to the
    original. Removed when the process exits. Returns what it preloads; ``None`` when
    ``QLAB_PRELOAD`` is ``0``, and (logged) when there is nothing to preload or the copy
    cannot be made (no symbolic links)."""
    from streamlit import file_util

    if os.environ.get(ENV, "").strip() == "0":
        return None
    source = Path(file_util.get_static_dir())
    try:
        preloads = plan_preloads(source)
        if not preloads.modules and not preloads.fonts:
            _log.warning("dashboard.preload: none of Streamlit's lazily loaded code was found")
            return None
        index = with_preloads((source / "index.html").read_text(encoding="utf-8"), preloads)
        copy = Path(tempfile.mkdtemp(prefix="qlab-static-"))
        atexit.register(shutil.rmtree, copy, ignore_errors=True)
        for entry in source.iterdir():
            if entry.name != "index.html":
                os.symlink(entry, copy / entry.name, target_is_directory=entry.is_dir())
        (copy / "index.html").write_text(index, encoding="utf-8")
    except (OSError, ValueError) as exc:
        _log.warning("dashboard.preload: serving Streamlit's own index.html (%s)", exc)
        return None
    if preloads.missing:
        _log.warning("dashboard.preload: not found in Streamlit's code: %s", preloads.missing)
    file_util.get_static_dir = lambda: str(copy)
    return preloads
