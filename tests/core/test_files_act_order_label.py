"""The act-order label of a GPTQ or compressed-tensors weight follows its stored ``g_idx``,
as decoding does: a config whose ``desc_act`` disagrees with the ``g_idx`` (GPTQ's static
groups keep act-order's groups as runs of consecutive columns), and a compressed-tensors
``g_idx`` in plain order, are labelled by what is stored."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from quantized_files import (
    pack_compressed,
    pack_gptq,
    prefixed,
    random_int_layer,
    random_signed_layer,
    write_folder,
)

from quant_core.files import open_quantized

MODULE = "model.layers.0.self_attn.q_proj"
OUT_F, IN_F, GROUP = 32, 128, 32


def _gptq_folder(path, desc_act: bool, permuted: bool) -> None:
    layer = random_int_layer(np.random.default_rng(3), OUT_F, IN_F, 4, GROUP, permuted)
    config = {
        "quant_method": "gptq",
        "bits": 4,
        "group_size": GROUP,
        "desc_act": desc_act,
        "sym": False,
        "checkpoint_format": "gptq_v2",
    }
    write_folder(path, prefixed(MODULE, pack_gptq(layer, 4, v1=False)), config)


@pytest.mark.parametrize(
    ("desc_act", "permuted"), [(True, False), (False, True), (True, True), (False, False)]
)
def test_gptq_label_follows_the_stored_g_idx(tmp_path, desc_act, permuted):
    _gptq_folder(tmp_path, desc_act, permuted)
    f = open_quantized(tmp_path)
    name = MODULE + ".weight"
    assert f.entry(name).type_name == f"GPTQ int4 g{GROUP}" + (" act-order" if permuted else "")
    assert (f.load(name).column_order is not None) == permuted


def _ct_folder(path, g_idx: np.ndarray | None) -> None:
    layer = random_signed_layer(np.random.default_rng(5), OUT_F, IN_F, 4, GROUP, True)
    layer = dataclasses.replace(layer, g_idx=g_idx)
    weights = {
        "num_bits": 4,
        "type": "int",
        "symmetric": True,
        "strategy": "group",
        "group_size": GROUP,
        "actorder": "group",
    }
    config = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
    }
    write_folder(path, prefixed(MODULE, pack_compressed(layer, 4)), config)


def test_compressed_tensors_plain_g_idx_is_not_act_order(tmp_path):
    _ct_folder(tmp_path, (np.arange(IN_F) // GROUP).astype(np.int32))
    f = open_quantized(tmp_path)
    name = MODULE + ".weight"
    assert f.entry(name).type_name == "CT int4 g32 sym"
    assert f.load(name).column_order is None


def test_compressed_tensors_permuted_g_idx_is_act_order(tmp_path):
    g_idx = np.empty(IN_F, dtype=np.int32)
    g_idx[np.random.default_rng(8).permutation(IN_F)] = np.arange(IN_F) // GROUP
    _ct_folder(tmp_path, g_idx)
    f = open_quantized(tmp_path)
    name = MODULE + ".weight"
    assert f.entry(name).type_name == "CT int4 g32 sym act-order"
    loaded = f.load(name)
    assert loaded.column_order is not None
    assert torch.equal(loaded.column_order, torch.from_numpy(np.argsort(g_idx, kind="stable")))
