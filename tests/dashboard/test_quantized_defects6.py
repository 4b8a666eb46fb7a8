"""AppTest: defects of the quantized-file pages found by a user's hunt (defects6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from markdown_text import plain
from quantized_app import EXPLORER, new_app, no_errors
from safetensors.torch import save_file

from dashboard.services.display.options import OPTION_CHARS
from dashboard.services.model.roots import ROOTS_ENV
from quant_core.files import compare_with_original, open_quantized, open_quantized_bytes
from tests.core.quantized_files import (
    SignedLayer,
    bnb_state_dict,
    pack_compressed,
    pack_gptq,
    prefixed,
    random_int_layer,
    write_folder,
)

pytestmark = pytest.mark.slow

MODULE = "model.layers.0.mlp.up_proj"
UP = torch.randn(16, 128, generator=torch.Generator().manual_seed(6))
BNB_FP4 = {  # transformers' config.json of a model loaded in 4 bits
    "quant_method": "bitsandbytes",
    "load_in_4bit": True,
    "bnb_4bit_quant_type": "fp4",
    "bnb_4bit_use_double_quant": True,
}


def test_bitsandbytes_fp4_is_compared_with_its_original_in_the_explorer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bitsandbytes FP4 was a type the lab did not decode: its values went to the ordinary
    explorer, whose comparison had metrics only (no error map, no round-to-nearest). It now
    decodes to the lab's FP4_BNB (here under double quantization): the file's view with its
    codes, the error maps of the file and of the lab's round-to-nearest of the original
    side by side, and both rows of metrics (the same codes: the same error)."""
    import json

    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    quantized = write_folder(tmp_path / "fp4", bnb_state_dict(UP, MODULE, "fp4"), BNB_FP4)
    save_file({f"{MODULE}.weight": UP.clone()}, str(tmp_path / "orig.safetensors"))
    at = new_app(EXPLORER, src="folder", folder=str(quantized)).run()
    no_errors(at)
    assert {m.label: m.value for m in at.metric}["Stored type"] == "bnb FP4 b64 + DQ"
    at.radio(key="qf_orig").set_value("folder").run()
    at.text_input(key="qf_orig_path").set_value(str(tmp_path / "orig.safetensors")).run()
    no_errors(at)
    table = next(d.value for d in at.dataframe if "quantization" in d.value.columns)
    qfile = open_quantized(quantized)
    want = compare_with_original(qfile.load(f"{MODULE}.weight"), UP, f"{MODULE}.weight")
    assert want.rtn_metrics is not None
    rows = table.to_dict("records")
    assert [r["quantization"] for r in rows] == [
        "the file (bnb FP4 b64 + DQ)",
        "the lab's round-to-nearest, same format",
    ], rows
    assert rows[0]["mse"] == pytest.approx(want.file_metrics.mse, rel=1e-6) and rows[0]["mse"] > 0
    assert rows[0]["mse"] == rows[1]["mse"]  # bitsandbytes' codes are the lab's
    headers = [h.value for h in at.subheader]
    assert "The file against the lab's round-to-nearest of the original" in headers, headers
    assert "What the file stores" in headers, headers
    titles = [
        json.loads(c.proto.spec).get("layout", {}).get("title", {}).get("text", "")
        for c in at.get("plotly_chart")
    ]
    assert any("Error of the file (bnb FP4 b64 + DQ)" in t for t in titles), titles
    assert any("Error of the lab's round-to-nearest" in t for t in titles), titles
    captions = [plain(c.value) for c in at.caption]
    assert not any("the lab does not model" in c for c in captions), captions
    assert any("As the lab models it" in c for c in captions), captions


def test_a_gptq_act_order_tensors_option_carries_its_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "GPTQ int4 g128 act-order" is too long to leave the name its 12 characters in the
    sidebar's 30: the option showed the name alone, while the caption under the box named
    the type. Now the option carries it compacted, the name still readable."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    layer = random_int_layer(np.random.default_rng(0), 32, 256, 4, 128, act_order=True)
    config = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True}
    folder = write_folder(tmp_path / "gptq", prefixed(MODULE, pack_gptq(layer, 4, v1=True)), config)
    at = new_app(EXPLORER, src="folder", folder=str(folder)).run()
    no_errors(at)
    (option,) = at.selectbox(key="src_folder_tensor").options
    # the name shortened as every tag leaves it (an AWQ "int4 g128" reads the same)
    assert option.endswith("…oj.weight  int4 g128 act"), option
    assert len(option) <= OPTION_CHARS
    captions = [plain(c.value) for c in at.sidebar.caption]
    assert f"{MODULE}.weight · GPTQ int4 g128 act-order · [32, 256] · 5.3 kB" in captions, captions


def _ct_asymmetric(folder: Path) -> Path:
    """A compressed-tensors int4 asymmetric (zero points) g32 folder whose blocks use codes
    q - z within -3..3: its stored scales are not the min-max rule's (which would spread
    each block over 15 steps)."""
    rng = np.random.default_rng(5)
    q = rng.integers(-2, 3, size=(16, 64)).astype(np.int8)
    zp = rng.integers(-1, 2, size=(16, 2)).astype(np.int8)
    zp[0, 0] = 1  # asymmetric for sure
    scale = torch.from_numpy(rng.uniform(0.005, 0.02, size=(16, 2)).astype(np.float32))
    layer = SignedLayer(q, zp, scale.to(torch.bfloat16), None)
    weights = {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "group"}
    config = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "group_0": {"targets": ["Linear"], "weights": weights | {"group_size": 32}}
        },
    }
    return write_folder(folder, prefixed(MODULE, pack_compressed(layer, 4)), config)


def test_the_teaching_note_of_an_asymmetric_file_gives_the_asymmetric_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compressed-tensors file with zero points: its block's note explained the stored
    scale by "llm-compressor's symmetric int4 divides max|r| by 8", a symmetric rule (and
    compressed-tensors divides by 7.5 at that), not how an asymmetric scale is made."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    at = new_app(EXPLORER, src="folder", folder=str(_ct_asymmetric(tmp_path / "ct"))).run()
    no_errors(at)
    (note,) = [plain(i.value) for i in at.info if "is the one stored" in i.value]
    assert "symmetric int4 divides max|r| by 8" not in note, note
    assert (
        "(llm-compressor's asymmetric rule widens the range to contain 0, s = "
        "(max(rmax, 0) − min(rmin, 0)) / 15, and rounds z;"
    ) in note, note


def test_the_explorers_export_records_the_tensors_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export of a checkpoint's tensor recorded no name: reopened, it was named after
    its file and matched no original. The download now carries the tensor's name."""
    from dashboard import cache

    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    name = f"{MODULE}.weight"
    save_file({name: UP.clone()}, str(tmp_path / "model.safetensors"))
    built = []
    build = cache.download_files

    def recorded(key, exp, tensor_name=None):  # the bytes the download button serves
        files = build(key, exp, tensor_name)
        built.append(files.safetensors)
        return files

    monkeypatch.setattr(cache, "download_files", recorded)
    at = new_app(EXPLORER, src="folder", folder=str(tmp_path / "model.safetensors"), tensor=name)
    at.run().button(key="dl_prepare").click().run()
    no_errors(at)
    (data,) = built
    (entry,) = open_quantized_bytes(data, "quantized_int4.safetensors").tensors
    assert entry.name == name
