"""The research formats in the explorer: the LevelTableTensor dequantizes to the research
output bit for bit, storage counts what a reader needs, the exports round-trip exactly,
the teaching panel's content, and the URL state."""

from __future__ import annotations

import math

import pytest
import torch

from dashboard.services.explorer.exports import (
    packed_codes,
    quantized_safetensors,
    read_quantized_safetensors,
)
from dashboard.services.explorer.research import (
    LevelTableTensor,
    explore_research,
    research_storage,
)
from dashboard.services.state.research import (
    ResearchFormat,
    ResearchScheme,
)
from quant_core import QkVariant, error_metrics
from quant_core.research import dorefa_quantize_weights, minmax_levels_quantize

EPS32 = torch.finfo(torch.float32).eps

SCHEMES = [
    ResearchScheme(fmt, bits, variant, rescale)
    for fmt in ResearchFormat
    for bits in (2, 3, 8)
    for variant in QkVariant
    for rescale in (False, True)
    if fmt is ResearchFormat.DOREFA or not rescale
]


def _matrix(rows: int = 12, cols: int = 20, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 0.8


def _research(x: torch.Tensor, s: ResearchScheme):
    if s.format is ResearchFormat.MINMAX_LEVELS:
        return minmax_levels_quantize(x, s.bits, s.variant)
    return dorefa_quantize_weights(x, s.bits, rescale=s.rescale, variant=s.variant)


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_the_explorer_measures_the_research_output_exactly(scheme: ResearchScheme) -> None:
    x = _matrix()
    ref = _research(x, scheme)
    rexp = explore_research(x, scheme)
    exp, qt = rexp.exploration, rexp.exploration.qt
    assert isinstance(qt, LevelTableTensor)
    assert torch.equal(qt.dequantize(), ref.dequantized)
    assert torch.equal(exp.dequantized, ref.dequantized)
    assert torch.equal(qt.codes.to(torch.int64) - qt.config.qmin, ref.codes)
    assert exp.metrics == error_metrics(x, ref.dequantized)
    assert torch.equal(qt.levels(0), ref.levels)
    rng = qt.representable_range()
    assert float(rng.lo) == float(ref.levels[0]) and float(rng.hi) == float(ref.levels[-1])
    # nothing clips; the saturated count is that of the two end codes
    ends = int((ref.codes == 0).sum() + (ref.codes == (1 << scheme.bits) - 1).sum())
    assert (exp.clip.n_clipped, exp.clip.n_saturated) == (0, ends)
    assert exp.describe() == scheme.describe()


def test_a_level_table_dequantizes_into_out_as_any_quantized_tensor() -> None:
    """``dequantize(out=)`` is the base class's: the values written into ``out`` and ``out``
    returned; a buffer that does not fit is refused the same way."""
    qt = explore_research(_matrix(), SCHEMES[0]).exploration.qt
    buf = torch.full((12, 20), float("nan"))
    assert qt.dequantize(out=buf) is buf
    assert torch.equal(buf, qt.dequantize())
    with pytest.raises(ValueError, match=r"shape \[12, 19\]"):
        qt.dequantize(out=torch.empty(12, 19))


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_scale_and_offset_describe_the_same_levels(scheme: ResearchScheme) -> None:
    """``s q + m`` (the hover's and the formulas' form) is the table to within float32
    rounding: s has two roundings, q s one more, the sum one, and the research table its
    own (about two), each at most eps/2 relative to magnitudes below 2 max|level|."""
    qt = explore_research(_matrix(), scheme).exploration.qt
    q = torch.arange(qt.config.qmin, qt.config.qmax + 1, dtype=torch.float32)
    affine = q * qt.scale + qt.offset
    bound = 4 * EPS32 * 2 * float(qt.table.abs().max())
    assert float((affine - qt.table).abs().max()) <= bound


@pytest.mark.parametrize(
    ("scheme", "extra_bits"),
    [
        (ResearchScheme(ResearchFormat.MINMAX_LEVELS, 3), 64),  # x_min, x_max
        (ResearchScheme(ResearchFormat.DOREFA, 3, rescale=True), 32),  # max|w|
        (ResearchScheme(ResearchFormat.DOREFA, 3, rescale=False), 0),  # levels fixed by k
    ],
    ids=["minmax", "dorefa-rescaled", "dorefa-plain"],
)
def test_storage_counts_what_a_reader_needs(scheme: ResearchScheme, extra_bits: int) -> None:
    report = research_storage((384, 384), scheme)
    assert report.total_bits == 384 * 384 * 3 + extra_bits
    assert report.bits_per_element == pytest.approx(3 + extra_bits / (384 * 384), rel=1e-12)
    assert report.total_bytes == math.ceil(report.total_bits / 8)
    exp = explore_research(_matrix(16, 24), scheme).exploration
    assert exp.storage == research_storage((16, 24), scheme)
    assert exp.storage_note


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_exports_round_trip_exactly_at_the_counted_size(scheme: ResearchScheme) -> None:
    x = _matrix(7, 13)  # 91 codes: not a whole number of bytes at most widths
    exp = explore_research(x, scheme).exploration
    data = quantized_safetensors(exp)
    back = read_quantized_safetensors(data)
    assert isinstance(back, LevelTableTensor) and back.research == scheme
    assert torch.equal(back.dequantize(), exp.dequantized)
    assert torch.equal(back.codes, exp.qt.codes)
    header = int.from_bytes(data[:8], "little")
    # the tensors' bytes: the codes packed (91 codes, rounded up to a byte) and 4 bytes per
    # float32 parameter: the counted total, or one byte more for the packing's rounding
    n_params = exp.storage.n_scales
    tensor_bytes = len(data) - 8 - header
    assert tensor_bytes == math.ceil(91 * scheme.bits / 8) + 4 * n_params
    assert exp.storage.total_bytes <= tensor_bytes <= exp.storage.total_bytes + 1
    assert len(packed_codes(exp)) == math.ceil(91 * scheme.bits / 8)


def test_non_finite_values_are_refused_with_the_reason() -> None:
    x = _matrix()
    x[0, 0] = float("nan")
    with pytest.raises(ValueError, match="needs finite values"):
        explore_research(x, ResearchScheme(ResearchFormat.DOREFA))


def test_constant_tensor_maps_to_itself() -> None:
    exp = explore_research(torch.full((3, 4), 1.5), ResearchScheme(ResearchFormat.MINMAX_LEVELS))
    assert exp.exploration.dequantized.eq(1.5).all() and exp.exploration.metrics.mse == 0.0
