"""AppTest: the whole-model page's "Model folder on this machine" source, offered only when
QLAB_MODEL_ROOTS (or the model_roots secret) names the folders that may be read."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
import torch
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.model.roots import ROOTS_ENV
from dashboard.services.model.shards import shard_name, write_sharded

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "model.py"

pytestmark = pytest.mark.slow


def _t(*shape: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


SHARDS = [
    {
        "model.embed_tokens.weight": _t(100, 128),
        "model.layers.0.self_attn.q_proj.weight": _t(128, 128, seed=1),
        "model.layers.0.input_layernorm.weight": _t(128, dtype=torch.float32),
    },
    {
        "model.layers.0.mlp.up_proj.weight": _t(256, 128, dtype=torch.float16, seed=2),
        "model.layers.0.mlp.down_proj.weight": _t(128, 256, dtype=torch.float32, seed=3),
    },
    {"lm_head.weight": _t(100, 128, seed=4)},
]
N_TENSORS, N_LINEAR = 6, 4


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_sharded(tmp_path / "org" / "tiny", SHARDS, len(SHARDS))
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    return tmp_path


def open_page() -> AppTest:
    st.cache_data.clear()
    return AppTest.from_file(str(PAGE), default_timeout=300).run()


def frame(at: AppTest, column: str):
    """The first table on the page with ``column`` (AppTest does not expose a frame's key):
    ``report`` is the folder listing's, ``ratio_vs_fp32`` the per-layer report's."""
    frames = [d.value for d in at.dataframe if column in d.value.columns]
    return frames[0] if frames else None


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def test_without_the_setting_the_folder_source_is_not_offered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ROOTS_ENV, raising=False)
    at = open_page()
    no_errors(at)
    assert at.radio(key="m_source").options == [
        "all-MiniLM-L6-v2 (bundled)",
        "Upload a .safetensors or .gguf model",
    ]
    assert any(ROOTS_ENV in c.value and "off" in plain(c.value) for c in at.sidebar.caption)


def test_a_sharded_folder_is_listed_and_reported_layer_by_layer(root: Path) -> None:
    at = open_page()
    at.radio(key="m_source").set_value("folder").run()
    no_errors(at)
    folder = str((root / "org" / "tiny").resolve())
    assert at.selectbox(key="m_folder").value == folder  # found under the root
    listing = frame(at, "report")
    assert len(listing) == N_TENSORS and listing["report"].sum() == N_LINEAR
    assert set(listing["shard"]) == {shard_name(i, 3) for i in (1, 2, 3)}
    assert set(listing["dtype"]) == {"bfloat16", "float16", "float32"}
    table = frame(at, "ratio_vs_fp32")
    assert len(table) == N_LINEAR
    assert (table["sqnr_db"] > 0).all() and "out_mse" not in table.columns
    # a rate in the unit that fits (this tiny folder: MB/s or kB/s), and elements/s
    assert any("B/s" in c.value and "elements/s" in plain(c.value) for c in at.caption)
    assert any("A model folder holds weights" in plain(i.value) for i in at.info)
    # The weights-only scheme picker: no activation presets for a folder.
    assert not [s for s in at.selectbox if s.key == "m_act"]
    # A scheme change reports again, under the new scheme.
    before = table.set_index("name")["sqnr_db"]
    at.slider(key="m_q_bits").set_value(8).run()
    no_errors(at)
    after = frame(at, "ratio_vs_fp32").set_index("name")["sqnr_db"]
    assert (after > before + 20).all()


def test_a_typed_path_outside_the_roots_is_refused(root: Path) -> None:
    at = open_page()
    at.radio(key="m_source").set_value("folder").run()
    at.selectbox(key="m_folder").set_value("").run()
    at.text_input(key="m_folder_path").input(f"{root}/../..").run()
    assert not at.exception
    (error,) = at.error
    assert "outside the allowed folders" in plain(error.value) and str(root) in plain(error.value)
    assert frame(at, "ratio_vs_fp32") is None


def test_a_broken_folder_says_what_is_wrong(root: Path) -> None:
    (root / "org" / "tiny" / shard_name(2, 3)).unlink()
    at = open_page()
    at.radio(key="m_source").set_value("folder").run()
    assert not at.exception
    (error,) = at.error
    assert shard_name(2, 3) in plain(error.value) and "does not hold" in plain(error.value)


def test_the_secret_turns_the_source_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ROOTS_ENV, raising=False)
    write_sharded(tmp_path / "m", SHARDS[:1], 1)
    at = AppTest.from_file(str(PAGE), default_timeout=300)
    at.secrets["model_roots"] = [str(tmp_path)]
    at.run()
    at.radio(key="m_source").set_value("folder").run()
    no_errors(at)
    assert len(frame(at, "ratio_vs_fp32")) == 1
