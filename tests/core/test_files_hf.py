"""Hugging Face quantized folders packed by the projects' own layouts (``quantized_files``)
decode back bit for bit: GPTQ (v1 and v2 zero points, act-order), AWQ's interleaved GEMM
packing, compressed-tensors pack-quantized, and bitsandbytes 4-bit as the real
``bitsandbytes`` writes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from quantized_files import (
    bnb_state_dict,
    pack_awq,
    pack_compressed,
    pack_gptq,
    prefixed,
    random_int_layer,
    random_signed_layer,
    write_folder,
)

from quant_core import Format, Mode, PerChannel, PerGroup, QuantConfig, ScaleDtype, quantize
from quant_core.config import DoubleQuantScales
from quant_core.files import FileKind, QuantizedFileError, compare_with_original, open_quantized

MODULE = "model.layers.0.mlp.down_proj"


def _gptq_config(bits: int, group: int, desc_act: bool, v1: bool, sym: bool = False) -> dict:
    return {
        "quant_method": "gptq",
        "bits": bits,
        "group_size": group,
        "desc_act": desc_act,
        "sym": sym,
        "checkpoint_format": "gptq" if v1 else "gptq_v2",
    }


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("v1", [True, False], ids=["v1", "v2"])
@pytest.mark.parametrize("act_order", [False, True], ids=["static", "act-order"])
def test_gptq_decodes_bit_for_bit(tmp_path, bits, v1, act_order):
    rng = np.random.default_rng(bits * 10 + v1)
    out_f, in_f, group = 64, 128, 32
    # v1 cannot store a zero point of 0 (zeros - 1 = -1 overflows into the next field)
    layer = random_int_layer(rng, out_f, in_f, bits, group, act_order, zero_lo=1 if v1 else 0)
    tensors = prefixed(MODULE, pack_gptq(layer, bits, v1))
    tensors["model.norm.weight"] = torch.ones(in_f, dtype=torch.float16)
    write_folder(tmp_path, tensors, _gptq_config(bits, group, act_order, v1))
    f = open_quantized(tmp_path)
    assert f.kind is FileKind.GPTQ
    entry = f.entry(MODULE + ".weight")
    assert entry.shape == (out_f, in_f)
    assert entry.type_name == f"GPTQ int{bits} g{group}" + (" act-order" if act_order else "")
    assert entry.nbytes == sum(
        t.numel() * t.element_size() for k, t in tensors.items() if k.startswith(MODULE)
    )
    st = f.load(MODULE + ".weight")
    qt = st.quantized
    assert qt is not None
    assert qt.config == QuantConfig(
        bits=bits, mode=Mode.ASYMMETRIC, granularity=PerGroup(group), scale_dtype=ScaleDtype.FP16
    )
    half = 1 << (bits - 1)
    order = np.argsort(layer.g_idx, kind="stable")
    assert (st.column_order is not None) == act_order
    if act_order:
        assert np.array_equal(st.column_order.numpy(), order)
    codes = layer.intweight[:, order] - half
    assert np.array_equal(qt.codes.numpy(), codes)
    assert np.array_equal(qt.zero_point.numpy(), layer.zeros.T - half)
    assert np.array_equal(qt.scale.numpy(), layer.scales.T.astype(np.float32))
    expect = layer.dequantize()
    assert torch.equal(st.dequantize(), expect)
    # what AutoGPTQ's torch path computes in fp16: scales * (weight - zeros)
    assert torch.equal(st.dequantize().half(), expect.half())
    norm = f.load("model.norm.weight")
    assert norm.quantized is None and norm.type_name == "F16"


def test_gptq_symmetric_and_per_channel(tmp_path):
    rng = np.random.default_rng(1)
    layer = random_int_layer(rng, 32, 64, 4, 64)
    sym = type(layer)(layer.intweight, np.full_like(layer.zeros, 8), layer.scales, layer.g_idx)
    write_folder(
        tmp_path,
        prefixed(MODULE, pack_gptq(sym, 4, v1=True)),
        _gptq_config(4, -1, False, True, sym=True),
    )
    st = open_quantized(tmp_path).load(MODULE + ".weight")
    assert st.quantized.config == QuantConfig(
        bits=4, mode=Mode.SYMMETRIC, granularity=PerChannel(0), scale_dtype=ScaleDtype.FP16
    )
    assert st.type_name == "GPTQ int4 per-channel"
    assert torch.equal(st.dequantize(), sym.dequantize())


def test_sharded_gptq_folder_with_a_layer_across_shards(tmp_path):
    rng = np.random.default_rng(2)
    tensors = {}
    layers = {}
    for i in range(4):
        layers[i] = random_int_layer(rng, 32, 64, 4, 32)
        tensors.update(prefixed(f"model.layers.{i}.mlp.up_proj", pack_gptq(layers[i], 4, v1=False)))
    write_folder(tmp_path, tensors, _gptq_config(4, 32, False, v1=False), shards=3)
    f = open_quantized(tmp_path)
    files = {f.entry(f"model.layers.{i}.mlp.up_proj.weight").file for i in range(4)}
    assert len(files) > 1 and len(f.tensors) == 4
    for i in range(4):
        st = f.load(f"model.layers.{i}.mlp.up_proj.weight")
        assert torch.equal(st.dequantize(), layers[i].dequantize())


def test_awq_gemm_interleaved_packing(tmp_path):
    rng = np.random.default_rng(3)
    layer = random_int_layer(rng, 64, 128, 4, 64)
    config = {
        "quant_method": "awq",
        "bits": 4,
        "group_size": 64,
        "zero_point": True,
        "version": "gemm",
    }
    write_folder(tmp_path, prefixed(MODULE, pack_awq(layer)), config)
    f = open_quantized(tmp_path)
    assert f.kind is FileKind.AWQ
    st = f.load(MODULE + ".weight")
    assert st.type_name == "AWQ int4 g64"
    assert np.array_equal(st.quantized.codes.numpy(), layer.intweight - 8)
    assert np.array_equal(st.quantized.zero_point.numpy(), layer.zeros.T - 8)
    assert torch.equal(st.dequantize(), layer.dequantize())


def test_awq_read_without_interleaving_would_differ(tmp_path):
    """The order matters: a plain (non-interleaved) unpack of the same words gives other
    columns, so the test above can fail."""
    from quant_core.files.int32_packing import unpack_int32

    rng = np.random.default_rng(4)
    layer = random_int_layer(rng, 16, 32, 4, 32)
    packed = pack_awq(layer)["qweight"]
    assert np.array_equal(
        unpack_int32(packed, 4, dim=1, interleaved=True).numpy(), layer.intweight.T
    )
    assert not np.array_equal(unpack_int32(packed, 4, dim=1).numpy(), layer.intweight.T)


def _ct_config(
    bits: int, symmetric: bool, strategy: str, group: int | None, actorder: bool
) -> dict:
    weights = {"num_bits": bits, "type": "int", "symmetric": symmetric, "strategy": strategy}
    if group is not None:
        weights["group_size"] = group
    if actorder:
        weights["actorder"] = "group"
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        "ignore": ["lm_head"],
    }


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("act_order", [False, True], ids=["static", "act-order"])
def test_compressed_tensors_pack_quantized(tmp_path, bits, symmetric, act_order):
    rng = np.random.default_rng(bits + 2 * symmetric)
    out_f, in_f, group = 24, 100, 20  # rows not a multiple of the pack factor: padding
    layer = random_signed_layer(rng, out_f, in_f, bits, group, symmetric, act_order)
    write_folder(
        tmp_path,
        prefixed(MODULE, pack_compressed(layer, bits)),
        _ct_config(bits, symmetric, "group", group, act_order),
    )
    f = open_quantized(tmp_path)
    assert f.kind is FileKind.COMPRESSED_TENSORS
    st = f.load(MODULE + ".weight")
    assert st.shape == (out_f, in_f)
    qt = st.quantized
    assert qt.config.scale_dtype is ScaleDtype.BF16
    assert qt.config.mode is (Mode.SYMMETRIC if symmetric else Mode.ASYMMETRIC)
    order = np.argsort(layer.g_idx, kind="stable") if act_order else np.arange(in_f)
    assert np.array_equal(qt.codes.numpy(), layer.q[:, order])
    if not symmetric:
        assert np.array_equal(qt.zero_point.numpy(), layer.zp)
    assert torch.equal(st.dequantize(), layer.dequantize())


def test_compressed_tensors_per_channel(tmp_path):
    rng = np.random.default_rng(9)
    layer = random_signed_layer(rng, 16, 64, 4, 64, symmetric=False)
    write_folder(
        tmp_path,
        prefixed(MODULE, pack_compressed(layer, 4)),
        _ct_config(4, False, "channel", None, False),
    )
    st = open_quantized(tmp_path).load(MODULE + ".weight")
    assert st.quantized.config.granularity == PerChannel(0)
    assert torch.equal(st.dequantize(), layer.dequantize())


@pytest.mark.parametrize("double_quant", [True, False], ids=["dq", "no-dq"])
def test_bitsandbytes_nf4_as_bitsandbytes_writes_and_reads_it(tmp_path, double_quant):
    import bitsandbytes.functional as bnbf

    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(5))
    sd = bnb_state_dict(w, MODULE, "nf4", double_quant)
    config = {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": double_quant,
    }
    write_folder(tmp_path, sd, config)
    f = open_quantized(tmp_path)
    assert f.kind is FileKind.BITSANDBYTES
    entry = f.entry(MODULE + ".weight")
    assert entry.shape == (64, 256) and entry.type_name == "NF4 b64" + (
        " + DQ" if double_quant else ""
    )
    st = f.load(MODULE + ".weight")
    qt = st.quantized
    want = QuantConfig(
        format=Format.NF4,
        granularity=PerGroup(64),
        **({"scale_format": DoubleQuantScales(256)} if double_quant else {}),
    )
    assert qt.config == want
    # bitsandbytes' own decoding of the same state
    from bitsandbytes.functional import QuantState

    state = QuantState.from_dict(
        {k[len(MODULE) + 8 :]: v for k, v in sd.items() if k != MODULE + ".weight"},
        torch.device("cpu"),
    )
    ref = bnbf.dequantize_4bit(sd[MODULE + ".weight"], state)
    assert torch.equal(st.dequantize(), ref)
    # and the lab's own NF4 of the original stores the very same codes and scales
    lab = quantize(w, want)
    assert torch.equal(lab.codes, qt.codes)
    assert torch.equal(lab.scale, qt.scale)
    if double_quant:
        assert torch.equal(lab.stored.codes.reshape(-1), qt.stored.codes.reshape(-1))


def test_bitsandbytes_fp4_opens_as_the_labs_fp4_bnb_with_its_type_named(tmp_path):
    import bitsandbytes.functional as bnbf
    from bitsandbytes.functional import QuantState

    w = torch.randn(16, 128, generator=torch.Generator().manual_seed(6))
    sd = bnb_state_dict(w, MODULE, "fp4", double_quant=False)
    write_folder(tmp_path, sd, None)  # no config: the quant state says it all
    st = open_quantized(tmp_path).load(MODULE + ".weight")
    assert st.type_name == "bnb FP4 b64"
    assert st.quantized is not None and st.quantized.config == QuantConfig.from_name("FP4_BNB")
    state = QuantState.from_dict(
        {k[len(MODULE) + 8 :]: v for k, v in sd.items() if k != MODULE + ".weight"},
        torch.device("cpu"),
    )
    assert torch.equal(st.dequantize(), bnbf.dequantize_4bit(sd[MODULE + ".weight"], state))


def test_comparison_beside_the_labs_rtn_of_the_original(tmp_path):
    """A GPTQ file made from a known original: its error and the lab's RTN under the same
    format, both measured on the original's columns in the stored (act-order) order."""
    gen = torch.Generator().manual_seed(8)
    original = torch.randn(32, 64, generator=gen)
    cfg = QuantConfig(
        bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(32), scale_dtype=ScaleDtype.FP16
    )
    rng = np.random.default_rng(0)
    perm = rng.permutation(64)
    lab = quantize(original[:, perm], cfg)  # the "file" quantized the permuted columns
    g_idx = np.empty(64, dtype=np.int32)
    g_idx[perm] = np.arange(64) // 32
    u = (lab.codes.to(torch.int64) + 8).numpy()
    intweight = np.empty_like(u)
    intweight[:, perm] = u
    from quantized_files import IntLayer

    layer = IntLayer(
        intweight, (lab.zero_point.numpy().T + 8), lab.scale.numpy().T.astype(np.float16), g_idx
    )
    write_folder(
        tmp_path,
        prefixed(MODULE, pack_gptq(layer, 4, v1=False)),
        _gptq_config(4, 32, True, v1=False),
    )
    st = open_quantized(tmp_path).load(MODULE + ".weight")
    cmp = compare_with_original(st, original, MODULE + ".weight")
    assert torch.equal(cmp.original, original[:, np.argsort(g_idx, kind="stable")])
    assert cmp.rtn_metrics is not None and cmp.file_metrics.mse > 0
    # the file's groups hold the same columns as the lab's RTN (in another order inside
    # each group): the same rounding, so the same error up to the order of the sums
    assert cmp.file_metrics.mse == pytest.approx(cmp.rtn_metrics.mse, rel=1e-6)
    assert torch.equal(st.dequantize()[:, perm], lab.dequantize())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"quant_method": "hqq", "nbits": 4},
            "quant_method 'hqq' is a quantization config the reader does not know",
        ),
        (_gptq_config(3, 32, False, True), "bits=3 is packed in a way the reader does not know"),
        (
            {**_gptq_config(4, 32, False, True), "checkpoint_format": "marlin"},
            "'marlin' is a packing the reader does not know",
        ),
        (
            {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemv"},
            "'gemv' is a packing the reader does not know",
        ),
        (
            {**_ct_config(4, True, "group", 32, False), "format": "marlin-24"},
            "'marlin-24' .* packing the reader does not know",
        ),
    ],
)
def test_unknown_configs_and_packings_are_named(tmp_path, config, message):
    rng = np.random.default_rng(0)
    layer = random_int_layer(rng, 32, 64, 4, 32)
    write_folder(tmp_path, prefixed(MODULE, pack_gptq(layer, 4, v1=True)), config)
    with pytest.raises(QuantizedFileError, match=message) as err:
        open_quantized(tmp_path)
    assert "config.json" in str(err.value)
