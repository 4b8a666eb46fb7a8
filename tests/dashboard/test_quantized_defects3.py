"""AppTest: defects of the quantized-file pages found by a user's hunt (defects3)."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest
import streamlit as st
import torch
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.model.roots import ROOTS_ENV
from tests.core.quantized_files import GGML, write_gguf

VIEWS = Path(__file__).resolve().parents[2] / "dashboard" / "views"
MODEL = str(VIEWS / "model.py")

pytestmark = pytest.mark.slow


def new_app(path: str, **query: str) -> AppTest:
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(path, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


@pytest.fixture
def one_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GGUF of one Q8_0 tensor, inside the roots."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    up = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    path = tmp_path / "one-Q8_0.gguf"
    write_gguf(path, {"blk.0.ffn_up.weight": (gguf.quants.quantize(up.numpy(), GGML.Q8_0),
                                              GGML.Q8_0)})  # fmt: skip
    return path


def test_a_file_of_one_tensor_says_one_tensor(one_tensor: Path) -> None:
    """The whole model page's caption read "1 tensors (1 quantized)"."""
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": str(one_tensor)}).run()
    no_errors(at)
    captions = [plain(c.value) for c in at.caption]
    (head,) = [c for c in captions if "GGUF (llama.cpp)" in c]
    assert "· 1 tensor (1 quantized) ·" in head, head
    assert not any("1 tensors" in c for c in captions), captions


def test_a_file_of_no_tensors_says_so_instead_of_an_empty_report(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:  # fmt: skip
    """A GGUF holding no tensor: "0 tensors (0 quantized) · 0 B · 0.000 bits per weight
    overall" above an empty mix table and chart."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    write_gguf(tmp_path / "none.gguf", {})
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": str(tmp_path / "none.gguf")}).run()
    assert not at.exception and not at.error
    assert [plain(w.value) for w in at.warning] == [
        "none.gguf lists no tensors: there is nothing to report."
    ]
    assert not at.dataframe and not at.get("plotly_chart")
    assert not any("bits per weight overall" in plain(c.value) for c in at.caption)
