"""quantize(..., range_mask=m): only the marked cells choose the ranges."""

from __future__ import annotations

import pytest
import torch

from quant_core import Mode, PerChannel, PerGroup, PerTensor, QuantConfig, RangeMethod, quantize

# Every test here runs on both backends (see conftest.backend).
pytestmark = pytest.mark.usefixtures("backend")

METHODS = [
    (RangeMethod.MINMAX, 99.9),
    (RangeMethod.PERCENTILE, 90.0),
    (RangeMethod.MSE, 99.9),
]


@pytest.mark.parametrize(("method", "pct"), METHODS, ids=lambda v: getattr(v, "value", v))
@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.value)
def test_masked_range_equals_the_range_of_the_kept_cells(
    method: RangeMethod, pct: float, mode: Mode, gen: torch.Generator
) -> None:
    # Per channel: each row's kept cells alone, quantized per tensor, must give the same
    # scale and zero point as the masked row; the dropped cells hold wild values.
    x = torch.randn(6, 40, generator=gen)
    mask = torch.rand(6, 40, generator=gen) > 0.3
    wild = torch.where(mask, x, 1000.0)
    cfg = QuantConfig(4, mode, PerChannel(0), range_method=method, percentile=pct)
    masked = quantize(wild, cfg, range_mask=mask)
    for row in range(6):
        alone = quantize(
            x[row][mask[row]],
            QuantConfig(4, mode, PerTensor(), range_method=method, percentile=pct),
        )
        assert float(masked.scale[row]) == float(alone.scale)
        assert int(masked.zero_point[row]) == int(alone.zero_point)


def test_all_true_mask_changes_nothing(gen: torch.Generator) -> None:
    x = torch.randn(8, 32, generator=gen)
    for method in RangeMethod:
        mode = Mode.SYMMETRIC if method is RangeMethod.ABSMEAN else Mode.ASYMMETRIC
        cfg = QuantConfig(3, mode, PerGroup(8), range_method=method, percentile=95.0)
        a = quantize(x, cfg)
        b = quantize(x, cfg, range_mask=torch.ones_like(x, dtype=torch.bool))
        assert torch.equal(a.scale, b.scale) and torch.equal(a.codes, b.codes)


def test_block_without_kept_cells_uses_all(gen: torch.Generator) -> None:
    x = torch.randn(2, 16, generator=gen)
    mask = torch.ones_like(x, dtype=torch.bool)
    mask[1] = False
    masked = quantize(x, QuantConfig(4, granularity=PerChannel(0)), range_mask=mask)
    plain = quantize(x, QuantConfig(4, granularity=PerChannel(0)))
    assert torch.equal(masked.scale, plain.scale)


@pytest.mark.parametrize(
    ("mask", "error", "match"),
    [
        (torch.ones(3, 4), TypeError, "bool"),
        (torch.ones(4, 3, dtype=torch.bool), ValueError, "shape"),
    ],
)
def test_bad_range_mask(mask: torch.Tensor, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        quantize(torch.randn(3, 4), QuantConfig(4), range_mask=mask)


def test_percentile_ranks_by_hand() -> None:
    # 200 distinct values 0..199, asymmetric percentile 95: the range is the 10th and the
    # 190th smallest (ranks ceil(0.05 * 200) and ceil(0.95 * 200)), i.e. [9, 189].
    x = torch.arange(200, dtype=torch.float32)
    qt = quantize(x, QuantConfig(8, Mode.ASYMMETRIC, range_method="percentile", percentile=95.0))
    assert qt.chosen_range is not None
    assert float(qt.chosen_range.lo) == 9.0 and float(qt.chosen_range.hi) == 189.0
    masked = quantize(
        x,
        QuantConfig(8, Mode.ASYMMETRIC, range_method="percentile", percentile=95.0),
        range_mask=torch.ones(200, dtype=torch.bool),
    )
    assert torch.equal(masked.scale, qt.scale)
