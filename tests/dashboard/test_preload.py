"""Preload hints for Streamlit's lazily loaded code (``dashboard.preload``): the plan on a
hand-made static folder and on Streamlit's own, the patched ``index.html``, and the copy
the launcher serves."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit import file_util

from dashboard import preload

INDEX = """<!DOCTYPE html>
<html>
  <head>
    <script type="module" crossorigin src="./static/js/index.h0.js"></script>
    <link rel="modulepreload" crossorigin href="./static/js/core.h3.js">
  </head>
  <body><div id="root"></div></body>
</html>
"""


def _static(tmp_path: Path) -> Path:
    js = tmp_path / "static" / "js"
    media = tmp_path / "static" / "media"
    js.mkdir(parents=True)
    media.mkdir(parents=True)
    (tmp_path / "index.html").write_text(INDEX)
    files = {
        "index.h0.js": 'import"./core.h3.js";',
        "core.h3.js": "export const c=1;",
        # A chunk: two static imports (one already loaded by index.html), one dynamic.
        "Slider.h1.js": 'import{a as b}from"./dep.h2.js";import"./core.h3.js";'
        'const l=()=>import("./lazy.h4.js");',
        "dep.h2.js": 'import{d}from"./deep.h5.js";export const a=1;',
        "deep.h5.js": "export const d=1;",
        "lazy.h4.js": "export const z=1;",
        "SliderExtra.h6.js": "export const s=1;",  # same prefix, another name
    }
    for name, text in files.items():
        (js / name).write_text(text)
    (media / "Font-Regular.ttf.h7.woff2").write_bytes(b"\0")
    (media / "Other.h8.woff2").write_bytes(b"\0")
    return tmp_path


def test_the_plan_follows_static_imports_only(tmp_path: Path) -> None:
    static = _static(tmp_path)
    plan = preload.plan_preloads(static, chunks=("Slider", "Gone"), fonts=("Font-Regular", "X"))
    assert plan.modules == ("Slider.h1.js", "dep.h2.js", "deep.h5.js")
    assert plan.fonts == ("Font-Regular.ttf.h7.woff2",)
    assert plan.missing == ("Gone", "X")


def test_a_folder_without_index_html(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        preload.plan_preloads(tmp_path)


def test_the_links_go_before_head_end() -> None:
    plan = preload.Preloads(("a.h1.js", "b.h2.js"), ("F.h3.woff2",), ())
    html = preload.with_preloads(INDEX, plan)
    head, body = html.split("</head>")
    assert '<link rel="modulepreload" crossorigin href="./static/js/a.h1.js">' in head
    assert '<link rel="modulepreload" crossorigin href="./static/js/b.h2.js">' in head
    assert 'href="./static/media/F.h3.woff2" as="font" type="font/woff2" crossorigin>' in head
    assert "modulepreload" not in body
    # Nothing of the original is lost or moved.
    kept = [line for line in html.splitlines() if not any(f in line for f in plan.modules)]
    kept = [line for line in kept if plan.fonts[0] not in line and line.strip()]
    assert kept == [line for line in INDEX.splitlines() if line.strip()]
    with pytest.raises(ValueError, match="</head>"):
        preload.with_preloads("<html><body></body></html>", plan)


def test_streamlits_own_code_has_every_chunk_and_font() -> None:
    # A Streamlit upgrade that renames a chunk fails here: update ELEMENT_CHUNKS / FONTS.
    static = Path(file_util.get_static_dir())
    plan = preload.plan_preloads(static)
    assert plan.missing == ()
    assert {name.split(".")[0] for name in plan.modules} >= set(preload.ELEMENT_CHUNKS)
    assert all((static / "static" / "js" / m).is_file() for m in plan.modules)
    assert len(plan.fonts) == len(preload.FONTS)
    index = (static / "index.html").read_text()
    assert not any(f"./static/js/{m}" in index for m in plan.modules)  # not loaded twice


def test_the_launcher_serves_a_copy_with_the_links(monkeypatch: pytest.MonkeyPatch) -> None:
    original = file_util.get_static_dir
    monkeypatch.setattr(file_util, "get_static_dir", original)  # restored after the test
    plan = preload.serve_static_with_preloads()
    assert plan is not None
    copy = Path(file_util.get_static_dir())
    source = Path(original())
    assert copy != source
    html = (copy / "index.html").read_text()
    assert html == preload.with_preloads((source / "index.html").read_text(), plan)
    for entry in source.iterdir():
        if entry.name != "index.html":
            linked = copy / entry.name
            assert linked.is_symlink() and os.path.samefile(linked, entry)
    assert (copy / "static" / "js" / plan.modules[0]).is_file()


def test_off_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    original = file_util.get_static_dir
    monkeypatch.setattr(file_util, "get_static_dir", original)
    monkeypatch.setenv(preload.ENV, "0")
    assert preload.serve_static_with_preloads() is None
    assert file_util.get_static_dir is original
