"""AppTest: defects of the quantized-file pages found by a user's hunt (defects5)."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import pytest
import torch
from markdown_text import plain
from quantized_app import EXPLORER, MODEL, new_app
from safetensors.torch import save_file

from dashboard.services.model.roots import ROOTS_ENV
from tests.core.quantized_files import GGML, write_gguf

pytestmark = pytest.mark.slow

UP = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A llama GGUF of one Q8_0 tensor, and originals: one of another shape, one whose
    names map back to nothing in the file."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    write_gguf(
        tmp_path / "up-Q8_0.gguf",
        {"blk.0.ffn_up.weight": (gguf.quants.quantize(UP.numpy(), GGML.Q8_0), GGML.Q8_0)},
        metadata={"llama.block_count": 1},
    )
    save_file({"model.layers.0.mlp.up_proj.weight": UP[:, :128].contiguous()},
              str(tmp_path / "narrow.safetensors"))  # fmt: skip
    save_file({"model.layers.0.mlp.down_proj.weight": UP.clone()},
              str(tmp_path / "other.safetensors"))  # fmt: skip
    return tmp_path


@pytest.mark.parametrize(
    ("original", "said"),
    [("narrow.safetensors", "error"), ("other.safetensors", "warning")],
    ids=["other-shape", "no-such-name"],
)
def test_an_original_not_compared_is_not_called_no_original(
    root: Path, original: str, said: str
) -> None:
    """An original given but not compared (its tensor of another shape, or none of the
    name) was said above ("Cannot compare: ... not the same weight", "holds no tensor
    named"), then the caption read "No original given: ... Give the original above", as
    if the path typed had been lost."""
    at = new_app(EXPLORER, src="folder", folder=str(root / "up-Q8_0.gguf")).run()
    at.radio(key="qf_orig").set_value("folder").run()
    at.text_input(key="qf_orig_path").set_value(str(root / original)).run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(getattr(at, said)) == 1, [plain(e.value) for e in getattr(at, said)]
    captions = [plain(c.value) for c in at.caption]
    assert not any("No original given" in c for c in captions), captions
    assert any(f"Not compared with {original} (said above)" in c for c in captions), captions


def test_the_whole_model_caption_writes_bits_as_the_explorer_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Q8_0 tensor (8.5 bits) and a Q4_0 one (4.5) of the same size: the caption read
    "6.500 bits per weight overall" where the explorer's metrics write 8.5 and 4.5."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    up = UP.numpy()
    write_gguf(
        tmp_path / "mix.gguf",
        {
            "blk.0.ffn_up.weight": (gguf.quants.quantize(up, GGML.Q8_0), GGML.Q8_0),
            "blk.0.ffn_down.weight": (gguf.quants.quantize(up, GGML.Q4_0), GGML.Q4_0),
        },
    )
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": str(tmp_path / "mix.gguf")}).run()
    assert not at.exception and not at.error
    (head,) = [plain(c.value) for c in at.caption if "bits per weight overall" in c.value]
    assert head.endswith(" · 6.5 bits per weight overall"), head


def test_a_tensor_that_does_not_decode_leaves_the_rest_of_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole model page showed "gptq: model.safetensors: weight '…down_proj.weight':
    g_idx names groups 100..107 …" above an empty report: the tensor after it was never
    measured. Now that tensor's row says why, and the other is compared."""
    from tests.services.test_files_defects5 import gptq_with_a_bad_tensor

    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    quantized, original = gptq_with_a_bad_tensor(tmp_path)
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": str(quantized)}).run()
    at.radio(key="qm_orig").set_value("folder").run()
    at.text_input(key="qm_orig_path").set_value(str(original)).run()
    assert not at.exception and not at.error, [plain(e.value) for e in at.error]
    (report,) = [d.value for d in at.dataframe if "note" in d.value.columns]
    notes = dict(zip(report["name"], report["note"], strict=True))
    assert "g_idx names groups 100..107" in notes["model.layers.0.mlp.down_proj.weight"]
    assert report.set_index("name").loc["model.layers.0.mlp.up_proj.weight", "mse"] == 0.0


def test_the_report_caption_counts_a_tensor_matched_but_not_compared(root: Path) -> None:
    """An original whose tensor of the name has another shape: the caption said "0 of 1
    tensor matched in narrow.safetensors" above a row naming that very tensor as its
    original, its note saying the shapes differ."""
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": str(root / "up-Q8_0.gguf")}).run()
    at.radio(key="qm_orig").set_value("folder").run()
    at.text_input(key="qm_orig_path").set_value(str(root / "narrow.safetensors")).run()
    assert not at.exception and not at.error
    (report,) = [d.value for d in at.dataframe if "note" in d.value.columns]
    assert list(report["original"]) == ["model.layers.0.mlp.up_proj.weight"]
    assert "not the same weight" in report["note"].iloc[0]
    captions = [plain(c.value) for c in at.caption]
    assert not any(" matched in " in c for c in captions), captions
    assert (
        "0 of 1 tensor compared with narrow.safetensors (1 more matched by name but not "
        "compared: see their notes); each read, decoded and compared one at a time."
    ) in captions, captions


def _formats(element) -> dict[str, str]:
    """Each configured column's number format, from the dataframe element's proto."""
    config = json.loads(element.proto.columns or "{}")
    return {
        name.removeprefix("col:"): fmt
        for name, col in config.items()
        if (fmt := (col.get("type_config") or {}).get("format")) is not None
    }


def test_the_whole_model_tables_write_counts_with_thousands_separators(root: Path) -> None:
    """The mix, the listing and the report wrote values and bytes as 16384 and 17408
    (a 7B model's bytes as 3825205248): Streamlit's default format has no separators."""
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": str(root / "up-Q8_0.gguf")}).run()
    at.radio(key="qm_orig").set_value("folder").run()
    at.text_input(key="qm_orig_path").set_value(str(root / "other.safetensors")).run()
    assert not at.exception and not at.error
    # the mix by its shares, the listing by its file column, the report by its notes
    tells = {"qm_mix": "share of bytes", "qm_listing": "file", "qm_report": "note"}
    by_key = {k: next(d for d in at.dataframe if c in d.value.columns) for k, c in tells.items()}
    assert _formats(by_key["qm_mix"]) == dict.fromkeys(("tensors", "values", "bytes"), "localized")
    assert _formats(by_key["qm_listing"]) == {"bytes": "localized"}
    report = _formats(by_key["qm_report"])
    assert report["bytes"] == "localized" and report["mse"] == "%.3g", report


def test_an_original_refused_is_not_called_no_original_given(root: Path) -> None:
    """ "Original refused: … does not exist" above, "No original given: … Give the original
    above" below."""
    at = new_app(EXPLORER, src="folder", folder=str(root / "up-Q8_0.gguf")).run()
    at.radio(key="qf_orig").set_value("folder").run()
    at.text_input(key="qf_orig_path").set_value(str(root / "nothing-here")).run()
    assert not at.exception
    (error,) = [plain(e.value) for e in at.error]
    assert error.startswith("Original refused: ") and "does not exist" in error, error
    captions = [plain(c.value) for c in at.caption]
    assert not any("No original given" in c for c in captions), captions
    assert any(c.startswith("No original read: the 'original' map") for c in captions)
    # back to "No original": given is true again
    at.radio(key="qf_orig").set_value("none").run()
    assert any(plain(c.value).startswith("No original given: ") for c in at.caption)


def test_the_whole_model_upload_offers_gguf_as_its_uploader_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The source read "Upload a .safetensors model" and its hint "Upload a .safetensors
    file", while the uploader takes a quantized .gguf (the issue's files) as well."""
    monkeypatch.delenv(ROOTS_ENV, raising=False)
    at = new_app(MODEL).run()
    at.radio(key="m_source").set_value("upload").run()
    assert not at.exception and not at.error
    options = at.radio(key="m_source").options
    assert "Upload a .safetensors or .gguf model" in options, options
    hints = [plain(i.value) for i in at.info]
    assert any(".gguf" in h and h.startswith("Upload a .safetensors file") for h in hints), hints


def test_the_pickers_label_writes_the_files_size_as_the_whole_model_page(root: Path) -> None:
    """The picker's label said "Tensor (1 in GGUF (llama.cpp), 17,408 bytes)" (a 7B
    model's "4,368,439,584 bytes") where the whole model page says "17.4 kB"."""
    path = str(root / "up-Q8_0.gguf")
    at = new_app(EXPLORER, src="folder", folder=path).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="src_folder_tensor").label == "Tensor (1 in GGUF (llama.cpp), 17.4 kB)"
    at = new_app(MODEL, **{"m.src": "folder", "m.folder": path}).run()
    (head,) = [plain(c.value) for c in at.caption if "GGUF (llama.cpp) ·" in c.value]
    assert " · 17.4 kB · " in head, head
