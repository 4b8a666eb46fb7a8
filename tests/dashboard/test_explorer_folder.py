"""AppTest: the explorer's "Model folder on this machine" source: offered only where
QLAB_MODEL_ROOTS names allowed roots; lists a sharded folder's tensors from their headers,
reads the picked one alone (bf16 as stored, widened exactly), and travels in the URL."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from markdown_text import plain
from quantized_app import EXPLORER, no_errors
from quantized_app import new_app as open_page
from streamlit.testing.v1 import AppTest
from value_helpers import decode

from dashboard.services.model.roots import ROOTS_ENV
from dashboard.services.model.shards import write_sharded
from dashboard.services.sources.choice import FolderSource, SourceKind
from dashboard.services.state.source import source_from_query, source_to_query

APP = EXPLORER

pytestmark = pytest.mark.slow


def _t(*shape: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


UP = _t(96, 64, seed=2)
SHARDS = [
    {"model.embed_tokens.weight": _t(50, 64), "model.norm.weight": _t(64)},
    {"model.layers.0.mlp.up_proj.weight": UP, "lm_head.weight": _t(50, 64, seed=4)},
]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    target = tmp_path / "org" / "tiny"
    write_sharded(target, SHARDS, len(SHARDS))
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    return target


def new_app(**query: str) -> AppTest:
    return open_page(APP, **query)


def test_not_offered_without_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ROOTS_ENV, raising=False)
    at = new_app().run()
    no_errors(at)
    assert "Model folder on this machine" not in at.selectbox(key="src_kind").options


def test_a_link_to_a_folder_without_the_setting_warns_and_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ROOTS_ENV, raising=False)
    at = new_app(src="folder", folder="/etc", tensor="x.weight").run()
    assert not at.exception
    assert any("does not allow reading model folders" in plain(w.value) for w in at.warning)
    assert at.selectbox(key="src_kind").value is SourceKind.SYNTHETIC


def test_a_folder_tensor_is_explored_exactly(folder: Path) -> None:
    at = new_app().run()
    at.selectbox(key="src_kind").set_value(SourceKind.FOLDER).run()
    no_errors(at)
    assert at.selectbox(key="src_folder").value == str(folder.resolve())
    tensors = at.selectbox(key="src_folder_tensor")
    assert tensors.value == "lm_head.weight"  # the first linear weight, in checkpoint order
    assert len(tensors.options) == 4
    tensors.set_value("model.layers.0.mlp.up_proj.weight").run()
    no_errors(at)
    captions = " ".join(plain(c.value) for c in at.caption)
    assert "tiny · model.layers.0.mlp.up_proj.weight" in captions and "[96, 64]" in captions
    # the shown matrix is the stored bf16 tensor widened exactly: its extremes are in the
    # original heatmap's hover data (a small tensor: every cell's value)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    z = decode(spec["data"][0]["z"])
    assert np.array_equal(z, UP.double().numpy())
    # the URL carries the folder and the tensor
    assert at.query_params["src"] == "folder"
    assert at.query_params["tensor"] == "model.layers.0.mlp.up_proj.weight"


def test_a_link_outside_the_roots_is_refused_and_the_page_keeps_working(folder: Path) -> None:
    at = new_app(src="folder", folder="/etc", tensor="passwd").run()
    assert not at.exception
    assert any("outside" in e.value or "refused" in plain(e.value) for e in at.error), [
        plain(e.value) for e in at.error
    ]


def test_an_unknown_tensor_in_a_link_warns_and_shows_the_first_weight(folder: Path) -> None:
    at = new_app(src="folder", folder=str(folder), tensor="no.such.weight").run()
    assert not at.exception and not at.error, [plain(e.value) for e in at.error]
    assert any("no.such.weight" in plain(w.value) for w in at.warning)
    assert at.selectbox(key="src_folder_tensor").value == "lm_head.weight"


def test_folder_choice_round_trips_through_the_url() -> None:
    choice = FolderSource("/models/org/tiny", "model.layers.0.mlp.up_proj.weight")
    assert source_from_query(source_to_query(choice), choice) == choice
    with pytest.raises(ValueError, match="folder"):
        source_from_query({"src": "folder", "folder": "a\x00b", "tensor": "x"}, choice)
    with pytest.raises(ValueError, match="tensor"):
        source_from_query({"src": "folder", "folder": "/m", "tensor": "a b"}, choice)
