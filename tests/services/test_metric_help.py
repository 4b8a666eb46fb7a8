"""The metric definitions every page's help texts come from (``display.metric_help``)."""

from __future__ import annotations

import math

import pytest
import streamlit as st

from dashboard.services.display.metric_help import (
    TABLE_COLUMNS,
    Metric,
    metric_help,
    size_ratio,
    with_help,
)


def test_every_definition_names_its_metric_and_how_it_is_computed() -> None:
    for m in Metric:
        name, _, how = m.definition.partition(": ")
        assert name and how.endswith("."), m
    assert "10·log10(Σx² / Σ(x − x̂)²)" in Metric.SQNR.definition
    assert "mean((x − x̂)²)" in Metric.MSE.definition
    assert "max |x − x̂|" in Metric.MAX_ABS.definition


def test_help_is_the_definition_then_the_exact_value() -> None:
    assert metric_help(Metric.MSE) == Metric.MSE.definition
    assert metric_help(Metric.MSE, "0.00123") == f"{Metric.MSE.definition} This tensor: 0.00123."
    with pytest.raises(TypeError, match="'MSE'"):
        metric_help("MSE")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ratio", "label", "value"),
    [
        (3.5556, "Smaller than fp16", "3.56×"),
        (1.0, "Smaller than fp16", "1.00×"),
        (0.5714, "Larger than fp16", "1.75×"),  # was "Smaller than fp16 0.57×"
        (math.nan, "Size vs fp16", "n/a"),
        (0.0, "Size vs fp16", "n/a"),
    ],
)
def test_size_ratio_words_agree_with_the_number(ratio: float, label: str, value: str) -> None:
    assert size_ratio("fp16", ratio) == (label, value)


def test_table_columns_get_their_definitions_as_help() -> None:
    number = st.column_config.NumberColumn("MSE", format="%.3g")
    config = with_help({"MSE": number, "cosine": "cos"}, ["", "scheme", "MSE", "cosine", "bytes"])
    assert config["MSE"] == {**number, "help": Metric.MSE.definition}
    assert config["cosine"] == {"label": "cos", "help": Metric.COSINE.definition}
    assert config["bytes"] == {"help": Metric.BYTES.definition}
    assert set(config) == {"MSE", "cosine", "bytes"}
    assert set(TABLE_COLUMNS) >= {"MSE", "SQNR (dB)", "cosine", "max abs error"}
