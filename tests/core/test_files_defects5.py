"""Defects of the quantized-file reader found by a user's hunt (defects5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from quant_core.files import compare_with_original, open_quantized
from tests.core.quantized_files import pack_gptq, prefixed, random_int_layer, write_folder

_GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False}


@pytest.mark.parametrize(
    ("stored", "original"),
    [
        ("model.layers.0.mlp.up_proj", "layers.0.mlp.up_proj"),
        ("layers.0.mlp.up_proj", "model.layers.0.mlp.up_proj"),
    ],
    ids=["file-has-model-prefix", "original-has-model-prefix"],
)
def test_an_original_whose_names_differ_by_the_model_prefix_is_matched(
    tmp_path: Path, stored: str, original: str
) -> None:
    """A GPTQ folder names ``model.layers.0.mlp.up_proj.weight``, a checkpoint saved from
    the inner model ``layers.0.mlp.up_proj.weight`` (or the other way round): the explorer
    said "The original holds no tensor named …" and the whole model report matched none."""
    # zero points from 1: GPTQ v1 stores zero - 1, and a zero of 0 wraps to 15
    layer = random_int_layer(np.random.default_rng(0), 64, 256, 4, 32, zero_lo=1)
    qfile = open_quantized(
        write_folder(tmp_path / "q", prefixed(stored, pack_gptq(layer, 4, True)), _GPTQ)
    )
    path = tmp_path / "orig.safetensors"
    save_file({f"{original}.weight": layer.dequantize().contiguous()}, str(path))
    ofile = open_quantized(path)
    (entry,) = qfile.tensors
    names = {t.name for t in ofile.tensors}
    assert qfile.original_name(entry.name, names) == f"{original}.weight"
    # the exact name still wins over the prefixed one
    assert qfile.original_name(entry.name, {*names, entry.name}) == entry.name
    cmp = compare_with_original(
        qfile.load(entry.name), ofile.load(f"{original}.weight").dequantize(), original,
        qfile.metadata,
    )  # fmt: skip
    assert cmp.file_metrics.mse == 0.0  # the original is the layer's exact dequantization
    assert torch.isinf(torch.tensor(cmp.file_metrics.sqnr_db))


def test_a_name_of_another_layer_is_not_matched(tmp_path: Path) -> None:
    layer = random_int_layer(np.random.default_rng(0), 64, 256, 4, 32, zero_lo=1)
    parts = prefixed("model.layers.0.mlp.up_proj", pack_gptq(layer, 4, True))
    qfile = open_quantized(write_folder(tmp_path / "q", parts, _GPTQ))
    (entry,) = qfile.tensors
    others = {"layers.1.mlp.up_proj.weight", "model.model.layers.0.mlp.up_proj.weight"}
    assert qfile.original_name(entry.name, others) is None
