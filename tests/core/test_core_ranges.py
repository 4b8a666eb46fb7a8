"""quantize(..., ranges=r): every block's range is given instead of chosen from the data."""

from __future__ import annotations

import pytest
import torch

from quant_core import (
    BlockRange,
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    Rounding,
    clip_stats,
    layout_for,
    quantize,
)

# Every test here runs on both backends (see conftest.backend).
pytestmark = pytest.mark.usefixtures("backend")

GRANULARITIES = [PerTensor(), PerChannel(0), PerChannel(1), PerGroup(8)]
GRAN_IDS = ["per-tensor", "axis0", "axis1", "g8"]
CONFIGS = [
    QuantConfig(4, Mode.SYMMETRIC),
    QuantConfig(3, Mode.ASYMMETRIC),
    QuantConfig(8, Mode.ASYMMETRIC, scale_dtype="fp16"),
    QuantConfig(format=Format.NF4),
    QuantConfig(format=Format.FP8_E4M3),
]
CFG_IDS = ["int4-sym", "int3-asym", "int8-asym-fp16", "nf4", "fp8"]


def _random_ranges(n_blocks: int, gen: torch.Generator) -> BlockRange:
    """Per block ``lo <= hi``: some straddle 0, some are all positive or all negative."""
    a = torch.randn(n_blocks, 1, generator=gen) * 2
    b = torch.randn(n_blocks, 1, generator=gen) * 2
    return BlockRange(torch.minimum(a, b), torch.maximum(a, b))


def _data_with_extremes(layout, rng: BlockRange, gen: torch.Generator) -> torch.Tensor:
    """A tensor whose every block has minimum ``rng.lo`` and maximum ``rng.hi`` exactly."""
    u = torch.rand(layout.n_blocks, layout.block_len, generator=gen)
    blocks = (rng.lo + (rng.hi - rng.lo) * u).clamp(rng.lo, rng.hi)
    blocks[:, :1] = rng.lo
    blocks[:, 1:2] = rng.hi
    return layout.from_blocks(blocks)


@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
@pytest.mark.parametrize("gran", GRANULARITIES, ids=GRAN_IDS)
def test_given_range_gives_the_qparams_of_data_with_those_extremes(cfg, gran, gen):
    cfg = QuantConfig(**{**cfg.__dict__, "granularity": gran})
    layout = layout_for((6, 16), gran)
    rng = _random_ranges(layout.n_blocks, gen)
    other = torch.randn(6, 16, generator=gen) * 5  # any data: the range is not chosen from it
    given = quantize(other, cfg, ranges=rng)
    chosen = quantize(_data_with_extremes(layout, rng, gen), cfg)
    assert torch.equal(given.scale, chosen.scale)
    assert torch.equal(given.zero_point, chosen.zero_point)
    assert given.chosen_range is not None and chosen.chosen_range is not None
    assert torch.equal(given.chosen_range.lo, chosen.chosen_range.lo)
    assert torch.equal(given.chosen_range.hi, chosen.chosen_range.hi)


@pytest.mark.parametrize("cfg", CONFIGS, ids=CFG_IDS)
def test_codes_of_data_inside_the_range_equal_those_under_the_chosen_range(cfg, gen):
    # Per channel of [n, 2 + L]: columns 0 and 1 hold lo and hi, the rest lies between, so
    # the chosen range of each row is [lo, hi]; the same rows without those two columns,
    # quantized under ranges=[lo, hi], must get the same codes.
    rng = _random_ranges(5, gen)
    inside = (rng.lo + (rng.hi - rng.lo) * torch.rand(5, 30, generator=gen)).clamp(rng.lo, rng.hi)
    cfg = QuantConfig(**{**cfg.__dict__, "granularity": PerChannel(0)})
    full = quantize(torch.cat([rng.lo, rng.hi, inside], dim=1), cfg)
    given = quantize(inside, cfg, ranges=rng)
    assert torch.equal(given.codes, full.codes[:, 2:])
    assert torch.equal(given.dequantize(), full.dequantize()[:, 2:])


