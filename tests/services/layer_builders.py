"""A small synthetic linear layer with captured inputs, for the compare services' tests.

Its inputs are correlated and four features are 8x larger than the rest (as the outlier
features of a transformer's activations), so the output error of a weight scheme differs
from its weight error: GPTQ and AWQ trade a higher weight MSE for a lower output MSE.
"""

from __future__ import annotations

import torch

from dashboard.services.activations.layer import LayerInputs


def synthetic_layer(
    out: int = 24, inp: int = 64, tokens: int = 256, seed: int = 0
) -> LayerInputs:
    """Weight ``[out, inp]`` ~ N(0, 0.1²), a bias, ``tokens`` calibration inputs and
    ``tokens // 2`` held-out ones from the same distribution (different draws)."""
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(out, inp, generator=g) * 0.1
    bias = torch.randn(out, generator=g) * 0.1
    mix = torch.randn(inp, inp, generator=g) * 0.3 + torch.eye(inp)
    scale = torch.ones(inp)
    scale[:4] = 8.0

    def draw(n: int) -> torch.Tensor:
        return (torch.randn(n, inp, generator=g) @ mix) * scale

    return LayerInputs("synthetic", weight, bias, draw(tokens), draw(tokens // 2))
