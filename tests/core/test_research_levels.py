"""The research quantizers' level tables rebuilt from the numbers a stored tensor keeps:
``minmax_levels(x_min, x_max, ...)`` and ``dorefa_levels(bits, variant, scale)`` give the
quantizers' own levels bit for bit, so codes plus those numbers dequantize exactly."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import quant_core
from quant_core import QkVariant, dorefa_quantize_weights, minmax_levels_quantize
from quant_core.qk import q_k
from quant_core.research import dorefa_levels, minmax_levels

F32_MAX = torch.finfo(torch.float32).max


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(
        st.floats(-F32_MAX, F32_MAX, width=32, allow_nan=False, allow_infinity=False),
        min_size=1,
        max_size=30,
    ),
    bits=st.integers(1, 8),
    variant=st.sampled_from(list(QkVariant)),
)
def test_minmax_levels_rebuild_the_quantizers_levels_exactly(values, bits, variant):
    # Spans up to 2 * float32 max take the float64 path in both; the table must match it.
    x = torch.tensor(values, dtype=torch.float32)
    r = minmax_levels_quantize(x, bits, variant)
    table = minmax_levels(r.x_min, r.x_max, bits, variant)
    assert torch.equal(table, r.levels)
    assert torch.equal(table[r.codes], r.dequantized)


@pytest.mark.parametrize("variant", list(QkVariant), ids=lambda v: v.value)
@pytest.mark.parametrize("rescale", [False, True], ids=["plain", "rescaled"])
@pytest.mark.parametrize("bits", [1, 2, 3, 8])
def test_dorefa_levels_rebuild_the_quantizers_levels_exactly(variant, rescale, bits, gen):
    w = torch.randn(9, 11, generator=gen) * 0.3
    r = dorefa_quantize_weights(w, bits, rescale=rescale, variant=variant)
    table = dorefa_levels(bits, variant, r.scale)
    assert torch.equal(table, r.levels)
    assert torch.equal(table[r.codes], r.dequantized)


def test_level_tables_by_hand():
    assert minmax_levels(0.0, 3.0, 2).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert minmax_levels(0.0, 3.0, 2, "centered").tolist() == [0.375, 1.125, 1.875, 2.625]
    assert minmax_levels(0.0, 4.0, 2, "modified").tolist() == [0.0, 1.0, 2.0, 3.0]  # no 4
    assert dorefa_levels(2, "modified").tolist() == [-1.0, -0.5, 0.0, 0.5]
    assert minmax_levels(2.5, 2.5, 2).tolist() == [2.5] * 4  # a constant tensor
    assert dorefa_levels(2, "centered").tolist() == [-0.75, -0.25, 0.25, 0.75]
    torch.testing.assert_close(dorefa_levels(2), torch.tensor([-1.0, -1 / 3, 1 / 3, 1.0]))
    assert dorefa_levels(2, scale=2.0).tolist()[::3] == [-2.0, 2.0]


def test_minmax_levels_reject_a_bad_range():
    with pytest.raises(ValueError, match=r"x_min=3\.0, x_max=1\.0"):
        minmax_levels(3.0, 1.0, 2)
    with pytest.raises(ValueError, match=r"x_max=inf"):
        minmax_levels(0.0, float("inf"), 2)
    with pytest.raises(ValueError, match=r"unknown q_k variant 'floor'"):
        minmax_levels(0.0, 1.0, 2, "floor")
    with pytest.raises(ValueError, match=r"bits=0"):
        dorefa_levels(0)


def test_q_k_lives_in_qk_and_is_still_exported():
    assert quant_core.q_k is q_k
    assert quant_core.QkVariant is QkVariant
