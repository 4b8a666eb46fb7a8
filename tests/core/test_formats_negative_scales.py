"""Clipping under a negative scale: GGUF Q4_0's ``d = max / -8`` is negative when the block's
value of largest magnitude is positive, so its levels run from ``d * 7`` (the lowest) to
``d * -8 = max`` (the highest). The clip bounds and counts must not assume ``s > 0``."""

from __future__ import annotations

import pytest
import torch

from quant_core import QuantConfig, clip_bounds, clip_stats, quantize

pytestmark = pytest.mark.usefixtures("backend")


def _q4_0_block() -> torch.Tensor:
    # max = +5: d = 5 / -8 = -0.625 (exact in fp16); levels -0.625 q, q in -8..7: from
    # -4.375 (q = 7) to 5 (q = -8). -4.9 lies beyond the low end by more than half a step
    # (0.3125) and clips; 5 is the high end itself.
    x = torch.zeros(1, 32)
    x[0, :4] = torch.tensor([5.0, -4.9, 0.1, -4.5])
    return x


def test_q4_0_negative_scale_clip_bounds_widen_the_range() -> None:
    qt = quantize(_q4_0_block(), QuantConfig.from_name("Q4_0"))
    assert float(qt.scale.reshape(-1)[0]) == -0.625
    rng = qt.representable_range()
    assert (float(rng.lo), float(rng.hi)) == (-4.375, 5.0)
    bounds = clip_bounds(qt)
    # half a step (|d| / 2) beyond each end, whatever the scale's sign
    assert (float(bounds.lo), float(bounds.hi)) == (-4.6875, 5.3125)


def test_q4_0_negative_scale_counts_the_value_that_clips() -> None:
    x = _q4_0_block()
    qt = quantize(x, QuantConfig.from_name("Q4_0"))
    assert qt.codes[0, :4].tolist() == [-8, 7, 0, 7]
    stats = clip_stats(x, qt)
    # -4.9 clips below (-4.5 is within half a step of -4.375); nothing clips above
    assert (stats.n_clipped_low, stats.n_clipped_high) == (1, 0)
    assert stats.n_saturated == 3  # the cells at either end code: 5.0, -4.9, -4.5


@pytest.mark.parametrize("name", ["Q4_0", "Q5_0", "IQ4_NL", "Q3_K", "Q6_K"])
def test_clip_counts_match_each_blocks_levels(name: str) -> None:
    """``clip_stats`` against the definition, block by block from ``levels``: an input
    below the lowest level by more than half the lowest gap (or above the highest by more
    than half the highest gap) clips. Q4_0/Q5_0/IQ4_NL have negative scales wherever a
    block's largest magnitude is positive, Q3_K/Q6_K wherever a block's is negative."""
    x = torch.randn(4, 512, generator=torch.Generator().manual_seed(22))
    qt = quantize(x, QuantConfig.from_name(name))
    assert bool((qt.scale < 0).any())
    blocks = qt.layout.to_blocks(x)
    low = high = 0
    for b in range(qt.n_blocks):
        lv = qt.levels(b)
        low += int((blocks[b] < lv[0] - (lv[1] - lv[0]) / 2).sum())
        high += int((blocks[b] > lv[-1] + (lv[-1] - lv[-2]) / 2).sum())
    stats = clip_stats(x, qt)
    assert (stats.n_clipped_low, stats.n_clipped_high) == (low, high)
