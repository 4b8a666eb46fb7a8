"""Non-finite summaries, finite-only preparation and 2-D views."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.services.sources import values
from dashboard.services.sources.values import fill_nonfinite, nonfinite_summary, to_2d_view
from quant_core import PerChannel, PerGroup, PerTensor, layout_for

NAN, INF = math.nan, math.inf


# ---------------------------------------------------------------------------------------
# nonfinite_summary


def test_summary_counts_and_positions() -> None:
    x = torch.tensor([[1.0, NAN, 3.0], [INF, 5.0, -INF]])
    s = nonfinite_summary(x)
    assert (s.n_nan, s.n_inf, s.n_total, s.n_finite) == (1, 2, 6, 3)
    assert s.first_positions == ((0, 1), (1, 0), (1, 2))
    assert torch.equal(s.mask, ~torch.isfinite(x))
    assert not s.all_finite
    assert s.describe() == "1 NaN and 2 Inf among 6 values, first at (0, 1), (1, 0), (1, 2)"


def test_summary_of_finite_integer_and_zero_d_tensors() -> None:
    s = nonfinite_summary(torch.ones(3, 4))
    assert s.all_finite and s.first_positions == () and s.describe() == "all 12 values are finite"
    assert nonfinite_summary(torch.arange(5)).all_finite
    zero_d = nonfinite_summary(torch.tensor(NAN))
    assert zero_d.n_nan == 1 and zero_d.first_positions == ((),)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_summary_other_float_dtypes(dtype: torch.dtype) -> None:
    s = nonfinite_summary(torch.tensor([NAN, 1.0, INF], dtype=dtype))
    assert (s.n_nan, s.n_inf) == (1, 1) and s.first_positions == ((0,), (2,))


def test_summary_keeps_ten_positions_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(values, "_CHUNK", 7)  # many chunks, positions split across them
    x = torch.zeros(4, 5, 6)
    flat = [3, 8, 13, 20, 21, 22, 50, 51, 90, 100, 101, 119]
    x.view(-1)[flat] = NAN
    s = nonfinite_summary(x)
    assert s.n_nan == 12
    expected = tuple((i // 30, i // 6 % 5, i % 6) for i in flat[:10])
    assert s.first_positions == expected
    assert s.describe().endswith(", …")


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 9),
    st.integers(1, 9),
    st.data(),
    st.sampled_from([NAN, INF, -INF]),
    st.sampled_from([torch.float32, torch.float16, torch.float64]),
)
def test_summary_finds_one_bad_value_anywhere(
    rows: int, cols: int, data: st.DataObject, bad: float, dtype: torch.dtype
) -> None:
    """One NaN or Inf at any cell, among large finite values (a fast path that tells a finite
    tensor from its extremes must not miss it): the counts and mask a direct scan gives."""
    x = (torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows * cols)) * 1e3).to(
        dtype
    )
    at = data.draw(st.tuples(st.integers(0, rows - 1), st.integers(0, cols - 1)))
    x[at] = bad
    s = nonfinite_summary(x)
    assert (s.n_nan, s.n_inf) == ((1, 0) if math.isnan(bad) else (0, 1))
    assert s.first_positions == (at,)
    assert torch.equal(s.mask, ~torch.isfinite(x))
    clean = nonfinite_summary(torch.where(torch.isfinite(x), x, torch.zeros((), dtype=dtype)))
    assert clean.all_finite and not clean.mask.any() and clean.mask.shape == x.shape


def test_summary_refuses_non_tensors_and_complex() -> None:
    with pytest.raises(TypeError):
        nonfinite_summary([1.0, 2.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="complex"):
        nonfinite_summary(torch.ones(2, dtype=torch.complex64))


# ---------------------------------------------------------------------------------------
# fill_nonfinite


def test_fill_uses_zero_inside_the_range_and_the_nearest_end_outside() -> None:
    filled = fill_nonfinite(torch.tensor([-1.0, NAN, 3.0, INF]))
    assert filled.tensor.tolist() == [-1.0, 0.0, 3.0, 0.0]
    assert filled.finite_mask.tolist() == [True, False, True, False]
    assert filled.n_filled == 2
    assert fill_nonfinite(torch.tensor([2.0, NAN, 5.0])).tensor.tolist() == [2.0, 2.0, 5.0]
    assert fill_nonfinite(torch.tensor([-7.0, -INF, -3.0])).tensor.tolist() == [-7.0, -3.0, -3.0]


def test_fill_per_channel_keeps_each_rows_range() -> None:
    x = torch.tensor([[2.0, NAN, 5.0], [-4.0, -1.0, INF], [NAN, NAN, NAN]])
    per_tensor = fill_nonfinite(x).tensor
    assert per_tensor[0, 1] == 0.0  # inside the global range, but stretches row 0 to [0, 5]
    per_row = fill_nonfinite(x, PerChannel(0)).tensor
    assert per_row.tolist() == [[2.0, 2.0, 5.0], [-4.0, -1.0, -1.0], [0.0, 0.0, 0.0]]
    per_col = fill_nonfinite(x, PerChannel(1)).tensor
    assert per_col[:, 0].tolist() == [2.0, -4.0, 0.0]


def test_fill_without_nonfinite_returns_the_input() -> None:
    x = torch.randn(3, 4)
    filled = fill_nonfinite(x)
    assert filled.tensor.data_ptr() == x.data_ptr() and torch.equal(filled.tensor, x)
    assert filled.n_filled == 0 and bool(filled.finite_mask.all())


def test_fill_all_nonfinite_is_an_error() -> None:
    with pytest.raises(ValueError, match="all 3 values are NaN or Inf"):
        fill_nonfinite(torch.tensor([NAN, INF, -INF]))


def test_fill_bad_granularity_is_an_error() -> None:
    with pytest.raises(ValueError, match="group size 4 must divide"):
        fill_nonfinite(torch.tensor([[1.0, NAN, 3.0]]), PerGroup(4))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_fill_keeps_dtype(dtype: torch.dtype) -> None:
    filled = fill_nonfinite(torch.tensor([1.0, NAN, 2.0], dtype=dtype))
    assert filled.tensor.dtype == dtype and filled.tensor.tolist() == [1.0, 1.0, 2.0]


GRANULARITIES = [PerTensor(), PerChannel(0), PerChannel(1), PerChannel(-1), PerGroup(2)]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 5),
    cols=st.sampled_from([2, 4, 6]),
    granularity=st.sampled_from(GRANULARITIES),
    seed=st.integers(0, 2**16),
    bad_fraction=st.floats(0.0, 0.9),
)
def test_fill_never_changes_any_blocks_finite_range(
    rows: int, cols: int, granularity: object, seed: int, bad_fraction: float
) -> None:
    """Property: every block's min and max over finite cells survive the fill unchanged."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=gen) * 3 + torch.randn(rows, 1, generator=gen) * 5
    bad = torch.rand(rows, cols, generator=gen) < bad_fraction
    kinds = torch.tensor([NAN, INF, -INF])[torch.randint(0, 3, (rows, cols), generator=gen)]
    x = torch.where(bad, kinds, x)
    if bool(bad.all()):
        with pytest.raises(ValueError):
            fill_nonfinite(x, granularity)  # type: ignore[arg-type]
        return
    filled = fill_nonfinite(x, granularity)  # type: ignore[arg-type]
    assert bool(torch.isfinite(filled.tensor).all())
    assert torch.equal(filled.finite_mask, ~bad)
    assert torch.equal(filled.tensor[~bad], x[~bad])
    layout = layout_for(x.shape, granularity)  # type: ignore[arg-type]
    before, after = layout.to_blocks(x), layout.to_blocks(filled.tensor)
    keep = layout.to_blocks(~bad)
    for b in range(layout.n_blocks):
        if bool(keep[b].any()):
            assert after[b].min() == before[b][keep[b]].min()
            assert after[b].max() == before[b][keep[b]].max()
        else:
            assert bool((after[b] == 0).all())


