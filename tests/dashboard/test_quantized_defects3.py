"""AppTest: defects of the quantized-file pages found by a user's hunt (defects3)."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest
import torch
from markdown_text import plain
from quantized_app import EXPLORER, MODEL, new_app, no_errors

from dashboard.services.model.roots import ROOTS_ENV
from tests.core.quantized_files import GGML, write_gguf

pytestmark = pytest.mark.slow


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


@pytest.fixture
def two_quantized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The same weight as Q8_0 and as Q4_0, in two GGUF files inside the roots."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    up = torch.randn(64, 256, generator=torch.Generator().manual_seed(0)).numpy()
    for qtype in (GGML.Q8_0, GGML.Q4_0):
        write_gguf(tmp_path / f"w-{qtype.name}.gguf",
                   {"blk.0.ffn_up.weight": (gguf.quants.quantize(up, qtype), qtype)})  # fmt: skip
    return tmp_path


def test_a_quantized_original_is_said_to_be_no_float_reference(two_quantized: Path) -> None:
    """A Q8_0 file picked as the original of a Q4_0 one was taken as the float weights:
    the errors were against another quantization's values, and nothing said so."""
    q4, q8 = str(two_quantized / "w-Q4_0.gguf"), str(two_quantized / "w-Q8_0.gguf")
    said = "the original's blk.0.ffn_up.weight is itself quantized (Q8_0)"
    at = new_app(EXPLORER, src="folder", folder=q4, tensor="blk.0.ffn_up.weight").run()
    at.radio(key="qf_orig").set_value("folder").run()
    at.text_input(key="qf_orig_path").set_value(q8).run()
    no_errors(at)
    warnings = [plain(w.value) for w in at.warning]
    assert any(w.startswith("T" + said[1:]) for w in warnings), warnings
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": q4}).run()
    at.radio(key="qm_orig").set_value("folder").run()
    at.text_input(key="qm_orig_path").set_value(q8).run()
    no_errors(at)
    report = next(d.value for d in at.dataframe if "original" in d.value.columns)
    assert list(report["note"]) == [said + ": the errors are against its dequantized values, "
                                    "not the float weights"]  # fmt: skip
    assert report["mse"].iloc[0] > 0
