"""code_counts, levels_used, clip_stats against direct counts."""

from __future__ import annotations

import pytest
import torch

from quant_core import (
    Format,
    Mode,
    PerGroup,
    QuantConfig,
    clip_bounds,
    clip_stats,
    code_counts,
    levels_used,
    quantize,
)


@pytest.mark.parametrize("bits", [2, 3, 4, 7, 8, 9, 12, 16])
@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.value)
def test_code_counts_match_a_direct_count(bits: int, mode: Mode, gen: torch.Generator) -> None:
    x = torch.randn(32, 48, generator=gen) * 3
    qt = quantize(x, QuantConfig(bits, mode, PerGroup(16)))
    ref = torch.bincount(qt.codes.reshape(-1).long() - qt.config.qmin, minlength=1 << bits)
    assert torch.equal(code_counts(qt), ref)
    assert levels_used(qt) == int(torch.unique(qt.codes).numel())
    mask = x > 0
    masked = torch.bincount(qt.codes[mask].long() - qt.config.qmin, minlength=1 << bits)
    assert torch.equal(code_counts(qt, mask=mask), masked)


@pytest.mark.parametrize("fmt", [Format.NF4, Format.FP4_E2M1, Format.FP8_E4M3], ids=str)
def test_codebook_code_counts(fmt: Format, gen: torch.Generator) -> None:
    qt = quantize(torch.randn(16, 16, generator=gen), QuantConfig(format=fmt))
    ref = torch.bincount(qt.codes.reshape(-1).long(), minlength=1 << qt.config.bits)
    assert torch.equal(code_counts(qt), ref)


def test_clip_stats_by_hand() -> None:
    # 4-bit symmetric with a 99% percentile range on 100 values with one spike: the spike
    # lies beyond the representable range by more than half a step, nothing else does.
    x = torch.cat([torch.linspace(-1, 1, 99), torch.tensor([50.0])]).reshape(1, -1)
    qt = quantize(x, QuantConfig(4, range_method="percentile", percentile=99.0))
    stats = clip_stats(x, qt)
    bounds = clip_bounds(qt)
    assert stats.n_clipped_high == int((x > bounds.hi).sum()) == 1
    assert stats.n_clipped_low == 0
    assert stats.n_saturated == int(((qt.codes == -8) | (qt.codes == 7)).sum())
