"""explore() with a precomputed QuantizedTensor (GPTQ/AWQ/HQQ): every figure is measured on
it exactly as on round-to-nearest, and the RTN path is unchanged."""

from __future__ import annotations

import pytest
import torch

from dashboard.services.explorer.explore import explore
from quant_core import (
    Algorithm,
    Mode,
    PerGroup,
    QuantConfig,
    error_metrics,
    quantize,
    quantize_weight,
    storage_cost,
)

CFG = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(16))


def _matrix() -> torch.Tensor:
    return torch.randn(8, 64, generator=torch.Generator().manual_seed(0))


def test_rtn_given_equals_rtn_computed() -> None:
    w = _matrix()
    a = explore(w, CFG)
    b = explore(w, CFG, quantized=quantize(w, CFG))
    assert torch.equal(a.dequantized, b.dequantized)
    assert a.metrics == b.metrics and a.storage == b.storage and a.clip == b.clip


def test_hqq_result_is_what_the_exploration_measures() -> None:
    w = _matrix()
    result = quantize_weight(w, CFG, Algorithm.HQQ)
    exp = explore(w, CFG, quantized=result.quantized)
    assert exp.qt is result.quantized
    deq = result.quantized.dequantize()
    assert torch.equal(exp.dequantized, deq)
    assert exp.metrics == error_metrics(w, deq)
    assert exp.storage == storage_cost((8, 64), CFG)
    # HQQ optimises the weight error: it differs from (and is no worse than) RTN here
    rtn = explore(w, CFG)
    assert not torch.equal(exp.dequantized, rtn.dequantized)
    assert exp.metrics.mse <= rtn.metrics.mse


def test_precomputed_is_checked() -> None:
    w = _matrix()
    qt = quantize(w, CFG)
    with pytest.raises(ValueError, match="shape"):
        explore(w[:, :32], CFG, quantized=qt)
    with pytest.raises(ValueError, match="not int4"):
        explore(w, QuantConfig(bits=4, granularity=PerGroup(16)), quantized=qt)
    with pytest.raises(TypeError, match="QuantizedTensor"):
        explore(w, CFG, quantized=w)  # type: ignore[arg-type]
    bad = w.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        explore(bad, CFG, quantized=qt)
