"""Defects of the quantized-file reader found by a user's hunt (defects6)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save, save_file

from quant_core import Mode, PerGroup, QuantConfig, quantize
from quant_core.files import QuantizedFileError, open_quantized, open_quantized_bytes
from quant_core.files.lab_export import (
    EXPORT_VERSION,
    MAX_TENSOR_NAME,
    TENSOR_KEY,
    config_to_json,
    export_tensors,
)
from tests.core.quantized_files import pack_gptq, prefixed, random_int_layer

NAME = "model.layers.0.mlp.up_proj.weight"
CFG = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(8))
QT = quantize(torch.randn(8, 32, generator=torch.Generator().manual_seed(4)), CFG)


def _export(path: Path, **extra: str) -> Path:
    """The lab's export of ``QT`` with the metadata the explorer writes, plus ``extra``."""
    tensors, layout = export_tensors(QT)
    meta = {
        "shape": json.dumps(list(QT.shape)),
        "format": CFG.format.value,
        "bits": str(CFG.bits),
        "mode": CFG.mode.value,
        "granularity": json.dumps({"kind": "PerGroup", "group_size": 8}),
        "zero_point_convention": CFG.zero_point.value,
        "scale_dtype": CFG.scale_dtype.value,
        "config": config_to_json(CFG),
        "export_version": EXPORT_VERSION,
        **layout,
        **extra,
    }
    save_file(tensors, str(path), metadata=meta)
    return path


def test_an_export_naming_its_tensor_is_matched_with_the_original_by_it(tmp_path: Path) -> None:
    """The export was named by its file's stem alone: never a name the original holds."""
    qfile = open_quantized(_export(tmp_path / "quantized.safetensors", **{TENSOR_KEY: NAME}))
    (entry,) = qfile.tensors
    assert entry.name == NAME
    assert qfile.original_name(NAME, {NAME, "model.norm.weight"}) == NAME
    assert torch.equal(qfile.load(NAME).quantized.codes, QT.codes)  # the same tensor


def test_an_older_export_without_the_name_still_opens_by_its_file(tmp_path: Path) -> None:
    qfile = open_quantized(_export(tmp_path / "up.safetensors"))
    assert [t.name for t in qfile.tensors] == ["up"]
    assert torch.equal(qfile.load("up").dequantize(), QT.dequantize())


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "is empty"),
        ("  ", "is empty"),
        ("x" * (MAX_TENSOR_NAME + 1), f"is {MAX_TENSOR_NAME + 1:,} characters long"),
        ("a\nb", "holds a control character"),
    ],
    ids=["empty", "blank", "too-long", "newline"],
)
def test_a_bad_recorded_name_is_a_clear_error(tmp_path: Path, name: str, problem: str) -> None:
    path = _export(tmp_path / "bad.safetensors", **{TENSOR_KEY: name})
    with pytest.raises(QuantizedFileError) as e:
        open_quantized(path)
    assert str(e.value).startswith("bad.safetensors: its metadata's tensor name "), e.value
    assert problem in str(e.value)


@pytest.mark.parametrize(
    ("act_order", "type_name"),
    [(True, "GPTQ int4 g32 act-order"), (False, "GPTQ int4 g32")],
    ids=["act-order", "static"],
)
def test_a_gptq_upload_without_a_config_is_labelled_by_its_g_idx(
    act_order: bool, type_name: str
) -> None:
    """An uploaded GPTQ file has no config.json to say desc_act: its act-order tensor was
    labelled "GPTQ int4 g32" while its note said act-order. The g_idx says which."""
    layer = random_int_layer(np.random.default_rng(3), 32, 128, 4, 32, act_order, zero_lo=1)
    tensors = prefixed("model.layers.0.mlp.up_proj", pack_gptq(layer, 4, v1=True))
    data = save({k: v.contiguous() for k, v in tensors.items()})
    qfile = open_quantized_bytes(data, "model.safetensors")
    (entry,) = qfile.tensors
    assert entry.type_name == type_name
    stored = qfile.load(entry.name)
    assert (stored.column_order is not None) is act_order
    assert any("act-order" in n for n in stored.notes) is act_order
    assert torch.equal(stored.dequantize(), layer.dequantize())
