"""The sweep's algorithm dimension: which schemes run where (and why not), output errors on
held-out inputs, the two frontiers, the table's and CSV's columns, and fitting a linked
grid to a tensor."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch
from layer_builders import synthetic_layer

from dashboard.services.compare.frontier import (
    ErrorAxis,
    frontier_difference,
    frontier_mask,
    pareto_mask,
)
from dashboard.services.compare.grid import fit_grid
from dashboard.services.compare.measure import quantize_and_measure
from dashboard.services.compare.sweep import (
    TABLE_COLUMNS,
    SchemeGrid,
    expand_grid,
    range_label,
    run_sweep,
    sweep_table,
)
from dashboard.services.compare.weights import WeightScheme
from dashboard.services.display.labels import scheme_label
from dashboard.services.state.scheme import GranularityKind
from quant_core import (
    Algorithm,
    Format,
    Mode,
    PerChannel,
    PerGroup,
    QuantConfig,
    RangeMethod,
    Rounding,
    ScaleDtype,
    clip_stats,
    storage_cost,
)

TENSOR, CHANNEL, GROUP = GranularityKind.TENSOR, GranularityKind.CHANNEL, GranularityKind.GROUP
ALL = tuple(Algorithm)


@pytest.fixture(scope="module")
def layer():
    return synthetic_layer()


@pytest.fixture(scope="module")
def layer_table(layer) -> pd.DataFrame:
    grid = SchemeGrid(
        bits=(3, 4, 8),
        modes=(Mode.SYMMETRIC,),
        kinds=(CHANNEL, GROUP),
        group_sizes=(16,),
        algorithms=ALL,
        base=QuantConfig(scale_dtype=ScaleDtype.FP16),
    )
    exp = expand_grid(grid, layer.weight.shape, has_calibration=True)
    return sweep_table(run_sweep(layer.weight, exp.schemes, inputs=layer), tensor="syn.weight")


def test_docstring_example_with_algorithms() -> None:
    grid = SchemeGrid(
        bits=(4, 8),
        modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
        kinds=(TENSOR, GROUP),
        group_sizes=(32, 64),
        formats=(Format.INT, Format.NF4),
        algorithms=(Algorithm.RTN, Algorithm.HQQ),
    )
    exp = expand_grid(grid, (8, 64))
    assert len(exp.configs) == 15 and len(exp.schemes) == 27
    assert [s.label for s in exp.skipped] == [f"{scheme_label(c)} · HQQ" for c in exp.configs[-3:]]
    assert all("integer grid" in s.reason for s in exp.skipped)
    # each config's algorithms sit next to each other
    assert [s.algorithm for s in exp.schemes[:4]] == [Algorithm.RTN, Algorithm.HQQ] * 2


def test_calibrated_algorithms_are_skipped_without_a_layer_and_say_why() -> None:
    grid = SchemeGrid(bits=(4,), algorithms=ALL)
    without = expand_grid(grid, (16, 64))
    assert [s.algorithm for s in without.schemes] == [Algorithm.RTN, Algorithm.HQQ]
    reasons = {s.algorithm: s.reason for s in without.skipped}
    assert set(reasons) == {Algorithm.GPTQ, Algorithm.AWQ}
    for reason in reasons.values():
        assert "calibration data" in reason and "this tensor has none" in reason
    with_layer = expand_grid(grid, (16, 64), has_calibration=True)
    assert [s.algorithm for s in with_layer.schemes] == list(ALL) and not with_layer.skipped


def test_stochastic_rounding_and_one_d_shapes_are_rtn_only() -> None:
    base = QuantConfig(rounding=Rounding.STOCHASTIC)
    exp = expand_grid(
        SchemeGrid(bits=(4,), base=base, algorithms=ALL), (4, 8), has_calibration=True
    )
    assert [s.algorithm for s in exp.schemes] == [Algorithm.RTN]
    one_d = expand_grid(SchemeGrid(bits=(4,), algorithms=ALL), (64,), has_calibration=True)
    assert [s.algorithm for s in one_d.schemes] == [Algorithm.RTN, Algorithm.HQQ]
    assert all("2-D" in s.reason for s in one_d.skipped)


def test_rows_match_the_measurement_of_each_scheme(layer, layer_table: pd.DataFrame) -> None:
    assert tuple(layer_table.columns) == TABLE_COLUMNS
    assert len(layer_table) == 3 * 2 * len(ALL)
    for sid, row in layer_table.iterrows():
        scheme = WeightScheme.from_id(str(sid))
        m = quantize_and_measure(layer.weight, scheme, layer)
        assert row["mse"] == m.metrics.mse and row["sqnr_db"] == m.metrics.sqnr_db
        assert row["output_mse"] == m.output.mse and row["output_sqnr_db"] == m.output.sqnr_db
        assert row["n_clipped"] == clip_stats(m.quantized_input, m.result.quantized).n_clipped
        cost = storage_cost(layer.weight.shape, scheme.config)
        assert row["bits_per_element"] == cost.bits_per_element
        assert row["algorithm"] == scheme.algorithm_label and row["scheme"] == scheme.label
        assert row["seconds"] >= 0
    assert set(layer_table["tensor"]) == {"syn.weight"}
    assert set(layer_table["range"]) == {"minmax"} and set(layer_table["scale_dtype"]) == {"fp16"}


def test_both_frontiers_are_marked_and_they_differ(layer_table: pd.DataFrame) -> None:
    bits = layer_table["bits_per_element"].tolist()
    assert list(layer_table["on_frontier"]) == pareto_mask(bits, layer_table["mse"].tolist())
    on_output = pareto_mask(bits, layer_table["output_mse"].tolist())
    assert list(layer_table["on_output_frontier"]) == on_output
    diff = frontier_difference(layer_table)
    assert diff.differ
    algorithms = layer_table.set_index("scheme")["algorithm"]
    # GPTQ/AWQ give up weight error for output error: none is on the weight frontier, and
    # the output frontier holds some of them.
    assert not any(algorithms[s].startswith(("GPTQ", "AWQ")) for s in diff.first_only)
    assert any(algorithms[s].startswith(("GPTQ", "AWQ")) for s in diff.second_only)
    text = diff.describe()
    assert "differ" in text and diff.second_only[0] in text


def test_weights_only_sweep_has_no_output_columns_values() -> None:
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(1))
    table = sweep_table(run_sweep(x, [QuantConfig(bits=4), QuantConfig(bits=8)]))
    assert table["output_mse"].isna().all() and table["on_output_frontier"].isna().all()
    with pytest.raises(ValueError, match="output MSE"):
        frontier_mask(table, ErrorAxis.OUTPUT_MSE)
    assert list(frontier_mask(table, ErrorAxis.MSE)) == list(table["on_frontier"])


def test_csv_has_tensor_algorithm_range_and_scale_dtype_columns(layer_table) -> None:
    csv = layer_table.drop(columns=["scheme_id"]).to_csv(index=False)
    back = pd.read_csv(io.StringIO(csv))
    for col in ("tensor", "algorithm", "range", "scale_dtype", "output_mse", "bits_per_element"):
        assert col in back.columns
    assert back["tensor"].iloc[0] == "syn.weight"
    assert np.allclose(back["output_mse"], layer_table["output_mse"], rtol=1e-12)


def test_range_label() -> None:
    assert range_label(QuantConfig()) == "minmax"
    assert range_label(QuantConfig(range_method=RangeMethod.MSE)) == "mse"
    cfg = QuantConfig(range_method=RangeMethod.PERCENTILE, percentile=99.5)
    assert range_label(cfg) == "percentile 99.5"


def test_sweep_with_another_layers_inputs_raises(layer) -> None:
    with pytest.raises(ValueError, match="is not layer"):
        run_sweep(torch.randn(8, 64), [QuantConfig()], inputs=layer)


def test_gptq_without_inputs_is_skipped_not_raised() -> None:
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(2))
    result = run_sweep(x, [WeightScheme(QuantConfig(bits=4), Algorithm.GPTQ), QuantConfig()])
    assert [r.scheme.algorithm for r in result.results] == [Algorithm.RTN]
    assert "calibration data" in result.skipped[0].reason
    assert result.skipped[0].label.endswith("· GPTQ")


def test_fit_grid_leaves_out_what_the_tensor_cannot_use() -> None:
    grid = SchemeGrid(kinds=(GROUP,), group_sizes=(100, 128), algorithms=(Algorithm.GPTQ,))
    fitted = fit_grid(grid, 384, (Algorithm.RTN, Algorithm.HQQ), (32, 64, 128))
    assert fitted.grid.group_sizes == (128,) and fitted.grid.algorithms == (Algorithm.RTN,)
    assert fitted.fixes[0] == "group size 100 does not divide the 384 columns; left out"
    assert "calibration data" in fitted.fixes[1]
    assert fitted.fixes[2] == "no algorithm of the link runs here; using RTN"
    none_fit = fit_grid(SchemeGrid(kinds=(GROUP,), group_sizes=(7,)), 64, ALL, (16, 32))
    assert none_fit.grid.group_sizes == (16, 32)
    assert none_fit.fixes[-1] == "no group size fits; using 16, 32"
    same = SchemeGrid(kinds=(GROUP,), group_sizes=(16,), algorithms=ALL)
    assert fit_grid(same, 64, ALL, (16,)) == type(fitted)(same, ())
    with pytest.raises(ValueError):
        fit_grid(same, 0, ALL, (16,))


def test_per_channel_gptq_and_per_group_keep_their_layouts(layer) -> None:
    for gran in (PerChannel(0), PerGroup(16)):
        scheme = WeightScheme(QuantConfig(bits=4, granularity=gran), Algorithm.GPTQ)
        (r,) = run_sweep(layer.weight, [scheme], inputs=layer).results
        assert r.scheme_id == scheme.scheme_id and r.output is not None
