"""The Layer outputs page's URL keys and its metrics export (issue 29)."""

from __future__ import annotations

import dataclasses
import io

import pandas as pd
import pytest
import torch

from dashboard.services.activations.layer import EvalSplit, LayerSettings, SchemeChoice
from dashboard.services.activations.layer_export import (
    METRIC_COLUMNS,
    layer_metrics_csv,
    layer_metrics_table,
)
from dashboard.services.activations.sentences import RangeMode
from dashboard.services.state.layer import layer_from_query, layer_to_query
from quant_core import LayerScheme, PerGroup, QuantConfig, SchemePreset, evaluate_linear


def _custom() -> LayerSettings:
    weight = QuantConfig(bits=4, granularity=PerGroup(group_size=64))
    return LayerSettings(
        layer="encoder.layer.0.intermediate.dense",
        scheme=LayerScheme(weight=weight, activation=None),
        ranges=RangeMode.DYNAMIC,
        split=EvalSplit.HELD_OUT,
        alpha=0.25,
    )


def test_custom_settings_round_trip() -> None:
    settings = _custom()
    q = layer_to_query(settings, SchemeChoice.CUSTOM)
    assert q["l.a"] == "none" and q["l.alpha"] == "0.25" and q["l.w.group"] == "64"
    parsed = layer_from_query(q)
    assert not parsed.problems
    assert parsed.layer == settings.layer and parsed.choice is SchemeChoice.CUSTOM
    assert parsed.weight == settings.scheme.weight and parsed.activation is None
    assert parsed.activation_float and not parsed.weight_float
    assert parsed.split is EvalSplit.HELD_OUT and parsed.alpha == pytest.approx(0.25)


def test_a_preset_writes_no_sides() -> None:
    settings = LayerSettings(layer="pooler.dense", scheme=SchemePreset.W8A8.scheme)
    q = layer_to_query(settings, SchemeChoice.W8A8)
    assert not any(k.startswith(("l.w", "l.a")) for k in q) and "l.alpha" not in q


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"l.scheme": "w3a3"}, "w3a3"),
        ({"l.split": "train"}, "train"),
        ({"l.alpha": "0.33"}, "0.33"),
        ({"l.alpha": "2"}, "l.alpha=2"),
        ({"l.alpha": "nan"}, "nan"),
        ({"l.layer": "![](//evil)"}, "evil"),
        ({"l.w": "yes"}, "l.w='yes'"),
        ({"l.w.bits": "99"}, "99"),
        ({"l.preset": "w3a3"}, "l.preset='w3a3' is not one of: w8a16, w8a8, w4a16_g128, w4a8"),
        ({"l.preset": "Q4_K"}, "l.w.preset=Q4_K"),
        # a shipped format by the picker's label, any case: pointed to by its key
        ({"l.preset": "NF4 + double quant"}, "l.w.preset=NF4_DQ"),
        ({"l.preset": " nf4 + DOUBLE  quant "}, "l.w.preset=NF4_DQ"),
        ({"l.preset": "mxfp8 (e4m3)"}, "l.w.preset=MXFP8_E4M3"),
        ({"l.preset": "custom"}, "l.scheme=custom"),
        ({"l.preset": "w8a8", "l.scheme": "w4a8"}, "disagrees with l.scheme=w4a8"),
        ({"l.sheme": "w8a8"}, "'l.sheme' (not a key of this page"),
        ({"l.w.bitz": "3"}, "'l.w.bitz'"),
    ],
)
def test_bad_values_become_problems_that_name_them(params: dict, named: str) -> None:
    parsed = layer_from_query(params)
    assert len(parsed.problems) == 1 and named in parsed.problems[0], parsed.problems


@pytest.mark.parametrize(
    ("raw", "choice"),
    [
        ("w8a16", SchemeChoice.W8A16),
        ("W8A8", SchemeChoice.W8A8),
        ("W4A16 g128", SchemeChoice.W4A16_G128),
        ("w4a16_g128", SchemeChoice.W4A16_G128),
        ("w4a8", SchemeChoice.W4A8),
    ],
)
def test_l_preset_selects_a_preset_by_value_or_label(raw: str, choice: SchemeChoice) -> None:
    parsed = layer_from_query({"l.preset": raw})
    assert parsed.choice is choice and not parsed.problems
    # with l.scheme saying the same, no problem either
    assert not layer_from_query({"l.preset": raw, "l.scheme": choice.value}).problems


def test_other_pages_keys_are_ignored() -> None:
    assert layer_from_query({"bits": "4", "m.act": "w8a8"}).empty


def test_the_export_has_every_number_the_page_shows() -> None:
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(32, 16, generator=gen), torch.randn(8, 16, generator=gen)
    settings = _custom()
    ev = evaluate_linear(x, w, None, SchemePreset.W8A8.scheme)
    table = layer_metrics_table(settings, ev, ev)
    assert list(table.columns) == list(METRIC_COLUMNS) and len(table) == 2
    back = pd.read_csv(io.BytesIO(layer_metrics_csv(table)))
    assert back["output_mse"][0] == pytest.approx(ev.metrics.mse, rel=1e-12)
    assert back["evaluation"].tolist() == ["scheme", "smoothquant"]
    assert back["alpha"][1] == 0.25 and pd.isna(back["alpha"][0])


@pytest.mark.parametrize("raw", ["NF4 + double quant", "nf4 + double quant", "NF4_DQ"])
def test_a_custom_side_takes_a_shipped_format_by_key_or_label(raw: str) -> None:
    """The pointer ``l.preset=NF4 + double quant`` gives leads to a usable link, and so does
    the same link written with the label the picker shows."""
    parsed = layer_from_query({"l.scheme": "custom", "l.w.preset": raw, "l.a": "none"})
    assert not parsed.problems and parsed.weight == QuantConfig.from_name("NF4_DQ")


def test_the_export_names_a_shipped_format_as_the_page_does() -> None:
    """The CSV's scheme column wrote MXFP4 as its layout ("W fp4_e2m1 g32 s:e8m0 ...")
    while the page's caption says "W MXFP4"."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(32, 64, generator=gen), torch.randn(8, 64, generator=gen)
    scheme = LayerScheme(weight=QuantConfig.from_name("MXFP4"), activation=None)
    settings = dataclasses.replace(_custom(), scheme=scheme)
    table = layer_metrics_table(settings, evaluate_linear(x, w, None, scheme), None)
    assert table["scheme"].tolist() == ["W MXFP4 · A float"]
