"""The sweep as the page shows it: points told apart by format and algorithm, the table's
column and row order, and the one-line conclusion (``compare.sweep_view``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from dashboard.services.compare.frontier import POINTS_META, ErrorAxis, pareto_figure
from dashboard.services.compare.sweep import SchemeGrid, expand_grid, run_sweep, sweep_table
from dashboard.services.compare.sweep_view import (
    BUDGET_BITS,
    ERROR_ORDER,
    conclusion,
    shown_table,
)
from dashboard.services.display.errors import error_text
from dashboard.services.state.scheme import GranularityKind
from quant_core import Algorithm, Format, Mode, QuantConfig


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(0))
    grid = SchemeGrid(
        bits=(2, 4, 8),
        modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
        kinds=(GranularityKind.TENSOR, GranularityKind.GROUP),
        group_sizes=(16,),
        formats=(Format.INT, Format.NF4),
        algorithms=(Algorithm.RTN, Algorithm.HQQ),
    )
    return sweep_table(run_sweep(x, expand_grid(grid, x.shape).schemes))


def test_points_are_coloured_by_format_and_shaped_by_algorithm(table: pd.DataFrame) -> None:
    fig = pareto_figure(table, ErrorAxis.MSE)
    points = [t for t in fig.data if t.meta == POINTS_META]
    names = {t.name for t in points}
    assert names == {"int · RTN", "int · HQQ", "NF4 · RTN"}  # HQQ refits int schemes only
    colour = {t.name: t.marker.color for t in points}
    symbol = {t.name: t.marker.symbol for t in points}
    # one colour per format, one symbol per algorithm, and they differ
    assert colour["int · RTN"] == colour["int · HQQ"] != colour["NF4 · RTN"]
    assert symbol["int · RTN"] == symbol["NF4 · RTN"] != symbol["int · HQQ"]
    assert all(t.showlegend is not False for t in points)
    # the frontier's points are ringed in red over their own markers
    ring = fig.data[-1]
    assert ring.name == "frontier" and ring.marker.symbol == "circle-open"
    assert set(ring.customdata) == set(table.index[table["on_frontier"]])


def test_shipped_formats_are_coloured_by_family_not_by_their_elements() -> None:
    # MXFP4 and NVFP4 both store FP4 E2M1 elements, Q4_0 and Q4_K int codes like a plain
    # int4 scheme: colouring by element format alone painted each pair alike
    x = torch.randn(16, 256, generator=torch.Generator().manual_seed(0))
    names = ("Q4_0", "Q4_K", "MXFP4", "NVFP4")
    schemes = [QuantConfig.from_name(n) for n in names] + [QuantConfig(bits=4)]
    table = sweep_table(run_sweep(x, schemes))
    assert list(table["family"]) == ["GGUF", "GGUF", "OCP MX", "NVIDIA", ""]
    points = [t for t in pareto_figure(table, ErrorAxis.MSE).data if t.meta == POINTS_META]
    colour = {t.name: t.marker.color for t in points}
    assert set(colour) == {"GGUF · RTN", "OCP MX · RTN", "NVIDIA · RTN", "int · RTN"}
    assert len(set(colour.values())) == 4
    by_name = {s: t.name for t in points for s in t.text}
    assert by_name["Q4_0"] == by_name["Q4_K"] == "GGUF · RTN"


def test_table_shows_errors_first_and_sorts_rows_by_bits_then_error(
    table: pd.DataFrame,
) -> None:
    shown = shown_table(table, ErrorAxis.SQNR_DB)
    cols = list(shown.columns)
    errors = [c for c in ERROR_ORDER if c in cols]
    assert cols[0] == "scheme" and cols[1] == "sqnr_db"
    assert set(cols[1 : 1 + len(errors)]) == set(errors)
    assert cols[1 + len(errors)] == "bits_per_element"
    assert "scheme_id" not in cols and "tensor" not in cols and "output_mse" not in cols
    assert sorted(shown.index) == sorted(table.index)  # every scheme, ids kept as index
    key = list(zip(shown["bits_per_element"], -shown["sqnr_db"], strict=True))
    assert key == sorted(key)


def test_conclusion_names_the_best_scheme_under_the_budget(table: pd.DataFrame) -> None:
    text = conclusion(table, ErrorAxis.MSE)
    fits = table[table["bits_per_element"] <= BUDGET_BITS]
    best = fits.loc[fits["mse"].idxmin()]
    assert text.startswith(f"Best at ≤ {BUDGET_BITS:g} bits per element: ")
    assert f"weight MSE {error_text(best['mse'])}" in text
    overall = table.loc[table["mse"].idxmin()]
    assert "Best overall" in text and f"weight MSE {error_text(overall['mse'])}" in text
    cheapest = conclusion(table, ErrorAxis.MSE, budget=1.0)
    assert cheapest.startswith("No scheme is at ≤ 1 bits per element; the cheapest is ")
    low = np.min(table["bits_per_element"])
    assert f"({low:.4g} bits" in cheapest
    with pytest.raises(ValueError, match="budget"):
        conclusion(table, ErrorAxis.MSE, budget=0)


def test_conclusion_writes_a_shipped_format_s_bits_exactly() -> None:
    # Q6_K costs 6 + 0.5 + 0.0625 = 6.5625 bits; four significant digits wrote 6.562
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(0))
    table = sweep_table(run_sweep(x, [QuantConfig.from_name("Q6_K")]))
    text = conclusion(table, ErrorAxis.MSE, budget=8)
    assert "(6.5625 bits, " in text, text
