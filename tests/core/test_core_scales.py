"""Scales stored in fp16/bf16: rounded to what the dtype holds, subnormals included."""

from __future__ import annotations

import pytest
import torch

from quant_core import PerGroup, QuantConfig, ScaleDtype, quantize

# Every test here runs on both backends (see conftest.backend).
pytestmark = pytest.mark.usefixtures("backend")


def test_fp16_scales_keep_subnormal_steps(gen: torch.Generator) -> None:
    # Blocks of absmax ~0.006 at 8 bits need steps ~5e-5, below fp16's smallest normal
    # (6.1e-5) but well inside its subnormals (step 2^-24 = 6e-8).
    x = torch.randn(64, 64, generator=gen) * 0.002
    cfg32 = QuantConfig(8, granularity=PerGroup(32))
    q32 = quantize(x, cfg32)
    q16 = quantize(x, QuantConfig(8, granularity=PerGroup(32), scale_dtype=ScaleDtype.FP16))
    assert float(q16.scale.min()) < torch.finfo(torch.float16).tiny
    # Rounding a subnormal fp16 to the nearest multiple of 2^-24 moves it by at most 2^-25.
    assert torch.all((q16.scale - q32.scale).abs() <= 2.0**-25)
    assert torch.equal(q16.scale, q32.scale.to(torch.float16).to(torch.float32))