def test_static_range_clips_other_data_and_clip_stats_counts_it():
    # Asymmetric 2 bits on [-1, 2]: s = 3/3 = 1, z = round(-2 - (-1)/1) = -1, codes -2..1,
    # levels s (q - z) = -1, 0, 1, 2; clip bounds (half a step beyond) -1.5 and 2.5.
    #   0.4 -> round(0.4 - 1) = -1 -> 0      5.0 -> 4 -> clamp 1 -> 2 (clipped high)
    #  -4.0 -> -5 -> clamp -2 -> -1 (clipped low)   2.0 -> 1 -> 2 (end code, not clipped)
    #  -1.2 -> round(-2.2) = -2 -> -1 (end code; -1.2 > -1.5, not clipped)
    #   2.4 -> round(1.4) = 1 -> 2 (end code; 2.4 < 2.5, not clipped)
    x = torch.tensor([0.4, 5.0, -4.0, 2.0, -1.2, 2.4])
    rng = BlockRange(torch.tensor([[-1.0]]), torch.tensor([[2.0]]))
    qt = quantize(x, QuantConfig(2, Mode.ASYMMETRIC), ranges=rng)
    assert float(qt.scale) == 1.0 and int(qt.zero_point) == -1
    assert qt.codes.tolist() == [-1, 1, -2, 1, -2, 1]
    assert qt.dequantize().tolist() == [0.0, 2.0, -1.0, 2.0, -1.0, 2.0]
    stats = clip_stats(x, qt)
    assert (stats.n_clipped_low, stats.n_clipped_high, stats.n_saturated) == (1, 1, 5)


def test_static_symmetric_range_by_hand():
    # Symmetric 8 bits, range [-0.5, 127/8]: a = 127/8, s = a/127 = 1/8 (exact).
    # 1.0 -> 8; 100.0 -> 800 -> clamp 127 (clipped: 100 > 127.5/8); -20.0 -> -160 -> -128
    # (clipped: -20 < -128.5/8); -16.0 -> -128 (end code, inside -16.0625: not clipped).
    x = torch.tensor([1.0, 100.0, -20.0, -16.0])
    rng = BlockRange(torch.tensor([[-0.5]]), torch.tensor([[127 / 8]]))
    qt = quantize(x, QuantConfig(8), ranges=rng)
    assert float(qt.scale) == 1 / 8
    assert qt.codes.tolist() == [8, 127, -128, -128]
    assert qt.chosen_range is not None
    assert (float(qt.chosen_range.lo), float(qt.chosen_range.hi)) == (-127 / 8, 127 / 8)
    stats = clip_stats(x, qt)
    assert (stats.n_clipped_low, stats.n_clipped_high, stats.n_saturated) == (1, 1, 3)


def test_nf4_range_gives_the_absmax():
    # range [-2, 1]: absmax 2, s = 2 / 1; 3.0 / 2 = 1.5 clamps to code 15 (value 1.0)
    x = torch.tensor([3.0, -1.0, 0.0])
    rng = BlockRange(torch.tensor([[-2.0]]), torch.tensor([[1.0]]))
    qt = quantize(x, QuantConfig(format="nf4"), ranges=rng)
    assert float(qt.scale) == 2.0
    assert qt.codes.tolist()[0] == 15 and qt.codes.tolist()[2] == 7
    assert clip_stats(x, qt).n_clipped_high == 1


def test_one_shared_range_broadcasts_to_every_block(gen):
    x = torch.randn(4, 24, generator=gen)
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(6))
    shared = BlockRange(torch.tensor([[-0.75]]), torch.tensor([[1.5]]))
    n = layout_for(x.shape, cfg.granularity).n_blocks
    repeated = BlockRange(shared.lo.expand(n, 1).clone(), shared.hi.expand(n, 1).clone())
    a, b = quantize(x, cfg, ranges=shared), quantize(x, cfg, ranges=repeated)
    assert torch.equal(a.codes, b.codes) and torch.equal(a.scale, b.scale)
    assert torch.equal(a.zero_point, b.zero_point)
    assert a.chosen_range is not None and a.chosen_range.lo.shape == (n, 1)


