"""sweep: grid expansion, running schemes, the table, and the Pareto frontier."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from dashboard.services.compare.frontier import ErrorAxis, pareto_mask
from dashboard.services.compare.sweep import (
    TABLE_COLUMNS,
    SchemeGrid,
    expand_grid,
    run_sweep,
    sweep_table,
)
from dashboard.services.display.labels import scheme_label
from dashboard.services.state.scheme import GranularityKind, config_from_scheme_id, scheme_id
from quant_core import (
    Algorithm,
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    ScaleDtype,
    ZeroPoint,
    clip_stats,
    error_metrics,
    quantize,
    storage_cost,
)

TENSOR, CHANNEL, GROUP = GranularityKind.TENSOR, GranularityKind.CHANNEL, GranularityKind.GROUP


@pytest.fixture(scope="module")
def x() -> torch.Tensor:
    return torch.randn(16, 64, generator=torch.Generator().manual_seed(0))


# --- grid -----------------------------------------------------------------------------------


def test_docstring_example_counts() -> None:
    grid = SchemeGrid(
        bits=(4, 8),
        modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
        kinds=(TENSOR, GROUP),
        group_sizes=(32, 64),
        formats=(Format.INT, Format.NF4),
    )
    exp = expand_grid(grid, (8, 64))
    assert exp.skipped == ()
    ints = [c for c in exp.configs if c.format is Format.INT]
    nf4 = [c for c in exp.configs if c.format is Format.NF4]
    assert len(ints) == 2 * 2 * (1 + 2)
    assert [c.granularity for c in nf4] == [PerTensor(), PerGroup(32), PerGroup(64)]
    assert len(set(exp.configs)) == len(exp.configs)


def test_non_int_formats_ignore_bits_and_modes() -> None:
    grid = SchemeGrid(
        bits=(2, 3, 4, 8),
        modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
        kinds=(TENSOR,),
        formats=(Format.NF4, Format.FP4_E2M1, Format.FP8_E4M3, Format.FP8_E5M2),
    )
    exp = expand_grid(grid, (4, 8))
    assert [(c.format, c.bits, c.mode) for c in exp.configs] == [
        (Format.NF4, 4, Mode.SYMMETRIC),
        (Format.FP4_E2M1, 4, Mode.SYMMETRIC),
        (Format.FP8_E4M3, 8, Mode.SYMMETRIC),
        (Format.FP8_E5M2, 8, Mode.SYMMETRIC),
    ]


def test_group_sizes_only_apply_to_per_group_and_duplicates_collapse() -> None:
    grid = SchemeGrid(
        bits=(4, 4, 8),
        modes=(Mode.SYMMETRIC, Mode.SYMMETRIC),
        kinds=(TENSOR, CHANNEL, TENSOR),
        group_sizes=(16, 32, 16),
    )
    exp = expand_grid(grid, (4, 64))
    assert [(c.bits, c.granularity) for c in exp.configs] == [
        (4, PerTensor()),
        (8, PerTensor()),
        (4, PerChannel(0)),
        (8, PerChannel(0)),
    ]


def test_base_supplies_the_other_fields() -> None:
    base = QuantConfig(
        range_method=RangeMethod.PERCENTILE, percentile=99.0, seed=7, scale_dtype=ScaleDtype.FP16
    )
    exp = expand_grid(SchemeGrid(bits=(4,), base=base), (4, 8))
    (cfg,) = exp.configs
    assert cfg == QuantConfig(
        bits=4,
        range_method=RangeMethod.PERCENTILE,
        percentile=99.0,
        seed=7,
        scale_dtype=ScaleDtype.FP16,
    )


def test_schemes_that_do_not_fit_the_shape_are_skipped_with_reasons() -> None:
    grid = SchemeGrid(
        bits=(4,),
        kinds=(CHANNEL, GROUP),
        group_sizes=(16, 48),
        axis=2,
        formats=(Format.INT, Format.NF4),
    )
    exp = expand_grid(grid, (8, 64))
    assert [c.granularity for c in exp.configs] == [PerGroup(16), PerGroup(16)]
    reasons = {(s.config.format, s.config.granularity): s.reason for s in exp.skipped}
    assert set(reasons) == {
        (f, g) for f in (Format.INT, Format.NF4) for g in (PerChannel(2), PerGroup(48))
    }
    assert "48" in reasons[(Format.INT, PerGroup(48))]
    assert "64" in reasons[(Format.INT, PerGroup(48))]
    assert "axis 2" in reasons[(Format.NF4, PerChannel(2))]
    assert all(s.label == scheme_label(s.config) for s in exp.skipped)


def test_empty_choices_give_no_schemes() -> None:
    assert expand_grid(SchemeGrid(bits=()), (4, 4)).configs == ()
    assert expand_grid(SchemeGrid(kinds=(GROUP,), group_sizes=()), (4, 4)).configs == ()


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"bits": (1,)}, ValueError),
        ({"bits": (17,)}, ValueError),
        ({"bits": [4]}, TypeError),
        ({"modes": ("symmetric",)}, TypeError),
        ({"kinds": ("group",)}, TypeError),
        ({"formats": ("nf4",)}, TypeError),
        ({"group_sizes": (0,)}, ValueError),
        ({"axis": 1.5}, TypeError),
        ({"base": None}, TypeError),
        ({"algorithms": ("gptq",)}, TypeError),
        ({"algorithms": [Algorithm.RTN]}, TypeError),
    ],
)
def test_grid_rejects_bad_values(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        SchemeGrid(**kwargs)  # type: ignore[arg-type]


# --- run_sweep ------------------------------------------------------------------------------


def test_sweep_matches_quant_core_directly(x: torch.Tensor) -> None:
    configs = [
        QuantConfig(bits=4, granularity=PerGroup(16)),
        QuantConfig(bits=3, mode=Mode.ASYMMETRIC, granularity=PerChannel(0)),
        QuantConfig(format=Format.NF4, granularity=PerGroup(32)),
        QuantConfig(bits=4, range_method=RangeMethod.PERCENTILE, percentile=90.0),
    ]
    result = run_sweep(x, configs)
    assert result.shape == (16, 64)
    assert result.skipped == ()
    assert [r.config for r in result.results] == configs
    for r in result.results:
        qt = quantize(x, r.config)
        assert r.metrics == error_metrics(x, qt.dequantize())
        assert r.clip == clip_stats(x, qt)
        assert r.storage == storage_cost(x.shape, r.config)
        assert r.scheme_id == scheme_id(r.config)
        assert r.label == scheme_label(r.config)


def test_progress_is_reported_from_zero_to_total(x: torch.Tensor) -> None:
    calls: list[tuple[int, int]] = []
    configs = [QuantConfig(bits=b) for b in (2, 4, 8)]
    run_sweep(x, configs, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_misfit_configs_are_skipped_and_duplicates_run_once(x: torch.Tensor) -> None:
    good = QuantConfig(bits=4)
    bad = QuantConfig(bits=4, granularity=PerGroup(48))
    result = run_sweep(x, [good, bad, good])
    assert [r.config for r in result.results] == [good]
    assert [s.config for s in result.skipped] == [bad]
    assert "48" in result.skipped[0].reason


def test_bad_input_raises_instead_of_skipping() -> None:
    with pytest.raises(ValueError, match="NaN"):
        run_sweep(torch.tensor([1.0, float("nan")]), [QuantConfig()])
    with pytest.raises(TypeError):
        run_sweep(torch.arange(4), [QuantConfig()])
    with pytest.raises(TypeError):
        run_sweep(torch.ones(4), ["int8"])  # type: ignore[list-item]


def test_table_columns_values_and_ids(x: torch.Tensor) -> None:
    configs = [
        QuantConfig(bits=4, granularity=PerGroup(32)),
        QuantConfig(bits=8),
        QuantConfig(bits=2),
        QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(16)),
    ]
    table = sweep_table(run_sweep(x, configs))
    assert tuple(table.columns) == TABLE_COLUMNS
    assert list(table.index) == list(table["scheme_id"])
    assert [config_from_scheme_id(s) for s in table["scheme_id"]] == configs
    g32 = table.iloc[0]
    # int4 symmetric, fp32 scale per 32 elements: 4 + 32/32 = 5 bits per element
    assert g32["bits_per_element"] == 5.0
    assert g32["total_bytes"] == 16 * 64 * 5 // 8
    assert g32["ratio_vs_fp32"] == pytest.approx(32 / 5)
    # int4 asymmetric g16: 4 + (32 + 4)/16 = 6.25
    assert table.iloc[3]["bits_per_element"] == 6.25
    groups = [None if pd.isna(v) else int(v) for v in table["group_size"]]
    assert groups == [32, None, None, 16]
    assert list(table["granularity"]) == ["group", "tensor", "tensor", "group"]
    assert list(table["on_frontier"]) == pareto_mask(
        table["bits_per_element"].tolist(), table["mse"].tolist()
    )
    # More bits per tensor never hurt here: the int8 row is on the frontier.
    assert bool(table.iloc[1]["on_frontier"])
    sorted_by_mse = table.sort_values("mse")
    assert sorted_by_mse.iloc[0]["bits"] == 8


def test_scale_column_says_how_shipped_formats_store_their_scales() -> None:
    """A two-level format's scales are not its float dtype: MXFP4's are 8-bit E8M0
    exponents, not fp32; Q4_K's 6-bit integers under an fp16 super-block scale."""
    w = torch.randn(128, 256, generator=torch.Generator().manual_seed(1))
    names = ["Q4_0", "Q4_K", "Q6_K", "MXFP4", "NVFP4", "NVFP4_GGUF", "NF4_DQ", "FP8_BLOCK"]
    table = sweep_table(run_sweep(w, [QuantConfig.from_name(n) for n in names]))
    assert dict(zip(table["scheme"], table["scale_dtype"], strict=True)) == {
        "Q4_0": "fp16",
        "Q4_K": "u6/256:fp16",
        "Q6_K": "s8/256:fp16",
        "MXFP4": "e8m0",
        "NVFP4": "e4m3+fp32",
        "NVFP4_GGUF": "e4m3",
        "NF4_DQ": "dq8",
        "FP8_BLOCK": "fp32",
    }
    plain = sweep_table(run_sweep(w, [QuantConfig(bits=4, scale_dtype=ScaleDtype.BF16)]))
    assert list(plain["scale_dtype"]) == ["bf16"]


