"""The explorer under GPTQ, AWQ and HQQ (``explore_algorithm``): the maps measure the
algorithm's own QuantizedTensor, AWQ's maps are W·diag(s) with the effective weight
reported beside them, and held-out output errors are compared with RTN's."""

from __future__ import annotations

import pytest
import torch

from dashboard.services.explorer.algorithm import OutputComparison, explore_algorithm
from dashboard.services.state.algorithm import AlgorithmChoice
from quant_core import (
    Algorithm,
    Mode,
    PerChannel,
    PerGroup,
    QuantConfig,
    error_metrics,
    layer_output_error,
    quantize,
    quantize_weight,
)

CFG = QuantConfig(bits=4, mode=Mode.SYMMETRIC, granularity=PerChannel(0))
GPTQ = AlgorithmChoice(Algorithm.GPTQ, gptq_damp=0.1, act_order=True)


def _layer(out: int = 24, inp: int = 64, tokens: int = 384, seed: int = 0):
    """``w [out, inp]`` and calibration / held-out inputs from one distribution: correlated
    features, four of them 8x larger (as a transformer's outlier features), so the output
    error differs from the weight error and GPTQ/AWQ have something to exploit."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(out, inp, generator=g) * 0.1
    mix = torch.randn(inp, inp, generator=g) * 0.3 + torch.eye(inp)
    scale = torch.ones(inp)
    scale[:4] = 8.0

    def draw(n: int) -> torch.Tensor:
        return (torch.randn(n, inp, generator=g) @ mix) * scale

    return w, draw(tokens), draw(tokens // 2)


def test_gptq_maps_are_its_codes_and_its_output_beats_rtn_on_held_out_data() -> None:
    w, cal, held = _layer()
    run = explore_algorithm(w, CFG, GPTQ, calibration=cal, held_out=held, n_held_out_sentences=7)
    res = quantize_weight(w, CFG, Algorithm.GPTQ, calibration=cal, options=GPTQ.options)
    exp = run.exploration
    assert torch.equal(exp.qt.codes, res.quantized.codes)  # deterministic: the same run
    assert torch.equal(exp.original, w) and torch.equal(exp.dequantized, res.quantized.dequantize())
    assert exp.metrics == error_metrics(w, res.quantized.dequantize())
    rtn = quantize(w, CFG)
    assert run.codes_changed == int((rtn.codes != res.quantized.codes).sum()) > 0
    out = run.output
    assert out is not None and (out.n_sentences, out.n_tokens) == (7, held.shape[0])
    assert out.mse == layer_output_error(w, res.effective_weight(), held).mse
    assert out.rtn_mse == layer_output_error(w, rtn.dequantize(), held).mse
    assert out.ratio < 1.0  # GPTQ's point: a lower output error than RTN
    assert run.effective == error_metrics(w, res.effective_weight())
    assert exp.describe() == "int4 sym per-channel(0) · GPTQ (damp 0.1, act-order)"
    assert not run.shows_scaled_weight
    assert any("differ from round-to-nearest" in line for line in run.notes())


def test_awq_maps_show_the_scaled_weight_and_report_the_effective_one() -> None:
    w, cal, held = _layer()
    cfg = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(16))
    run = explore_algorithm(w, cfg, AlgorithmChoice(Algorithm.AWQ), calibration=cal, held_out=held)
    s = run.result.input_scale
    assert s is not None and run.shows_scaled_weight
    exp = run.exploration
    assert torch.equal(exp.original, w * s)  # the weight the codes encode
    assert torch.equal(exp.qt.codes, quantize(w * s, cfg).codes)  # AWQ rounds W·s to nearest
    w_eff = run.result.quantized.dequantize() / s
    assert run.effective == error_metrics(w, w_eff)  # what the layer computes with, vs W
    assert run.output is not None
    assert run.output.mse == layer_output_error(w, w_eff, held).mse
    assert any("W·diag(s)" in line for line in run.notes())


def test_hqq_runs_on_any_tensor_without_output_errors() -> None:
    w = torch.randn(8, 32, generator=torch.Generator().manual_seed(1))
    cfg = QuantConfig(bits=3, mode=Mode.ASYMMETRIC, granularity=PerGroup(8))
    run = explore_algorithm(w, cfg, AlgorithmChoice(Algorithm.HQQ))
    assert run.output is None and run.n_calibration_tokens == 0
    assert run.effective.mse <= run.rtn_effective.mse  # HQQ fits the weight error
    assert any("HQQ refit" in line for line in run.notes())


def test_what_cannot_run_says_why() -> None:
    w, _, _ = _layer()
    with pytest.raises(ValueError, match="calibration data"):
        explore_algorithm(w, CFG, GPTQ)  # no inputs
    with pytest.raises(ValueError, match="RTN needs no algorithm run"):
        explore_algorithm(w, CFG, AlgorithmChoice())
    with pytest.raises(ValueError, match="integer grid"):
        explore_algorithm(w, QuantConfig(format="nf4"), AlgorithmChoice(Algorithm.HQQ))
    bad = w.clone()
    bad[0, 0] = float("inf")
    with pytest.raises(ValueError, match="finite weight"):
        explore_algorithm(bad, CFG, AlgorithmChoice(Algorithm.HQQ))


def test_output_comparison_line() -> None:
    line = OutputComparison("GPTQ", 18, 278, 1.2e-4, 2.0e-4).describe()
    assert line == (
        "output MSE on 18 held-out sentences (278 tokens): GPTQ 0.00012 vs RTN 0.0002 (0.60× RTN)"
    )
