"""code_counts, levels_used, clip_stats and histogram against direct counts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from quant_core import (
    Backend,
    Format,
    Mode,
    PerGroup,
    QuantConfig,
    clip_bounds,
    clip_stats,
    code_counts,
    histogram,
    levels_used,
    quantize,
    use_backend,
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


def test_histogram_by_hand() -> None:
    # 4 bins over [0, 2]: edges 0, 0.5, 1, 1.5, 2; hi itself in the last bin, outside dropped
    v = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.99, 2.0, -0.1, 2.1])
    for backend in Backend:
        with use_backend(backend, min_elements=1):
            assert histogram(v, 4, 0.0, 2.0).tolist() == [2, 2, 1, 2], backend


@settings(max_examples=80, deadline=None)
@given(
    arr=hnp.arrays(np.float32, st.integers(1, 300), elements=st.floats(-50, 50, width=32)),
    bins=st.integers(1, 120),
)
def test_histogram_matches_a_float64_count_away_from_edges(arr: np.ndarray, bins: int) -> None:
    """Every value lies in its float64 bin, except one within float32 rounding of an edge,
    which may lie in the neighbouring one; totals match; both backends agree exactly."""
    v = torch.from_numpy(arr)
    lo, hi = float(v.min()) - 0.5, float(v.max()) + 0.25
    counts = []
    for backend in Backend:
        with use_backend(backend, min_elements=1):
            counts.append(histogram(v, bins, lo, hi))
    assert torch.equal(counts[0], counts[1])
    pos = (v.double() - lo) * bins / (hi - lo)
    ref = torch.bincount(pos.floor().clamp(0, bins - 1).long(), minlength=bins)
    near_edge = int(((pos - pos.round()).abs() < 1e-4 * bins).sum())
    assert int(counts[0].sum()) == v.numel()
    assert int((counts[0] - ref).abs().sum()) <= 2 * near_edge


@pytest.mark.parametrize(
    ("bins", "lo", "hi"), [(0, 0.0, 1.0), (257, 0.0, 1.0), (4, 1.0, 1.0), (4, 0.0, float("inf"))]
)
def test_histogram_refuses_bad_bins_and_ranges(bins: int, lo: float, hi: float) -> None:
    with pytest.raises(ValueError, match=r"bins|range"):
        histogram(torch.zeros(3), bins, lo, hi)


def test_histogram_of_a_range_wider_than_float32() -> None:
    big = torch.finfo(torch.float32).max
    v = torch.tensor([-big, -big / 2, 0.0, big / 2, big])  # 0.0 on the middle edge: bin 1
    assert histogram(v, 2, -big, big).tolist() == [2, 3]