def test_empty_sweep_gives_empty_table(x: torch.Tensor) -> None:
    table = sweep_table(run_sweep(x, []))
    assert tuple(table.columns) == TABLE_COLUMNS
    assert len(table) == 0


# --- pareto ---------------------------------------------------------------------------------


def test_pareto_docstring_example() -> None:
    assert pareto_mask([4, 4, 8, 8], [1.0, 2.0, 0.5, 1.0]) == [True, False, True, False]


def test_pareto_ties_keep_every_copy_and_maximise_flips() -> None:
    assert pareto_mask([4, 4, 8], [1.0, 1.0, 1.0]) == [True, True, False]
    assert pareto_mask([4, 8], [10.0, 20.0], minimize=False) == [True, True]
    assert pareto_mask([4, 8], [20.0, 10.0], minimize=False) == [True, False]
    assert pareto_mask([4, 8], [math.inf, 20.0], minimize=False) == [True, False]
    assert pareto_mask([], []) == []


def test_pareto_rejects_nan_and_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="NaN"):
        pareto_mask([1.0, 2.0], [1.0, math.nan])
    with pytest.raises(ValueError, match="length"):
        pareto_mask([1.0, 2.0], [1.0])


def _dominates(b: list[float], e: list[float], j: int, i: int, minimize: bool) -> bool:
    ej, ei = (e[j], e[i]) if minimize else (-e[j], -e[i])
    return b[j] <= b[i] and ej <= ei and (b[j] < b[i] or ej < ei)