# ---------------------------------------------------------------------------------------
# to_2d_view


def test_view_of_1d_2d_and_nd() -> None:
    v1 = to_2d_view(torch.arange(5.0))
    assert v1.matrix.shape == (1, 5) and v1.original_shape == (5,)
    assert v1.note == "1-D tensor [5] shown as [1, 5]"
    v2 = to_2d_view(torch.ones(3, 4))
    assert v2.matrix.shape == (3, 4) and v2.note == ""
    v4 = to_2d_view(torch.zeros(64, 3, 7, 7))
    assert v4.matrix.shape == (64, 147) and v4.original_shape == (64, 3, 7, 7)
    assert v4.note == "4-D tensor [64, 3, 7, 7] shown as [64, 147]"


def test_view_rows_keep_their_elements() -> None:
    x = torch.arange(24.0).reshape(2, 3, 4)
    assert torch.equal(to_2d_view(x).matrix[1], x[1].flatten())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int8])
def test_view_is_float32(dtype: torch.dtype) -> None:
    assert to_2d_view(torch.ones(2, 2, dtype=dtype)).matrix.dtype == torch.float32


def test_view_refuses_0d_and_empty() -> None:
    with pytest.raises(ValueError, match="0-d tensor"):
        to_2d_view(torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"empty \(shape \[0, 4\]\)"):
        to_2d_view(torch.zeros(0, 4))
