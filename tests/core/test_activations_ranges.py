"""Static (calibrated) and dynamic activation ranges on matrices built by hand."""

from __future__ import annotations

import pytest
import torch

from quant_core import Mode, PerChannel, PerGroup, PerTensor, QuantConfig, clip_stats, quantize
from quant_core.activations import (
    ActivationGranularity,
    ActivationRanges,
    calibrate_layer_ranges,
    calibrate_ranges,
    compare_static_dynamic,
    quantize_activation,
)
from quant_core.capture import ActivationCapture

PER_FEATURE = QuantConfig(bits=8, mode=Mode.ASYMMETRIC, granularity=PerChannel(axis=1))
PER_TENSOR = QuantConfig(bits=8, granularity=PerTensor())


def test_per_feature_ranges_are_each_features_extremes(gen):
    calib = torch.randn(50, 6, generator=gen)
    r = calibrate_ranges(calib, PER_FEATURE)
    assert isinstance(r, ActivationRanges)
    assert r.granularity is ActivationGranularity.PER_FEATURE
    assert (r.n_tokens, r.n_features) == (50, 6)
    assert torch.equal(r.ranges.lo.reshape(-1), calib.amin(dim=0))
    assert torch.equal(r.ranges.hi.reshape(-1), calib.amax(dim=0))


def test_static_ranges_quantize_as_quantize_with_those_ranges(gen):
    calib, x = torch.randn(50, 6, generator=gen), torch.randn(20, 6, generator=gen)
    for cfg in (PER_FEATURE, PER_TENSOR):
        r = calibrate_ranges(calib, cfg)
        qt = quantize_activation(x, cfg, r)
        ref = quantize(x, cfg, ranges=r.ranges)
        assert torch.equal(qt.codes, ref.codes) and torch.equal(qt.scale, ref.scale)
        assert torch.equal(quantize_activation(x, cfg).codes, quantize(x, cfg).codes)


def test_held_out_values_beyond_the_calibrated_range_clip():
    """Feature 0 is calibrated on [-1, 1]: ``s = 2/255`` and the zero point that keeps 0
    exact, ``z = -1``, put the top level at ``128 s ~ 1.0039``. The held-out 3.0 lies far
    beyond it (more than half a step), so it clips; ``1 + s/4`` is below the top level and
    rounds onto it without clipping; every other value is inside."""
    calib = torch.tensor([[-1.0, 0.0], [1.0, 2.0]])
    step = 2.0 / 255
    held = torch.tensor([[3.0, 1.0], [1.0 + step / 4, 1.5], [-0.5, 0.5]])
    cmp = compare_static_dynamic(held, PER_FEATURE, calibration=calib)
    assert cmp.static.clip.n_clipped_high == 1 and cmp.static.clip.n_clipped_low == 0
    assert cmp.static.clipped_fraction == pytest.approx(1 / 6)
    assert cmp.dynamic.clip.n_clipped == 0  # min-max ranges of its own never clip
    assert cmp.static.metrics.max_abs == pytest.approx(2.0, abs=step)  # 3.0 came back as ~1
    assert cmp.static.metrics.mse > cmp.dynamic.metrics.mse
    assert cmp.static.clip == clip_stats(held, cmp.static.quantized)
    again = compare_static_dynamic(held, PER_FEATURE, ranges=cmp.ranges)
    assert torch.equal(again.static.quantized.codes, cmp.static.quantized.codes)


def test_layer_ranges_are_shared_by_layers_that_share_an_input(gen):
    x, y = torch.randn(10, 4, generator=gen), torch.randn(10, 8, generator=gen)
    cap = ActivationCapture(inputs={"q": x, "k": x, "up": y}, seconds=0.0)
    ranges = calibrate_layer_ranges(cap, PER_TENSOR)
    assert list(ranges) == ["q", "k", "up"] and ranges["q"] is ranges["k"]
    assert ranges["up"].n_features == 8


@pytest.mark.parametrize(
    ("cfg", "match"),
    [
        (QuantConfig(granularity=PerChannel(axis=0)), "per-token .* always dynamic"),
        (QuantConfig(granularity=PerChannel(axis=-2)), "per-token"),
        (QuantConfig(granularity=PerGroup(2)), "has no activation name"),
    ],
)
def test_static_ranges_refuse_per_token_and_groups(gen, cfg, match):
    with pytest.raises(ValueError, match=match):
        calibrate_ranges(torch.randn(8, 4, generator=gen), cfg)


def test_bad_ranges_name_the_value(gen):
    calib, x = torch.randn(8, 4, generator=gen), torch.randn(8, 4, generator=gen)
    r = calibrate_ranges(calib, PER_TENSOR)
    with pytest.raises(ValueError, match=r"calibrated on 4 features; x has 3 \(shape \(8, 3\)\)"):
        quantize_activation(x[:, :3], PER_TENSOR, r)
    with pytest.raises(ValueError, match="calibrated under int8 sym per-tensor, not int8 asym"):
        quantize_activation(x, PER_FEATURE, r)
    with pytest.raises(TypeError, match="ranges must be ActivationRanges, got BlockRange"):
        quantize_activation(x, PER_TENSOR, r.ranges)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cfg must be a QuantConfig, got str"):
        calibrate_ranges(calib, "int8")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one of calibration"):
        compare_static_dynamic(x, PER_TENSOR)
    with pytest.raises(ValueError, match="exactly one of calibration"):
        compare_static_dynamic(x, PER_TENSOR, calibration=calib, ranges=r)
    with pytest.raises(ValueError, match="calibration has 2 features and x 4"):
        compare_static_dynamic(x, PER_TENSOR, calibration=calib[:, :2])
    with pytest.raises(TypeError, match="capture must be an ActivationCapture"):
        calibrate_layer_ranges({"q": x}, PER_TENSOR)  # type: ignore[arg-type]