points = st.lists(
    st.tuples(st.integers(2, 10).map(float), st.integers(0, 6).map(float)), max_size=30
)


@given(points, st.booleans())
def test_pareto_frontier_is_exactly_the_non_dominated_points(
    pts: list[tuple[float, float]], minimize: bool
) -> None:
    b = [p[0] for p in pts]
    e = [p[1] for p in pts]
    mask = pareto_mask(b, e, minimize=minimize)
    n = len(pts)
    front = [i for i in range(n) if mask[i]]
    for i in front:
        assert not any(_dominates(b, e, j, i, minimize) for j in range(n))
    for i in range(n):
        if not mask[i]:
            assert any(_dominates(b, e, j, i, minimize) for j in front)


def test_error_axis_directions() -> None:
    assert ErrorAxis.MSE.minimize and not ErrorAxis.SQNR_DB.minimize


def test_sqnr_and_mse_frontiers_agree_on_one_tensor(x: torch.Tensor) -> None:
    grid = SchemeGrid(
        bits=(2, 3, 4, 6, 8),
        modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
        kinds=(TENSOR, CHANNEL, GROUP),
        group_sizes=(16, 32),
        formats=(Format.INT, Format.NF4),
    )
    table = sweep_table(run_sweep(x, expand_grid(grid, x.shape).configs))
    bits = table["bits_per_element"].to_numpy()
    by_mse = pareto_mask(bits, table["mse"].to_numpy())
    by_sqnr = pareto_mask(bits, table["sqnr_db"].to_numpy(), minimize=False)
    assert by_mse == by_sqnr
    assert 1 < sum(by_mse) < len(table)
    assert np.all(np.isfinite(table["sqnr_db"].to_numpy()))


