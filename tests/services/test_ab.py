"""ab: two schemes on one tensor, with block winners derived by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dashboard.services.compare.ab import (
    Winner,
    WinTotals,
    compare_ab,
    default_block_granularity,
)
from quant_core import (
    Granularity,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    error_metrics,
    quantize,
    storage_cost,
)

INT8_ROWS = QuantConfig(bits=8, granularity=PerChannel(0))
INT2_ROWS = QuantConfig(bits=2, granularity=PerChannel(0))

# Two rows. int2 symmetric per row: qmax = 1, s = max|row|, q = round(x / s) (half to even).
# Row 0, s = 1: x_hat = [1, 0, 0, 0], errors [0, -0.4, 0.2, 0]  -> MSE (0.16 + 0.04) / 4 = 0.05
# Row 1, s = 2: q = round([1, -0.6, 0.3, 0.4]) = [1, -1, 0, 0], x_hat = [2, -2, 0, 0],
#               errors [0, -0.8, -0.6, -0.8]                   -> MSE (0.64 + 0.36 + 0.64) / 4
X = torch.tensor([[1.0, 0.4, -0.2, 0.0], [2.0, -1.2, 0.6, 0.8]])
INT2_ROW_MSE = [0.05, 0.41]


def test_strictly_better_scheme_wins_every_block() -> None:
    ab = compare_ab(X, INT8_ROWS, INT2_ROWS)
    assert ab.block_granularity == PerChannel(0)
    np.testing.assert_allclose(ab.block_mse_b[:, 0], INT2_ROW_MSE, rtol=1e-6)
    # int8: |error| <= s/2 = max|row| / 254, far below the int2 MSEs.
    assert np.all(ab.block_mse_a[:, 0] <= (np.array([1.0, 2.0]) / 254) ** 2)
    assert ab.winner.shape == (2, 1)
    assert np.all(ab.winner == Winner.A)
    assert ab.totals == WinTotals(a=2, b=0, ties=0)
    assert ab.totals.total == 2

    swapped = compare_ab(X, INT2_ROWS, INT8_ROWS)
    assert np.all(swapped.winner == Winner.B)
    assert swapped.totals == WinTotals(a=0, b=2, ties=0)


def test_blocks_split_between_win_and_tie() -> None:
    # A: int2 sym groups of 2; B: int2 sym per tensor. Blocks: groups of 2.
    # Group 0 [1, 0.5]: A s=1 -> [1, 0] (0.5 rounds to even 0), MSE 0.125;
    #                   B s=4 -> [0, 0], MSE (1 + 0.25) / 2 = 0.625.  A wins.
    # Group 1 [4, 2]:   A s=4 -> [4, 0], MSE 2; B s=4 -> [4, 0], MSE 2. Tie.
    x = torch.tensor([[1.0, 0.5, 4.0, 2.0]])
    ab = compare_ab(x, QuantConfig(bits=2, granularity=PerGroup(2)), QuantConfig(bits=2))
    assert ab.block_granularity == PerGroup(2)
    np.testing.assert_allclose(ab.block_mse_a, [[0.125, 2.0]])
    np.testing.assert_allclose(ab.block_mse_b, [[0.625, 2.0]])
    assert ab.winner.tolist() == [[Winner.A, Winner.TIE]]
    assert ab.totals == WinTotals(a=1, b=0, ties=1)


def test_identical_schemes_tie_everywhere_and_differ_by_zero() -> None:
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    cfg = QuantConfig(bits=4, granularity=PerGroup(4))
    ab = compare_ab(x, cfg, cfg)
    assert ab.totals == WinTotals(a=0, b=0, ties=12)
    assert not np.any(ab.abs_error_difference())


def test_exact_schemes_tie() -> None:
    x = torch.tensor([[1.0, -1.0, 0.0, 1.0]])  # on both grids: int2 s=1 and int8 s=1/127
    ab = compare_ab(x, QuantConfig(bits=2), QuantConfig(bits=8), PerTensor())
    assert ab.totals == WinTotals(a=0, b=0, ties=1)
    assert ab.metrics_a.mse == ab.metrics_b.mse == 0.0


def test_errors_metrics_and_storage_match_quant_core() -> None:
    x = torch.randn(4, 3, 8, generator=torch.Generator().manual_seed(2))
    m = x.reshape(4, 24)  # the explorer's view of a [4, 3, 8] tensor
    cfg_a = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(4))
    cfg_b = QuantConfig(bits=3, granularity=PerChannel(1))
    ab = compare_ab(x, cfg_a, cfg_b)
    for cfg, err, metrics, storage in (
        (cfg_a, ab.error_a, ab.metrics_a, ab.storage_a),
        (cfg_b, ab.error_b, ab.metrics_b, ab.storage_b),
    ):
        x_hat = quantize(m, cfg).dequantize()
        assert err.dtype == np.float32
        assert err.shape == (4, 24)
        np.testing.assert_array_equal(err, (m - x_hat).numpy())
        assert metrics == error_metrics(m, x_hat)
        assert storage == storage_cost(m.shape, cfg)
    diff = ab.abs_error_difference()
    np.testing.assert_array_equal(diff, np.abs(ab.error_a) - np.abs(ab.error_b))
    assert ab.max_abs_error == max(np.abs(ab.error_a).max(), np.abs(ab.error_b).max())
    # Group blocks of A keep their [rows, C/g] layout; block MSE is the mean of the squares.
    assert ab.winner.shape == (4, 6)
    expected = (ab.error_a.astype(np.float64) ** 2).reshape(4, 6, 4).mean(axis=2)
    np.testing.assert_allclose(ab.block_mse_a, expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (PerGroup(4), PerChannel(0), PerGroup(4)),
        (PerTensor(), PerGroup(2), PerGroup(2)),
        (PerGroup(4), PerGroup(2), PerGroup(4)),
        (PerTensor(), PerChannel(1), PerChannel(0)),
        (PerTensor(), PerTensor(), PerChannel(0)),
    ],
)
def test_default_block_granularity(a: Granularity, b: Granularity, expected: Granularity) -> None:
    cfg_a, cfg_b = QuantConfig(granularity=a), QuantConfig(granularity=b)
    assert default_block_granularity(cfg_a, cfg_b) == expected


def test_caller_chosen_blocks() -> None:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3))
    ab = compare_ab(x, QuantConfig(bits=4), QuantConfig(bits=4, granularity=PerGroup(4)), None)
    assert ab.winner.shape == (4, 2)
    per_col = compare_ab(x, QuantConfig(bits=4), QuantConfig(bits=3), PerChannel(1))
    assert per_col.winner.shape == (8, 1)
    whole = compare_ab(x, QuantConfig(bits=8), QuantConfig(bits=2), PerTensor())
    assert whole.winner.tolist() == [[Winner.A]]


def test_one_d_tensor_is_one_row() -> None:
    x = torch.linspace(-1, 1, 16)
    ab = compare_ab(x, QuantConfig(bits=8), QuantConfig(bits=2, granularity=PerGroup(4)))
    assert ab.error_a.shape == (1, 16)
    assert ab.winner.shape == (1, 4)


def test_misfits_raise_naming_the_scheme() -> None:
    x = torch.randn(4, 6)
    with pytest.raises(ValueError, match="scheme B"):
        compare_ab(x, QuantConfig(), QuantConfig(granularity=PerGroup(4)), PerChannel(0))
    with pytest.raises(ValueError, match="group size 4"):
        compare_ab(x, QuantConfig(), QuantConfig(), PerGroup(4))
    with pytest.raises(ValueError, match="NaN"):
        compare_ab(torch.tensor([float("nan"), 1.0]), QuantConfig(), QuantConfig())


def test_n_d_tensor_is_compared_on_the_explorers_view() -> None:
    # [2, 3, 5] is drawn as [2, 15] on the explorer, so A/B quantizes that matrix too.
    x = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(1))
    ab = compare_ab(x, QuantConfig(bits=4), QuantConfig(bits=4, granularity=PerGroup(5)))
    assert ab.shape == (2, 3, 5)
    assert ab.error_a.shape == (2, 15)
    assert ab.winner.shape == (2, 3)
    with pytest.raises(ValueError):
        compare_ab(torch.tensor(1.0), QuantConfig(), QuantConfig())
