"""evaluate_linear: Y = X W^T + b against X_hat W_hat^T + b, checked against the same
expression written out with quantize/dequantize, and the course's W8A16 layer."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from quant_core import Mode, PerChannel, PerGroup, PerTensor, QuantConfig, error_metrics, quantize
from quant_core.activations import calibrate_ranges
from quant_core.linear_eval import LayerScheme, SchemePreset, evaluate_linear, linear_layer

INT8_TOKEN = QuantConfig(bits=8, granularity=PerChannel(axis=0))
INT8_TENSOR = QuantConfig(bits=8)


@pytest.fixture
def layer(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.randn(40, 256, generator=gen)
    x[:, 7] *= 30.0  # an outlier feature, as LayerNorm outputs have
    w = torch.randn(96, 256, generator=gen) / 16
    b = torch.randn(96, generator=gen)
    return x, w, b


def _dq(t: torch.Tensor, cfg: QuantConfig) -> torch.Tensor:
    return quantize(t, cfg).dequantize()


def test_float_scheme_is_exact(layer):
    x, w, b = layer
    for bias in (b, None):
        ev = evaluate_linear(x, w, bias, LayerScheme())
        assert torch.equal(ev.y_hat, ev.y)
        assert torch.equal(ev.y, F.linear(x, w, bias))
        assert ev.metrics.mse == 0.0 and ev.metrics.sqnr_db == math.inf
        assert ev.weight_only is ev.activation_only is None
        assert ev.weight_q is ev.activation_q is ev.activation_clip is None
        assert torch.equal(ev.error, torch.zeros_like(ev.y))


@pytest.mark.parametrize("preset", list(SchemePreset), ids=lambda p: p.value)
def test_each_preset_is_the_written_out_expression(layer, preset):
    x, w, b = layer
    ev = evaluate_linear(x, w, b, preset)
    sch = preset.scheme
    w_hat = w if sch.weight is None else _dq(w, sch.weight)
    x_hat = x if sch.activation is None else _dq(x, sch.activation)
    y = F.linear(x, w, b)
    assert torch.equal(ev.y, y)
    assert torch.equal(ev.y_hat, F.linear(x_hat, w_hat, b))
    assert ev.metrics == error_metrics(y, ev.y_hat)
    assert ev.scheme == sch
    if sch.activation is None:  # one side quantized: it carries the whole error
        assert ev.activation_only is None and ev.y_weight_only is ev.y_hat
        assert ev.weight_only == ev.metrics
    else:
        assert torch.equal(ev.y_weight_only, F.linear(x, w_hat, b))
        assert torch.equal(ev.y_activation_only, F.linear(x_hat, w, b))
        assert ev.weight_only == error_metrics(y, ev.y_weight_only)
        assert ev.activation_only == error_metrics(y, ev.y_activation_only)
        assert ev.activation_clip is not None and ev.activation_clip.n_clipped == 0


def test_presets_are_the_documented_configs():
    w8 = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerChannel(0))
    w4 = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(128))
    assert SchemePreset.W8A16.scheme == LayerScheme(weight=w8)
    assert SchemePreset.W8A8.scheme == LayerScheme(weight=w8, activation=INT8_TOKEN)
    assert SchemePreset.W4A16_G128.scheme == LayerScheme(weight=w4)
    assert SchemePreset.W4A8.scheme == LayerScheme(weight=w4, activation=INT8_TOKEN)
    assert [p.label for p in SchemePreset] == ["W8A16", "W8A8", "W4A16 g128", "W4A8"]
    assert SchemePreset.W8A8.scheme.describe() == (
        "W int8 sym per-channel(0) · A int8 sym per-channel(0) (per-token)"
    )
    assert LayerScheme().describe() == "W float · A float"


def test_w8a16_matches_the_course_layer(layer):
    """The course's ``W8A16LinearLayer.quantize``: ``scales = w.abs().max(dim=-1) / 127``,
    ``int8_weights = round(w / scales[:, None])``: the same ops, so the same codes."""
    x, w, b = layer
    scales = w.abs().max(dim=-1).values / 127
    int8_weights = torch.round(w / scales.unsqueeze(1)).to(torch.int8)
    ev = evaluate_linear(x, w, b, SchemePreset.W8A16)
    assert torch.equal(ev.weight_q.codes, int8_weights)
    assert torch.equal(ev.weight_q.scale, scales)


def test_per_token_beats_per_tensor_with_an_outlier_feature(layer):
    x, w, b = layer
    token = evaluate_linear(x, w, b, SchemePreset.W8A8)
    tensor = evaluate_linear(x, w, b, LayerScheme(SchemePreset.W8A8.scheme.weight, INT8_TENSOR))
    assert token.metrics.sqnr_db > tensor.metrics.sqnr_db
    assert token.weight_only == tensor.weight_only  # the weights are the same


def test_static_ranges_clip_what_lies_beyond_them(layer, gen):
    x, w, b = layer
    cfg = QuantConfig(bits=8, granularity=PerChannel(axis=1))
    ranges = calibrate_ranges(x[:20], cfg)
    held_out = x[20:].clone()
    held_out[0, 3] = 2 * float(x[:20, 3].abs().max()) + 1.0  # beyond feature 3's range
    ev = evaluate_linear(held_out, w, b, LayerScheme(activation=cfg), activation_ranges=ranges)
    assert ev.activation_clip.n_clipped >= 1
    assert torch.equal(ev.activation_q.codes, quantize(held_out, cfg, ranges=ranges.ranges).codes)


def test_a_reused_weight_gives_the_same_result(layer):
    x, w, b = layer
    sch = SchemePreset.W8A8.scheme
    qt = quantize(w, sch.weight)
    reused = evaluate_linear(x, w, b, sch, weight_q=qt)
    fresh = evaluate_linear(x, w, b, sch)
    assert reused.weight_q is qt and torch.equal(reused.y_hat, fresh.y_hat)
    with pytest.raises(ValueError, match="quantized under int4"):
        evaluate_linear(x, w, b, sch, weight_q=quantize(w, SchemePreset.W4A8.scheme.weight))
    with pytest.raises(ValueError, match="cannot be reused with smoothing"):
        evaluate_linear(x, w, b, sch, weight_q=qt, smoothing=torch.ones(256))
    with pytest.raises(TypeError, match="weight_q must be a QuantizedTensor"):
        evaluate_linear(x, w, b, sch, weight_q=w)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((torch.ones(4), torch.ones(3, 4), None), {}, ValueError, r"2-D \[tokens, features\]"),
        ((torch.ones(2, 2, 4), torch.ones(3, 4), None), {}, ValueError, r"shape \(2, 2, 4\)"),
        ((torch.ones(2, 5), torch.ones(3, 4), None), {}, ValueError, "x has 5 features"),
        ((torch.ones(2, 4), torch.ones(12), None), {}, ValueError, r"\[out, in\], got shape"),
        ((torch.ones(2, 4), torch.ones(3, 4), torch.ones(4)), {}, ValueError, r"bias has shape"),
        ((torch.ones(2, 4, dtype=torch.int64), torch.ones(3, 4), None), {}, TypeError, "int64"),
        (
            (torch.ones(2, 4), torch.ones(3, 4), None),
            {"smoothing": torch.ones(3)},
            ValueError,
            r"smoothing has shape \(3,\)",
        ),
        (
            (torch.ones(2, 4), torch.ones(3, 4), None),
            {"smoothing": torch.tensor([1.0, 0.0, 1.0, -2.0])},
            ValueError,
            r"2 factor\(s\) <= 0",
        ),
    ],
)
def test_bad_layer_input_names_the_value(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        evaluate_linear(*args, LayerScheme(), **kwargs)


def test_bad_schemes_and_ranges(layer):
    x, w, b = layer
    with pytest.raises(TypeError, match="scheme must be a LayerScheme or SchemePreset"):
        evaluate_linear(x, w, b, "W8A8")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="weight must be a QuantConfig or None, got int"):
        LayerScheme(weight=8)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"weight .* under int4 asym g128: group size 128"):
        evaluate_linear(x[:, :100], w[:, :100], b, SchemePreset.W4A16_G128)
    ranges = calibrate_ranges(x, INT8_TENSOR)
    with pytest.raises(ValueError, match="keeps activations in float"):
        evaluate_linear(x, w, b, SchemePreset.W8A16, activation_ranges=ranges)
    with pytest.raises(ValueError, match="calibrated under int8 sym per-tensor, not int8 sym per"):
        evaluate_linear(x, w, b, SchemePreset.W8A8, activation_ranges=ranges)
    with pytest.raises(ValueError, match="calibrated on 256 features; x has 128"):
        evaluate_linear(
            x[:, :128], w[:, :128], b, LayerScheme(activation=INT8_TENSOR), activation_ranges=ranges
        )


def test_linear_layer_finds_only_linear_layers():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    assert linear_layer(model, "0") is model[0]
    with pytest.raises(ValueError, match=r"layer '1' is a ReLU, not an nn\.Linear"):
        linear_layer(model, "1")
    with pytest.raises(ValueError, match="no layer named 'head'"):
        linear_layer(model, "head")
    with pytest.raises(TypeError, match="layer name must be a str"):
        linear_layer(model, 0)  # type: ignore[arg-type]


def test_per_tensor_static_range_of_one_block(gen):
    x = torch.randn(10, 8, generator=gen)
    r = calibrate_ranges(x, QuantConfig(bits=8, granularity=PerTensor()))
    assert r.ranges.hi.shape == (1, 1) and r.n_tokens == 10 and r.n_features == 8
    assert float(r.ranges.hi) == float(x.abs().max()) == -float(r.ranges.lo)