def test_zero_point_conventions_multiply_asymmetric_int_configs_only() -> None:
    grid = SchemeGrid(
        bits=(4,),
        modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
        kinds=(GROUP,),
        group_sizes=(32,),
        formats=(Format.INT, Format.NF4),
        zero_points=tuple(ZeroPoint),
    )
    configs = expand_grid(grid, (8, 64)).configs
    # int sym (1) + int asym under 3 conventions + NF4 (1)
    assert len(configs) == 5
    asym = [c for c in configs if c.format is Format.INT and c.mode is Mode.ASYMMETRIC]
    assert {c.zero_point for c in asym} == set(ZeroPoint)
    assert all(c.zero_point is ZeroPoint.INCLUDE_ZERO for c in configs if c not in asym)
    with pytest.raises(ValueError, match="zero_points is empty"):
        SchemeGrid(zero_points=())
    with pytest.raises(TypeError, match="ZeroPoint"):
        SchemeGrid(zero_points=("float_min",))  # type: ignore[arg-type]


def test_sweep_table_shows_what_each_convention_does_to_one_sign_blocks() -> None:
    # 1 + 0.1 randn: every group of 32 is all positive, so the conventions differ.
    x = 1 + 0.1 * torch.randn(16, 64, generator=torch.Generator().manual_seed(0))
    grid = SchemeGrid(
        bits=(4,),
        modes=(Mode.ASYMMETRIC,),
        kinds=(GROUP,),
        group_sizes=(32,),
        zero_points=tuple(ZeroPoint),
    )
    table = sweep_table(run_sweep(x, expand_grid(grid, x.shape).schemes), "x")
    mse = dict(zip(table["zero_point"], table["mse"], strict=True))
    bits = dict(zip(table["zero_point"], table["bits_per_element"], strict=True))
    # Pinned at qmin, the course's clamped grid covers [0, hi - lo] and misses the data.
    assert mse["course_clamp"] > 100 * mse["include_zero"]
    # The float offset reproduces each block's [lo, hi]: finer steps than [0, hi].
    assert mse["float_min"] < mse["include_zero"]
    # ... and costs its own 32 bits per block (fp32 scale dtype): 1 bit per element here.
    assert bits["float_min"] == pytest.approx(bits["include_zero"] - 4 / 32 + 32 / 32)
