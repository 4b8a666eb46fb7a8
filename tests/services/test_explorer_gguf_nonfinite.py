"""The explorer on a tensor with NaN/Inf cells under llama.cpp's recipe (a GGUF type):
llama.cpp's quantizers choose every block's scale from all its values, so the stand-ins
(each inside its block's finite range) are quantized with them instead of being masked."""

from __future__ import annotations

import math

import pytest
import torch

from dashboard.services.explorer.explore import explore
from quant_core import QuantConfig, quantize


@pytest.mark.parametrize("name", ["Q4_0", "Q8_0", "Q4_K"])
def test_explore_gguf_type_with_nonfinite_cells(name: str) -> None:
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(21))
    x[0, 3], x[2, 40] = float("nan"), float("inf")
    exp = explore(x, QuantConfig.from_name(name))
    assert exp.finite is not None and int(exp.finite.sum()) == x.numel() - 2
    assert math.isnan(float(exp.dequantized[0, 3])) and math.isnan(float(exp.error[2, 40]))
    # the legacy types' scales come from each block's extremes, which the stand-ins leave
    # as they were: the finite blocks are quantized exactly as without the bad cells
    if name != "Q4_K":
        clean = x.clone()
        clean[0, 3], clean[2, 40] = x[0, 2], x[2, 41]  # any in-range values will do
        ref = quantize(clean, QuantConfig.from_name(name))
        assert torch.equal(exp.qt.scale, ref.scale)
