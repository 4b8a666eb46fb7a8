"""``QuantConfig.seed`` at the public boundary: a seed torch's generator cannot take was
accepted, and ``quantize`` later failed with torch's "Overflow when unpacking long long"
(naming no value); a negative seed was accepted and drew as seed ``2^64 - 1`` does."""

from __future__ import annotations

import pytest
import torch

from quant_core import QuantConfig, Rounding, quantize


@pytest.mark.parametrize("seed", [-1, 2**64, 2**70])
def test_a_seed_outside_the_generators_range_is_refused_naming_it(seed: int) -> None:
    with pytest.raises(ValueError, match=f"seed={seed}"):
        QuantConfig(4, rounding=Rounding.STOCHASTIC, seed=seed)


@pytest.mark.parametrize("seed", [0, 2**31 - 1, 2**64 - 1])
def test_seeds_in_range_run(seed: int) -> None:
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    cfg = QuantConfig(4, rounding=Rounding.STOCHASTIC, seed=seed)
    a, b = quantize(x, cfg).dequantize(), quantize(x, cfg).dequantize()
    assert torch.equal(a, b)  # the seed makes stochastic rounding reproducible
