"""The front door: Algorithm, quantize_weight, quantize_weights, layer_output_error."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from quant_core import (
    Algorithm,
    AlgorithmWarning,
    AWQOptions,
    GPTQOptions,
    HQQOptions,
    Mode,
    PerGroup,
    QuantConfig,
    WeightQuantResult,
    error_metrics,
    layer_output_error,
    quantize,
    quantize_weight,
    quantize_weights,
)
from quant_core.awq import awq_quantize
from quant_core.gptq import gptq_quantize
from quant_core.hqq import hqq_quantize

CFG = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(16))


def _layer(gen, n_out=8, n_in=32, tokens=64):
    w = torch.randn(n_out, n_in, generator=gen)
    x = torch.randn(tokens, n_in, generator=gen)
    x[:, 1] *= 10
    return w, x


def test_algorithm_values_labels_and_needs():
    assert [a.value for a in Algorithm] == ["rtn", "gptq", "awq", "hqq"]
    assert [a.label for a in Algorithm] == ["RTN", "GPTQ", "AWQ", "HQQ"]
    assert [a.needs_calibration for a in Algorithm] == [False, True, True, False]
    assert Algorithm.GPTQ.options_type is GPTQOptions and Algorithm.RTN.options_type is None


@pytest.mark.parametrize("algorithm", list(Algorithm), ids=lambda a: a.value)
def test_front_door_equals_each_algorithm(algorithm, gen):
    w, x = _layer(gen)
    res = quantize_weight(w, CFG, algorithm, calibration=x)
    assert isinstance(res, WeightQuantResult) and res.algorithm is algorithm
    assert res.seconds >= 0
    direct = {
        Algorithm.RTN: lambda: quantize(w, CFG),
        Algorithm.GPTQ: lambda: gptq_quantize(w, x, CFG).quantized,
        Algorithm.AWQ: lambda: awq_quantize(w, x, CFG).quantized,
        Algorithm.HQQ: lambda: hqq_quantize(w, CFG).quantized,
    }[algorithm]()
    assert torch.equal(res.quantized.codes, direct.codes)
    assert torch.equal(res.quantized.scale, direct.scale)
    assert (res.input_scale is not None) == (algorithm is Algorithm.AWQ)
    expected = direct.dequantize()
    if algorithm is Algorithm.AWQ:
        expected = expected / res.input_scale
    assert torch.equal(res.effective_weight(), expected)
    assert res.summary()["algorithm"] == algorithm.label


def test_algorithm_given_as_a_string(gen):
    w, x = _layer(gen)
    res = quantize_weight(w, CFG, "GPTQ", calibration=x)
    assert res.algorithm is Algorithm.GPTQ
    with pytest.raises(ValueError, match=r"unknown algorithm 'obq'; expected one of: rtn, gptq"):
        quantize_weight(w, CFG, "obq")
    with pytest.raises(TypeError, match=r"algorithm must be an Algorithm or str, got int"):
        quantize_weight(w, CFG, 3)


def test_rtn_passes_the_generator_and_ignores_calibration(gen):
    w, x = _layer(gen)
    cfg = QuantConfig(4, rounding="stochastic")
    a = quantize_weight(w, cfg, calibration=x, generator=torch.Generator().manual_seed(7))
    b = quantize(w, cfg, torch.Generator().manual_seed(7))
    assert torch.equal(a.quantized.codes, b.codes)
    assert a.details is None and a.warnings == ()


@pytest.mark.parametrize("algorithm", [Algorithm.GPTQ, Algorithm.AWQ], ids=["gptq", "awq"])
def test_calibration_algorithms_explain_why_a_lone_tensor_cannot_use_them(algorithm, gen):
    w, _ = _layer(gen)
    reason = algorithm.unavailable_reason(CFG, has_calibration=False)
    assert reason is not None and "this tensor has none" in reason
    with pytest.raises(ValueError, match=r"chooses codes from a linear layer's inputs"):
        quantize_weight(w, CFG, algorithm)
    assert algorithm.unavailable_reason(CFG, has_calibration=True) is None


def test_unavailable_reasons():
    nf4 = QuantConfig(format="nf4")
    assert Algorithm.RTN.unavailable_reason(nf4, has_calibration=False) is None
    assert Algorithm.AWQ.unavailable_reason(nf4, has_calibration=True) is None
    gptq = Algorithm.GPTQ.unavailable_reason(nf4, has_calibration=True)
    assert "nf4 is not the int format" in gptq
    hqq = Algorithm.HQQ.unavailable_reason(nf4, has_calibration=False)
    assert "nf4 is not the int format" in hqq
    # ternary levels or FP8 are no codebook: the reason says what they are not, not what they are
    for fmt in ("ternary_packed", "fp8_e4m3"):
        reason = Algorithm.HQQ.unavailable_reason(QuantConfig(format=fmt), has_calibration=False)
        assert reason is not None and "codebook" not in reason
    stoch = QuantConfig(4, rounding="stochastic")
    assert Algorithm.RTN.unavailable_reason(stoch, has_calibration=False) is None
    for a in (Algorithm.GPTQ, Algorithm.AWQ, Algorithm.HQQ):
        assert "nearest rounding" in a.unavailable_reason(stoch, has_calibration=True)


def test_options_are_checked_against_the_algorithm(gen):
    w, x = _layer(gen)
    with pytest.raises(TypeError, match=r"GPTQ takes GPTQOptions, got AWQOptions"):
        quantize_weight(w, CFG, Algorithm.GPTQ, calibration=x, options=AWQOptions())
    with pytest.raises(TypeError, match=r"RTN takes no options, got HQQOptions"):
        quantize_weight(w, CFG, options=HQQOptions())
    res = quantize_weight(w, CFG, "awq", calibration=x, options=AWQOptions(n_grid=5))
    assert len(res.details.errors) == 5
    res = quantize_weight(w, CFG, "gptq", calibration=x, options=GPTQOptions(act_order=True))
    assert res.details.permutation is not None and res.summary()["act order"] == "yes"
    res = quantize_weight(w, CFG, "hqq", options=HQQOptions(iters=2, early_stop=False))
    assert len(res.details.error_trace) == 3


def test_cfg_must_be_a_quant_config(gen):
    w, _ = _layer(gen)
    with pytest.raises(TypeError, match=r"cfg must be a QuantConfig, got dict"):
        quantize_weight(w, {"bits": 4})


def test_warnings_reach_the_result(gen):
    w, x = _layer(gen, tokens=8)
    with pytest.warns(AlgorithmWarning, match="8 calibration tokens for 32 input features"):
        res = quantize_weight(w, CFG, Algorithm.GPTQ, calibration=x)
    assert len(res.warnings) == 1 and res.warnings == res.details.warnings


@pytest.mark.parametrize("algorithm", list(Algorithm), ids=lambda a: a.value)
def test_forward_runs_the_quantized_layer(algorithm, gen):
    w, x = _layer(gen)
    b = torch.randn(8, generator=gen)
    res = quantize_weight(w, CFG, algorithm, calibration=x)
    y = res.forward(x, b)
    # AWQ runs (x / s) Ŵᵀ: equal to x W_effᵀ up to float32 rounding of the products
    torch.testing.assert_close(y, F.linear(x, res.effective_weight(), b), rtol=1e-5, atol=1e-5)
    if algorithm is not Algorithm.AWQ:
        assert torch.equal(y, F.linear(x, res.quantized.dequantize(), b))


def test_summary_lists_each_algorithms_diagnostics(gen):
    w, x = _layer(gen)
    keys = {a: set(quantize_weight(w, CFG, a, calibration=x).summary()) for a in Algorithm}
    assert keys[Algorithm.RTN] == {"algorithm", "seconds"}
    assert {"damp", "calibration tokens", "dead columns", "proxy loss"} <= keys[Algorithm.GPTQ]
    assert {"alpha", "output MSE", "RTN output MSE"} <= keys[Algorithm.AWQ]
    assert {"solved for", "iterations", "mean |error|", "RTN mean |error|"} <= keys[Algorithm.HQQ]


def test_quantize_weights_over_named_layers(gen):
    w1, x1 = _layer(gen)
    w2, x2 = _layer(gen, n_out=4, n_in=16)
    weights = {"a": w1, "b": w2}
    calib = {"a": x1, "b": x2}
    out = quantize_weights(weights, CFG, Algorithm.GPTQ, calibration=calib)
    assert list(out) == ["a", "b"]
    assert torch.equal(out["b"].quantized.codes, gptq_quantize(w2, x2, CFG).quantized.codes)
    with pytest.raises(ValueError, match=r"layer 'b': GPTQ needs its calibration inputs"):
        quantize_weights(weights, CFG, "gptq", calibration={"a": x1})
    bad = QuantConfig(4, granularity=PerGroup(32))  # does not divide b's 16 inputs
    with pytest.raises(ValueError, match=r"layer 'b' \(weight \(4, 16\)\): group size 32"):
        quantize_weights(weights, bad, "hqq")
    with pytest.raises(TypeError, match=r"weights must be a mapping"):
        quantize_weights([w1], CFG)


def test_layer_output_error(gen):
    w, x = _layer(gen)
    b = torch.randn(8, generator=gen)
    w_hat = quantize(w, CFG).dequantize()
    m = layer_output_error(w, w_hat, x, b)
    assert m == error_metrics(F.linear(x, w, b), F.linear(x, w_hat, b))
    exact = layer_output_error(w, w, x)
    assert exact.mse == 0.0 and math.isinf(exact.sqnr_db)
    with pytest.raises(ValueError, match=r"w and w_hat must be 2-D of one shape"):
        layer_output_error(w, w_hat[:, :4], x)
    with pytest.raises(ValueError, match=r"x must be \[tokens, 32\], got \(64, 31\)"):
        layer_output_error(w, w_hat, x[:, :31])
    with pytest.raises(TypeError, match=r"w_hat must be a torch.Tensor"):
        layer_output_error(w, "w", x)
