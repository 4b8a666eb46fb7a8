"""compare_figures: block reduction, payload size, and what each figure shows."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from layer_builders import synthetic_layer
from safetensors.torch import save_file

from dashboard.services.compare.ab import ABResult, compare_ab
from dashboard.services.compare.ab_figures import (
    ab_difference_figure,
    ab_error_figure,
    ab_winner_figure,
)
from dashboard.services.compare.frontier import POINTS_META, ErrorAxis, pareto_figure
from dashboard.services.compare.sweep import SchemeGrid, expand_grid, run_sweep, sweep_table
from dashboard.services.display.reduce import DEFAULT_MAX_CELLS, Reduction, reduce_2d
from dashboard.services.model.embeddings import EmbeddingComparison, SentenceResult
from dashboard.services.model.evaluate import (
    LayerMetric,
    evaluate_safetensors,
    layer_table,
    order_by,
)
from dashboard.services.model.figures import (
    COSINE_GAP_FLOOR,
    cosine_figure,
    layer_figure,
    sentence_cosine_figure,
)
from dashboard.services.state.scheme import GranularityKind
from quant_core import Algorithm, Format, Mode, ModelReport, PerChannel, PerGroup, QuantConfig

MAX_PAYLOAD = 2_000_000

# --- reduce_2d ------------------------------------------------------------------------------


def test_reduce_mean_by_hand() -> None:
    m = np.arange(12, dtype=np.float64).reshape(3, 4)
    r = reduce_2d(m, 4, Reduction.MEAN)
    # 2x2 blocks; the last row of blocks holds one source row.
    np.testing.assert_array_equal(r.values, [[2.5, 4.5], [8.5, 10.5]])
    assert (r.row_step, r.col_step, r.source_shape) == (2, 2, (3, 4))
    assert r.values.dtype == np.float32
    assert r.row_starts().tolist() == [0, 2] and r.col_starts().tolist() == [0, 2]
    assert r.note() == "downsampled 3×4 → 2×2 (2×2 blocks, mean)"


def test_reduce_max_abs_keeps_the_sign() -> None:
    m = np.array([[1.0, 3.0, 0.5, 0.0], [-4.0, 2.0, 0.0, -0.25]])
    r = reduce_2d(m, 2, Reduction.MAX_ABS)
    np.testing.assert_array_equal(r.values, [[-4.0, 0.5]])
    assert "max |value|" in r.note()


def test_small_matrices_come_back_unchanged_as_float32() -> None:
    m = np.arange(6, dtype=np.float16).reshape(2, 3)
    r = reduce_2d(m, 6, Reduction.MEAN)
    assert not r.is_reduced and r.note() == ""
    assert r.values.dtype == np.float32
    np.testing.assert_array_equal(r.values, m.astype(np.float32))


def test_long_thin_matrices_reduce_along_their_length() -> None:
    r = reduce_2d(np.ones((1, 1000)), 100, Reduction.MEAN)
    assert r.values.shape == (1, 100) and (r.row_step, r.col_step) == (1, 10)
    r = reduce_2d(np.ones((30522, 384)), DEFAULT_MAX_CELLS, Reduction.MAX_ABS)
    assert r.values.size <= DEFAULT_MAX_CELLS
    assert r.row_step == r.col_step


@pytest.mark.parametrize(
    ("matrix", "max_cells", "error"),
    [
        (np.ones(4), 4, ValueError),
        (np.ones((0, 3)), 4, ValueError),
        (np.ones((2, 2, 2)), 4, ValueError),
        (np.ones((2, 2)), 0, ValueError),
        (np.ones((2, 2)), 2.5, ValueError),
    ],
)
def test_reduce_rejects_bad_input(matrix: np.ndarray, max_cells: int, error: type) -> None:
    with pytest.raises(error):
        reduce_2d(matrix, max_cells, Reduction.MEAN)
    with pytest.raises(TypeError):
        reduce_2d(np.ones((2, 2)), 4, "mean")  # type: ignore[arg-type]


def _reference(m: np.ndarray, rs: int, cs: int, how: Reduction) -> np.ndarray:
    rows, cols = m.shape
    out = np.empty((math.ceil(rows / rs), math.ceil(cols / cs)))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            block = m[i * rs : (i + 1) * rs, j * cs : (j + 1) * cs].astype(np.float64)
            if how is Reduction.MEAN:
                out[i, j] = block.mean()
            else:
                flat = block.reshape(-1)
                out[i, j] = flat[np.abs(flat).argmax()]
    return out


@given(
    hnp.arrays(
        np.float32,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=40),
        elements=st.floats(-1e3, 1e3, width=32),
    ),
    st.integers(1, 2000),
    st.sampled_from(Reduction),
)
def test_reduce_matches_a_loop_reference(m: np.ndarray, max_cells: int, how: Reduction) -> None:
    r = reduce_2d(m, max_cells, how)
    assert r.values.size <= max_cells
    expected = _reference(m, r.row_step, r.col_step, how)
    assert r.values.shape == expected.shape
    np.testing.assert_allclose(r.values, expected.astype(np.float32), rtol=1e-5, atol=1e-3)
    # The step is the smallest square step that fits.
    s = max(r.row_step, r.col_step)
    if s > 1:
        rows, cols = m.shape
        assert math.ceil(rows / (s - 1)) * math.ceil(cols / (s - 1)) > max_cells


# --- payload --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_ab() -> ABResult:
    x = torch.randn(4096, 4096, generator=torch.Generator().manual_seed(0))
    return compare_ab(
        x,
        QuantConfig(bits=4, granularity=PerGroup(32)),
        QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerChannel(0)),
    )


@pytest.mark.parametrize("build", [ab_error_figure, ab_difference_figure, ab_winner_figure])
def test_figures_of_a_4096_square_tensor_stay_under_2_mb(
    build: Callable[[ABResult], go.Figure], big_ab: ABResult
) -> None:
    fig = build(big_ab)
    payload = fig.to_json()
    assert len(payload) < MAX_PAYLOAD
    assert "downsampled" in fig.layout.title.text
    for trace in json.loads(payload)["data"]:
        assert trace["z"]["dtype"] == "f4"  # a typed array, not a JSON list


def test_error_maps_share_one_symmetric_scale(big_ab: ABResult) -> None:
    fig = ab_error_figure(big_ab)
    assert [t.coloraxis for t in fig.data] == ["coloraxis", "coloraxis"]
    axis = fig.layout.coloraxis
    assert axis.cmin == -axis.cmax == -big_ab.max_abs_error
    # MAX_ABS reduction keeps the extreme, so the scale's end is reached on one side.
    reached = max(float(np.abs(np.asarray(t.z)).max()) for t in fig.data)
    assert reached == pytest.approx(big_ab.max_abs_error)


def test_small_ab_figures_are_not_reduced() -> None:
    x = torch.tensor([[1.0, 0.5, 4.0, 2.0]])
    ab = compare_ab(x, QuantConfig(bits=2, granularity=PerGroup(2)), QuantConfig(bits=2))
    fig = ab_winner_figure(ab)
    assert "downsampled" not in fig.layout.title.text
    assert "A won 1, B won 0, ties 1" in fig.layout.title.text
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), [[-1.0, 0.0]])
    diff = ab_difference_figure(ab)
    np.testing.assert_array_equal(np.asarray(diff.data[0].z), ab.abs_error_difference())
    assert diff.data[0].zmin == -diff.data[0].zmax


# --- Pareto ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(0))
    grid = SchemeGrid(
        bits=(2, 4, 8),
        modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
        kinds=(GranularityKind.TENSOR, GranularityKind.GROUP),
        group_sizes=(16, 32),
        formats=(Format.INT, Format.NF4),
    )
    return sweep_table(run_sweep(x, expand_grid(grid, x.shape).configs))


WEIGHT_AXES = [a for a in ErrorAxis if not a.needs_layer]


@pytest.mark.parametrize("axis", WEIGHT_AXES)
def test_pareto_points_carry_scheme_ids_and_the_frontier_is_marked(
    table: pd.DataFrame, axis: ErrorAxis
) -> None:
    fig = pareto_figure(table, axis)
    *points, frontier = fig.data
    assert frontier.name == "frontier" and {p.meta for p in points} == {POINTS_META}
    ids = [sid for p in points for sid in p.customdata]
    assert sorted(ids) == sorted(table["scheme_id"])
    assert set(frontier.customdata) == set(table.index[table["on_frontier"]])
    by_id = table.set_index("scheme_id")
    for sid, label in zip(frontier.customdata, frontier.text, strict=True):
        assert by_id.loc[sid, "scheme"] == label
    assert list(frontier.x) == sorted(frontier.x)
    assert fig.layout.yaxis.type == ("log" if axis is ErrorAxis.MSE else "linear")
    assert len(fig.to_json()) < MAX_PAYLOAD


def test_exact_schemes_are_counted_but_not_drawn(table: pd.DataFrame) -> None:
    t = table.copy()
    exact = t.index[0]
    t.loc[exact, "mse"] = 0.0
    t.loc[exact, "sqnr_db"] = math.inf
    for axis in WEIGHT_AXES:
        fig = pareto_figure(t, axis)
        drawn = [sid for trace in fig.data if trace.meta == POINTS_META for sid in trace.customdata]
        assert exact not in drawn and len(drawn) == len(t) - 1
        assert "1 exact scheme not drawn" in fig.layout.title.text


def test_output_axis_needs_output_errors(table: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="output MSE"):
        pareto_figure(table, ErrorAxis.OUTPUT_MSE)
    with pytest.raises(TypeError):
        pareto_figure(table, "mse")  # type: ignore[arg-type]
    assert ErrorAxis.OUTPUT_MSE.minimize and ErrorAxis.OUTPUT_MSE.log


@pytest.fixture(scope="module")
def sweep_layer_table() -> pd.DataFrame:
    layer = synthetic_layer()
    grid = SchemeGrid(
        bits=(3, 4, 8),
        kinds=(GranularityKind.CHANNEL,),
        algorithms=(Algorithm.RTN, Algorithm.GPTQ, Algorithm.HQQ),
    )
    exp = expand_grid(grid, layer.weight.shape, has_calibration=True)
    return sweep_table(run_sweep(layer.weight, exp.schemes, inputs=layer))


@pytest.mark.parametrize(
    ("axis", "other", "column", "other_column"),
    [
        (ErrorAxis.OUTPUT_MSE, ErrorAxis.MSE, "on_output_frontier", "on_frontier"),
        (ErrorAxis.MSE, ErrorAxis.OUTPUT_MSE, "on_frontier", "on_output_frontier"),
    ],
)
def test_the_other_frontier_is_drawn_where_its_schemes_sit(
    sweep_layer_table: pd.DataFrame,
    axis: ErrorAxis,
    other: ErrorAxis,
    column: str,
    other_column: str,
) -> None:
    fig = pareto_figure(sweep_layer_table, axis, compare_with=other)
    *_points, frontier, compared = fig.data
    assert compared.name == f"{other.label} frontier" and compared.line.dash == "dash"
    t = sweep_layer_table
    assert set(frontier.customdata) == set(t.index[t[column].astype(bool)])
    other_ids = set(t.index[t[other_column].astype(bool)])
    assert set(compared.customdata) == other_ids
    by_id = sweep_layer_table.set_index("scheme_id")
    for sid, x, y in zip(compared.customdata, compared.x, compared.y, strict=True):
        # drawn at its own bits and at this axis's error, not the other axis's
        assert (x, y) == (by_id.loc[sid, "bits_per_element"], by_id.loc[sid, axis.value])
    assert set(frontier.customdata) != other_ids  # the two frontiers differ here
    assert fig.layout.yaxis.title.text == axis.label
    assert pareto_figure(sweep_layer_table, axis).data[-1].name == "frontier"


# --- model ----------------------------------------------------------------------------------


def test_layer_figure_follows_the_table_order(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    save_file(
        {f"l{i}.weight": torch.randn(8, 16, generator=g) * (i + 1) for i in range(3)},
        str(tmp_path / "m.safetensors"),
    )
    table = layer_table(evaluate_safetensors(tmp_path / "m.safetensors", QuantConfig(bits=3)))
    for metric in (m for m in LayerMetric if m.value in table.columns):
        fig = layer_figure(table, metric)
        ordered = order_by(table, metric)
        assert list(fig.data[0].y) == list(ordered["name"])
        np.testing.assert_array_equal(fig.data[0].x, ordered[metric.value].to_numpy())
        # Worst first: the bars are monotone in what they show.
        steps = np.diff(fig.data[0].x)
        assert (steps <= 0).all() if metric.higher_is_worse else (steps >= 0).all()
        assert fig.layout.xaxis.type == ("log" if metric is LayerMetric.MSE else "linear")
        assert metric.worse in fig.layout.title.text
    with pytest.raises(ValueError, match="output MSE"):
        layer_figure(table, LayerMetric.OUTPUT_MSE)  # a weight-only table has no outputs
    with pytest.raises(TypeError):
        layer_figure(table, "mse")  # type: ignore[arg-type]


def test_sentence_cosine_figure() -> None:
    cmp = EmbeddingComparison(
        config=QuantConfig(bits=4),
        sentences=(SentenceResult("short", 0.999), SentenceResult("x" * 60, 0.95)),
        report=ModelReport(layers=()),
        skipped=(),
        model_bytes=100,
        replaced_weight_bytes=0,
    )
    fig = sentence_cosine_figure(cmp)
    # 1 - cosine on a log axis: the gap to fp32, each decade as wide as the next
    assert np.allclose(fig.data[0].x, [1 - 0.999, 1 - 0.95])
    assert list(fig.data[0].customdata) == [0.999, 0.95]
    assert fig.layout.xaxis.type == "log" and "1 − cosine" in fig.layout.xaxis.title.text
    low, high = fig.layout.xaxis.range
    assert 10**low <= COSINE_GAP_FLOOR and 10**high >= 0.05
    assert fig.data[0].y[1].endswith("…") and len(fig.data[0].y[1]) == 46
    assert "int4 sym per-tensor" in fig.layout.title.text


def test_cosine_figure_draws_identical_embeddings_at_the_floor() -> None:
    fig = cosine_figure(["same", "moved"], [1.0, 0.99], "int8")
    assert np.allclose(fig.data[0].x, [COSINE_GAP_FLOOR, 0.01])
    assert f"1 at or below {COSINE_GAP_FLOOR:g}" in fig.layout.title.text


def test_services_never_import_streamlit() -> None:
    """Every module under ``dashboard/services`` (found by walking the package, so a new one
    is covered too) imports without pulling in Streamlit."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import dashboard.services as root\n"
        "names = [m.name for m in pkgutil.walk_packages(root.__path__, root.__name__ + '.')]\n"
        "assert len(names) > 20, names\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "assert not any(m == 'streamlit' or m.startswith('streamlit.') for m in sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
