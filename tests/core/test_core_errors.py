"""Bad input raises a clear TypeError/ValueError at the boundary, naming the bad value."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from quant_core import (
    PerChannel,
    PerGroup,
    QuantConfig,
    dorefa_quantize_weights,
    error_metrics,
    layout_for,
    minmax_levels_quantize,
    pack,
    quantize,
    quantize_model,
    storage_cost,
    unpack,
)

NAN, INF = float("nan"), float("inf")

BAD_TENSORS = [
    (torch.tensor([1, 2, 3]), TypeError, r"dtype torch\.int64.*float tensor"),
    (torch.tensor([1, 2], dtype=torch.int8), TypeError, r"dtype torch\.int8"),
    (torch.tensor([True, False]), TypeError, r"dtype torch\.bool"),
    (torch.tensor([1 + 2j]), TypeError, r"dtype torch\.complex64"),
    (torch.tensor([1.0, NAN, NAN, 2.0]), ValueError, r"2 NaN and 0 Inf values of 4;"),
    (torch.tensor([INF, -INF, 1.0]), ValueError, r"0 NaN and 2 Inf values of 3;"),
    (torch.tensor([[NAN, INF]], dtype=torch.float16), ValueError, r"1 NaN and 1 Inf"),
    (torch.empty(0, 4), ValueError, r"empty \(shape \(0, 4\)\)"),
    (torch.empty(0), ValueError, r"empty"),
    (torch.tensor(1.5), ValueError, r"0-d"),
    ([1.0, 2.0], TypeError, r"must be a torch\.Tensor, got list"),
    (torch.tensor([1e300, 1.0, -1e300], dtype=torch.float64), ValueError,
     r"2 torch\.float64 values beyond the float32 range"),
]  # fmt: skip
BAD_IDS = ["int64", "int8", "bool", "complex", "nan", "inf", "fp16-nan-inf", "empty-2d",
           "empty-1d", "0-d", "list", "float64-overflow"]  # fmt: skip


@pytest.mark.parametrize(("x", "exc", "match"), BAD_TENSORS, ids=BAD_IDS)
def test_quantize_rejects_bad_tensors(x, exc, match):
    with pytest.raises(exc, match=match):
        quantize(x, QuantConfig())


@pytest.mark.parametrize(("x", "exc", "match"), BAD_TENSORS, ids=BAD_IDS)
def test_research_quantizers_reject_bad_tensors(x, exc, match):
    with pytest.raises(exc, match=match):
        minmax_levels_quantize(x, 4)
    with pytest.raises(exc, match=match):
        dorefa_quantize_weights(x, 4)


@pytest.mark.parametrize(("x", "exc", "match"), BAD_TENSORS[:-1], ids=BAD_IDS[:-1])
def test_error_metrics_rejects_bad_tensors(x, exc, match):
    good = torch.ones(3)
    with pytest.raises(exc, match=match):
        error_metrics(x, good)
    with pytest.raises(exc, match=match):
        error_metrics(good, x)


def test_error_metrics_names_the_argument():
    with pytest.raises(ValueError, match=r"^x_hat holds 1 NaN"):
        error_metrics(torch.ones(2), torch.tensor([1.0, NAN]))


def test_error_metrics_rejects_shape_mismatch():
    with pytest.raises(ValueError, match=r"shapes differ: x \(2, 3\) vs x_hat \(3, 2\)"):
        error_metrics(torch.ones(2, 3), torch.ones(3, 2))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"bits": 1}, ValueError, r"bits=1 is outside the supported range 2\.\.16"),
        ({"bits": 17}, ValueError, r"bits=17 is outside"),
        ({"bits": 0}, ValueError, r"bits=0 is outside"),
        ({"bits": -4}, ValueError, r"bits=-4 is outside"),
        ({"bits": 8.0}, TypeError, r"bits must be an int, got 8\.0"),
        ({"bits": True}, TypeError, r"bits must be an int, got True"),
        ({"mode": "sideways"}, ValueError, r"unknown mode 'sideways'; expected one of"),
        ({"mode": 3}, TypeError, r"mode must be a Mode or str, got int"),
        ({"format": "int3"}, ValueError, r"unknown format 'int3'"),
        ({"format": "nf4", "mode": "asymmetric"}, ValueError, r"nf4 uses absmax"),
        ({"granularity": "per-tensor"}, TypeError, r"granularity must be PerTensor\(\)"),
        ({"percentile": 50}, ValueError, r"percentile=50 must be in \(50, 100\]"),
        ({"percentile": 100.5}, ValueError, r"percentile=100\.5"),
        ({"percentile": "99"}, TypeError, r"percentile must be a number"),
        ({"seed": 1.5}, TypeError, r"seed must be an int"),
        ({"range_method": "best"}, ValueError, r"unknown range_method 'best'"),
        ({"scale_dtype": "fp8"}, ValueError, r"unknown scale_dtype 'fp8'"),
    ],
    ids=["bits-1", "bits-17", "bits-0", "bits-neg", "bits-float", "bits-bool", "mode-unknown",
         "mode-int", "format-unknown", "nf4-asym", "granularity-str", "percentile-50",
         "percentile-high", "percentile-str", "seed-float", "range-method", "scale-dtype"],
)  # fmt: skip
def test_quant_config_rejects_bad_fields(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        QuantConfig(**kwargs)


@pytest.mark.parametrize(
    ("gran", "exc", "match"),
    [
        (PerChannel(2), ValueError, r"PerChannel axis 2 is out of range for a 2-D tensor"),
        (PerChannel(-3), ValueError, r"PerChannel axis -3 is out of range"),
        (PerGroup(5), ValueError, r"group size 5 must divide the last dimension 12"),
        (PerGroup(24), ValueError, r"group size 24 must divide the last dimension 12"),
    ],
    ids=["axis-2", "axis-neg3", "group-5", "group-too-big"],
)
def test_granularity_that_does_not_fit_the_shape(gran, exc, match):
    with pytest.raises(exc, match=match):
        quantize(torch.randn(3, 12), QuantConfig(granularity=gran))
    with pytest.raises(exc, match=match):
        storage_cost((3, 12), QuantConfig(granularity=gran))


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: PerChannel(1.0), TypeError, r"PerChannel axis must be an int"),
        (lambda: PerChannel(True), TypeError, r"PerChannel axis must be an int"),
        (lambda: PerGroup(0), ValueError, r"group_size must be >= 1, got 0"),
        (lambda: PerGroup(-8), ValueError, r"group_size must be >= 1, got -8"),
        (lambda: PerGroup(32.0), TypeError, r"group_size must be an int"),
    ],
    ids=["axis-float", "axis-bool", "group-0", "group-neg", "group-float"],
)
def test_granularity_value_objects_reject_bad_values(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize(
    ("shape", "match"),
    [((), r"shape \(\) has no elements"), ((0, 4), r"shape \(0, 4\) has no elements"),
     ((4, 0), r"shape \(4, 0\) has no elements")],
    ids=["0-d", "empty-rows", "empty-cols"],
)  # fmt: skip
def test_storage_and_layout_reject_empty_shapes(shape, match):
    for gran in (None, PerChannel(0), PerGroup(4)):
        cfg = QuantConfig() if gran is None else QuantConfig(granularity=gran)
        with pytest.raises(ValueError, match=match):
            storage_cost(shape, cfg)
        with pytest.raises(ValueError, match=match):
            layout_for(shape, cfg.granularity)


def test_cfg_must_be_a_quant_config():
    with pytest.raises(TypeError, match=r"cfg must be a QuantConfig, got dict"):
        quantize(torch.ones(3), {"bits": 8})
    with pytest.raises(TypeError, match=r"cfg must be a QuantConfig, got str"):
        storage_cost((3,), "int8")
    with pytest.raises(TypeError, match=r"cfg must be a QuantConfig"):
        quantize_model(nn.Sequential(nn.Linear(2, 2)), None)


def test_layout_rejects_unknown_granularity():
    with pytest.raises(ValueError, match=r"unknown granularity"):
        layout_for((2, 2), "per-row")


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: pack(torch.tensor([1]), 0), ValueError, r"bits=0 is outside .*1\.\.16"),
        (lambda: pack(torch.tensor([1]), 17), ValueError, r"bits=17 is outside"),
        (lambda: pack(torch.tensor([1]), 2.0), TypeError, r"bits must be an int"),
        (lambda: pack(torch.tensor([1.0]), 4), TypeError, r"integer tensor, got torch\.float32"),
        (lambda: pack([1, 2], 4), TypeError, r"integer tensor, got list"),
        (lambda: pack(torch.tensor([16]), 4), ValueError, r"span \[16, 16\].*4 bits"),
        (lambda: pack(torch.tensor([-9, 3]), 4), ValueError, r"span \[-9, 3\]"),
        (lambda: unpack(torch.tensor([1], dtype=torch.uint8), 4, 3), ValueError,
         r"3 codes of 4 bits need 2 bytes, but packed holds 1"),
        (lambda: unpack(torch.tensor([1]), 4, 1), TypeError, r"packed must be a uint8"),
        (lambda: unpack(torch.tensor([1], dtype=torch.uint8), 4, -1), ValueError,
         r"count must be a non-negative int, got -1"),
        (lambda: unpack(torch.tensor([1], dtype=torch.uint8), 4, True), ValueError,
         r"count must be a non-negative int"),
    ],
    ids=["bits-0", "bits-17", "bits-float", "float-codes", "list", "too-big", "too-small",
         "short-buffer", "packed-int64", "count-neg", "count-bool"],
)  # fmt: skip
def test_packing_rejects_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("bits", [0, 17, -1], ids=lambda b: f"bits{b}")
def test_research_quantizers_reject_bad_bits(bits):
    with pytest.raises(ValueError, match=rf"bits={bits} is outside the supported range 1\.\.16"):
        minmax_levels_quantize(torch.ones(3), bits)
    with pytest.raises(ValueError, match=rf"bits={bits} is outside"):
        dorefa_quantize_weights(torch.ones(3), bits)


def test_quantize_model_rejects_bad_arguments():
    with pytest.raises(TypeError, match=r"module must be a torch\.nn\.Module, got Tensor"):
        quantize_model(torch.ones(2, 2), QuantConfig())
    with pytest.raises(ValueError, match=r"itself an nn\.Linear.*nn\.Sequential\(linear\)"):
        quantize_model(nn.Linear(4, 4), QuantConfig())


def test_quantize_model_names_the_layer_that_does_not_fit():
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 6))
    with pytest.raises(ValueError, match=r"layer '2' \(weight \(6, 4\)\): group size 8"):
        quantize_model(model, QuantConfig(granularity=PerGroup(8)))
    # all or nothing: the layer that did fit was not replaced either
    assert type(model[0]) is nn.Linear and type(model[2]) is nn.Linear


def test_double_quant_refuses_block_scales_whose_mean_overflows():
    # 16 blocks of 64 at 3.3e38: their float32 mean overflows, which bitsandbytes stores
    # as NaN scales; a large value in one block alone still quantizes
    cfg = QuantConfig.from_name("NF4_DQ")
    with pytest.raises(ValueError, match=r"NF4_DQ .* mean of these block scales .*overflows"):
        quantize(torch.full((4, 256), 3.3e38), cfg)
    x = torch.zeros(4, 256)
    x[0, 0] = 3e38
    assert quantize(x, cfg).dequantize()[0, 0] == torch.tensor(3e38)