@pytest.mark.parametrize("method", list(RangeMethod), ids=lambda m: m.value)
@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.value)
def test_passing_back_the_chosen_range_reproduces_the_result(method, mode, gen):
    if method is RangeMethod.ABSMEAN and mode is Mode.ASYMMETRIC:
        pytest.skip("absmean is symmetric-only")
    x = torch.randn(8, 32, generator=gen) + 0.3
    cfg = QuantConfig(4, mode, PerGroup(8), range_method=method, percentile=95.0)
    first = quantize(x, cfg)
    assert first.chosen_range is not None
    again = quantize(x, cfg, ranges=first.chosen_range)
    assert torch.equal(first.codes, again.codes)
    assert torch.equal(first.scale, again.scale)
    assert torch.equal(first.zero_point, again.zero_point)


def test_stochastic_rounding_under_a_given_range(gen):
    x = torch.randn(4, 64, generator=gen)
    rng = BlockRange(torch.full((4, 1), -1.0), torch.full((4, 1), 1.0))
    cfg = QuantConfig(4, Mode.SYMMETRIC, PerChannel(0), rounding=Rounding.STOCHASTIC, seed=3)
    a, b = quantize(x, cfg, ranges=rng), quantize(x, cfg, ranges=rng)
    assert torch.equal(a.codes, b.codes)
    # every code is the floor or the ceiling of r/s, clamped: s = 1/7
    v = x / a.scale.reshape(-1, 1)
    codes = a.codes.double()
    assert bool(((codes == v.floor().clamp(-8, 7)) | (codes == v.ceil().clamp(-8, 7))).all())


def test_float64_and_half_ranges_are_used_in_float32():
    x = torch.tensor([0.1, 0.2, 0.9])
    f32 = BlockRange(torch.tensor([[0.0]]), torch.tensor([[1.0]]))
    f64 = BlockRange(f32.lo.double(), f32.hi.double())
    cfg = QuantConfig(8, Mode.ASYMMETRIC)
    assert torch.equal(quantize(x, cfg, ranges=f32).scale, quantize(x, cfg, ranges=f64).scale)


def _range(lo, hi, dtype=torch.float32) -> BlockRange:
    return BlockRange(torch.tensor(lo, dtype=dtype), torch.tensor(hi, dtype=dtype))


@pytest.mark.parametrize(
    ("ranges", "kwargs", "exc", "match"),
    [
        ((-1.0, 1.0), {}, TypeError, "must be a BlockRange, got tuple"),
        (BlockRange([[-1.0]], torch.tensor([[1.0]])), {}, TypeError, "ranges.lo must be a torch"),
        (_range([[-1]], [[1]], torch.int64), {}, TypeError, r"ranges.lo has dtype torch.int64"),
        (_range([-1.0], [1.0]), {}, ValueError, r"shape \(1,\); expected \[3, 1\]"),
        (_range([[-1.0]] * 2, [[1.0]] * 2), {}, ValueError, r"shape \(2, 1\); expected \[3, 1\]"),
        (_range([[-1.0]], [[float("nan")]]), {}, ValueError, "ranges.hi holds 1 value"),
        (_range([[-1e300]], [[1.0]], torch.float64), {}, ValueError, "not finite in float32"),
        (_range([[0.0], [2.0], [0.0]], [[1.0], [1.0], [1.0]]), {}, ValueError,
         r"lo > hi in 1 block\(s\), first block 1: lo=2 > hi=1"),
        (_range([[-1.0]], [[1.0]]), {"range_mask": torch.ones(3, 4, dtype=torch.bool)},
         ValueError, "range_mask or ranges, not both"),
    ],
    ids=["tuple", "list-lo", "int-dtype", "1-d", "wrong-rows", "nan", "f64-overflow",
         "inverted", "with-mask"],
)  # fmt: skip
def test_bad_ranges_are_refused(ranges, kwargs, exc, match):
    x = torch.randn(3, 4)
    with pytest.raises(exc, match=match):
        quantize(x, QuantConfig(4, granularity=PerChannel(0)), ranges=ranges, **kwargs)
