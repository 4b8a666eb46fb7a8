"""Defect: ``pareto_figure``'s docstring said the compared frontier (``compare_with``) is
drawn "dashed and blue", but it is drawn black. The docstring now names the colours the
figure draws, and this test checks them against a drawn figure."""

from __future__ import annotations

import pandas as pd
import plotly.colors
from layer_builders import synthetic_layer

from dashboard.services.compare.frontier import ErrorAxis, pareto_figure
from dashboard.services.compare.sweep import SchemeGrid, expand_grid, run_sweep, sweep_table
from dashboard.services.state.scheme import GranularityKind
from quant_core import Algorithm

# the colour words a docstring may use, by the RGB they name
_WORDS = {"black": (0, 0, 0), "red": (214, 39, 40), "blue": (31, 119, 180)}


def _table() -> pd.DataFrame:
    layer = synthetic_layer()
    grid = SchemeGrid(
        bits=(3, 4, 8), kinds=(GranularityKind.CHANNEL,), algorithms=(Algorithm.RTN, Algorithm.HQQ)
    )
    exp = expand_grid(grid, layer.weight.shape, has_calibration=True)
    return sweep_table(run_sweep(layer.weight, exp.schemes, inputs=layer))


def _word(colour: str) -> str:
    rgb = plotly.colors.hex_to_rgb(colour)
    return next(w for w, v in _WORDS.items() if v == rgb)


def test_the_docstring_names_the_colours_drawn() -> None:
    fig = pareto_figure(_table(), ErrorAxis.OUTPUT_MSE, compare_with=ErrorAxis.MSE)
    *_points, frontier, compared = fig.data
    doc = " ".join((pareto_figure.__doc__ or "").split())
    assert compared.line.dash == "dash"
    assert f"dashed and {_word(compared.line.color)}" in doc, doc
    assert f"in {_word(frontier.line.color)}" in doc, doc
    assert "blue" not in doc, doc
