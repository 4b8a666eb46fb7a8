"""AppTest: hostile text from a link, a model folder, an upload or typed sentences is shown
literally on every page: nothing Markdown renders becomes an image, a link or HTML, and no
plotly text holds a raw ``<a>`` or ``<img>`` (see ``hostile``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hostile import HOSTILE, HOSTILE_NAME, shows, unsafe
from safetensors.torch import save as st_save
from streamlit.testing.v1 import AppTest

from dashboard.services.display.text import WORD_JOINER, html_literal, literal
from dashboard.services.model.roots import ROOTS_ENV
from dashboard.services.model.shards import write_sharded
from dashboard.services.session_files import KeptUpload
from dashboard.services.sources.choice import SourceKind

VIEWS = Path(__file__).resolve().parents[2] / "dashboard" / "views"

pytestmark = pytest.mark.slow

SYNTH = {"src": "synthetic", "dist": "normal", "rows": "16", "cols": "64", "dseed": "0"}
SCHEME = ("bits", "mode", "gran", "axis", "group", "fmt", "range", "pct", "round", "seed")
SCHEME += ("sdtype", "zp")
EXPLORER_KEYS = (*SCHEME, "algo", "damp", "actord", "calib", "qk", "rescale")
EXPLORER_KEYS += ("red", "bnd", "zr", "zc", "zs", "blk")
SOURCE_KEYS = ("src", "dist", "rows", "cols", "dseed", "ofrac", "omag", "ochan")
SWEEP_KEYS = tuple(f"sw.{k}" for k in ("bits", "modes", "gran", "groups", "fmt", "algo", "zp"))
SWEEP_KEYS += ("sw.range", "sw.sdtype", "sw.y", "sw.calib")
AB_KEYS = tuple(f"{side}{k}" for side in ("a.", "b.") for k in (*SCHEME, "algo", "damp"))
MODEL_KEYS = tuple(f"m.{k}" for k in (*SCHEME, "act", "ranges", "algo", "damp", "calib"))
MODEL_KEYS += tuple(f"m.a.{k}" for k in ("bits", "gran", "mode"))
LAYER_KEYS = ("l.layer", "l.preset", "l.ranges", "l.split", "l.alpha", "l.w.bits", "l.a.bits")
OTHER_SOURCES = (
    {"src": "example", "ex": HOSTILE},
    {"src": "model", "tensor": HOSTILE},
    {"src": "act", "layer": HOSTILE},
    {"src": "act", "sents": HOSTILE},
    {"src": "folder", "folder": HOSTILE, "tensor": "x"},
    {"src": "upload"},
)


SHORT = "![p](//127.0.0.1:9/p.png)"
"""The issue's link value: short enough for the scheme keys' 32-character limit."""


def _cases() -> list[tuple[str, dict[str, str]]]:
    cases: list[tuple[str, dict[str, str]]] = []
    pages = (("explorer", EXPLORER_KEYS), ("sweep", SWEEP_KEYS), ("ab", AB_KEYS))
    for value in (HOSTILE, SHORT):
        for page, keys in pages:
            cases += [(page, {**SYNTH, k: value}) for k in (*SOURCE_KEYS, *keys)]
        cases += [("model", {k: value}) for k in MODEL_KEYS]
        cases += [("layer", {k: value}) for k in LAYER_KEYS]
    for page, _ in pages:
        cases += [(page, dict(q)) for q in OTHER_SOURCES]
    return cases


def _id(case: tuple[str, dict[str, str]]) -> str:
    page, query = case
    keys = [k for k, v in query.items() if v in (HOSTILE, SHORT)] or [query.get("src", "")]
    short = "-short" if SHORT in query.values() else ""
    return f"{page}-{'-'.join(keys)}{short}"


def new_app(page: str, **query: str) -> AppTest:
    at = AppTest.from_file(str(VIEWS / f"{page}.py"), default_timeout=300)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def literal_on_page(at: AppTest, value: str = HOSTILE) -> None:
    """Nothing unsafe; and where the hostile ``value`` reached the page, it reads as typed
    (its image's address shown means the whole image syntax is)."""
    assert not at.exception, [e.value for e in at.exception]
    assert unsafe(at) == []
    image = value.split(" ", 1)[0]
    if shows(at, image[image.index("(") + 1 : -1]):
        assert shows(at, image)


def run_sweep(at: AppTest, page: str) -> None:
    """On the sweep page, run the default grid: the results name the tensor too."""
    if page == "sweep":
        at.button(key="sw_run").click().run()
        assert at.get("plotly_chart"), "the sweep drew no chart"


# --- the helper itself -------------------------------------------------------------------


def test_literal_escapes_every_markdown_construct() -> None:
    assert literal("![a](b)") == r"\!\[a\]\(b\)"
    assert literal("a_b*c`d`$x$ :red[x] <i>") == r"a\_b\*c\`d\`\$x\$ \:red\[x\] \<i\>"
    assert literal("line\nbreak") == "line break"
    assert literal("http://h/x") == rf"http{WORD_JOINER}\:\/\/h\/x"
    assert literal("WWW.x.org a@b.c") == rf"WWW{WORD_JOINER}\.x\.org a{WORD_JOINER}\@b\.c"
    assert literal("plain words 42") == "plain words 42"
    assert literal(3) == "3"


def test_html_literal_escapes_tags_and_quotes() -> None:
    assert html_literal("<a href='x'>&</a>") == "&lt;a href=&#x27;x&#x27;&gt;&amp;&lt;/a&gt;"


# --- link values on every page -----------------------------------------------------------


@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_link_values_are_shown_literally(
    case: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    page, query = case
    at = new_app(page, **query).run()
    literal_on_page(at, SHORT if SHORT in query.values() else HOSTILE)


# --- names from files and folders, typed sentences ----------------------------------------


WEIGHT = f"{HOSTILE}.weight"
"""A tensor name that is also a linear weight's (the whole-model page reports it)."""


def _weights(*names: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {n: torch.randn(32, 64, generator=g) for n in names}


@pytest.fixture
def hostile_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model folder named like an image, holding two weights named like one."""
    target = tmp_path / HOSTILE_NAME
    tensors = _weights(WEIGHT, "model.layers.0.mlp.up_proj.weight")
    write_sharded(target, [tensors], 1)
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    return target


@pytest.mark.parametrize("page", ["explorer", "sweep", "ab"])
def test_tensor_and_folder_names_from_a_model_folder(page: str, hostile_folder: Path) -> None:
    at = new_app(page).run()
    at.selectbox(key="src_kind").set_value(SourceKind.FOLDER).run()
    if at.selectbox(key="src_folder").value != str(hostile_folder.resolve()):
        at.selectbox(key="src_folder").set_value(str(hostile_folder.resolve())).run()
    at.selectbox(key="src_folder_tensor").set_value(WEIGHT).run()
    run_sweep(at, page)
    literal_on_page(at)
    assert shows(at, "![px](http://127.0.0.1:9/pixel.png)")  # the caption names it


@pytest.mark.parametrize("page", ["explorer", "sweep", "ab"])
def test_upload_and_tensor_names_from_an_uploaded_file(page: str) -> None:
    data = st_save(_weights(WEIGHT, "b.weight"))
    at = new_app(page)
    at.session_state["_uploaded_file"] = KeptUpload("id-hostile", f"{HOSTILE}.safetensors", data)
    at.run()
    at.selectbox(key="src_kind").set_value(SourceKind.UPLOAD).run()
    at.selectbox(key="src_upload_tensor").set_value(WEIGHT).run()
    run_sweep(at, page)
    literal_on_page(at)
    assert shows(at, "![px](http://127.0.0.1:9/pixel.png)")


def test_a_bad_upload_names_the_file_literally() -> None:
    at = new_app("explorer")
    bad = KeptUpload("id-bad", f"{HOSTILE}.npy", b"not a numpy file")
    at.session_state["_uploaded_file"] = bad
    at.run()
    at.selectbox(key="src_kind").set_value(SourceKind.UPLOAD).run()
    literal_on_page(at)


def test_whole_model_page_with_a_hostile_folder(hostile_folder: Path) -> None:
    at = new_app("model").run()
    at.radio(key="m_source").set_value("folder").run()
    if at.selectbox(key="m_folder").value != str(hostile_folder.resolve()):
        at.selectbox(key="m_folder").set_value(str(hostile_folder.resolve())).run()
    literal_on_page(at)


def test_whole_model_page_with_a_hostile_upload(tmp_path: Path) -> None:
    path = tmp_path / "upload.safetensors"
    path.write_bytes(st_save(_weights(WEIGHT, "b.weight")))
    at = new_app("model")
    at.session_state["_model_upload_path"] = ("digest", str(path), f"{HOSTILE}.safetensors")
    at.session_state["m_source"] = "upload"
    at.run()
    literal_on_page(at)
    assert shows(at, "![px](http://127.0.0.1:9/pixel.png)")


def test_typed_sentences_on_the_whole_model_page() -> None:
    at = new_app("model").run()
    at.text_area(key="m_sentences").input(f"{HOSTILE}\nA second plain sentence.").run()
    literal_on_page(at)


def test_typed_sentences_as_an_activation_source() -> None:
    at = new_app("explorer", src="act").run()
    at.checkbox(key="src_own").check().run()
    at.text_area(key="src_text").input(f"{HOSTILE}\nA second plain sentence.").run()
    literal_on_page(at)


def test_a_typed_folder_path_is_named_literally(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    at = new_app("explorer").run()
    at.selectbox(key="src_kind").set_value(SourceKind.FOLDER).run()
    at.text_input(key="src_folder_path").input(str(tmp_path / HOSTILE_NAME)).run()
    literal_on_page(at)
