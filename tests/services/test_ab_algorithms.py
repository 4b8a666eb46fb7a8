"""A/B with algorithms (a side's GPTQ/AWQ calibrated on a layer's inputs, output errors on
held-out inputs) and the headline that weighs bits per element against error."""

from __future__ import annotations

import pytest
import torch
from layer_builders import synthetic_layer

from dashboard.services.compare.ab import compare_ab, metrics_table
from dashboard.services.compare.ab_figures import ab_error_figure
from dashboard.services.compare.ab_summary import (
    bits_phrase,
    cost_headline,
    error_phrase,
    output_headline,
)
from dashboard.services.compare.measure import quantize_and_measure
from dashboard.services.compare.weights import WeightScheme
from quant_core import Algorithm, Mode, PerChannel, PerGroup, PerTensor, QuantConfig, ScaleDtype

INT8_ROWS = QuantConfig(bits=8, granularity=PerChannel(0))
INT4_G16 = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(16))


@pytest.fixture(scope="module")
def layer():
    return synthetic_layer()


def test_gptq_on_one_side_measures_weights_and_held_out_outputs(layer) -> None:
    a = WeightScheme(INT4_G16)
    b = WeightScheme(INT4_G16, Algorithm.GPTQ)
    ab = compare_ab(layer.weight, a, b, layer_a=layer, layer_b=layer)
    for scheme, metrics, output, error in (
        (a, ab.metrics_a, ab.output_a, ab.error_a),
        (b, ab.metrics_b, ab.output_b, ab.error_b),
    ):
        m = quantize_and_measure(layer.weight, scheme, layer)
        assert metrics == m.metrics and output == m.output
        assert torch.equal(torch.from_numpy(error), layer.weight - m.effective)
    assert ab.scheme_b == b and ab.config_b == INT4_G16
    # same cost; GPTQ wins the held-out output, RTN the weight
    assert ab.metrics_a.mse < ab.metrics_b.mse and ab.output_b.mse < ab.output_a.mse
    table = metrics_table(ab)
    assert list(table["algorithm"]) == ["RTN", "GPTQ (damp 0.1, act-order)"]
    assert list(table["output MSE (held-out)"]) == [ab.output_a.mse, ab.output_b.mse]
    assert "B: int4 asym g16, fp32 scales · GPTQ" in ab_error_figure(ab).layout.annotations[1].text
    head = output_headline(ab)
    assert head is not None and head.startswith("Layer output on held-out sentences: **B**")
    assert "the same cost; B has" in head and "less output error" in head


def test_awq_errors_are_against_the_effective_weight(layer) -> None:
    b = WeightScheme(INT8_ROWS, Algorithm.AWQ)
    ab = compare_ab(layer.weight, INT8_ROWS, b, layer_a=layer, layer_b=layer)
    m = quantize_and_measure(layer.weight, b, layer)
    assert m.result.input_scale is not None
    assert torch.equal(torch.from_numpy(ab.error_b), layer.weight - m.effective)


def test_calibrated_side_without_a_layer_raises_naming_it() -> None:
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"scheme B \(int8 .* · GPTQ\).*calibration data"):
        compare_ab(x, INT8_ROWS, WeightScheme(INT8_ROWS, Algorithm.GPTQ))
    with pytest.raises(ValueError, match="both"):
        compare_ab(x, INT8_ROWS, INT8_ROWS, layer_a=synthetic_layer(8, 32))
    with pytest.raises(TypeError, match="scheme A"):
        compare_ab(x, "int8", INT8_ROWS)  # type: ignore[arg-type]
    assert output_headline(compare_ab(x, INT8_ROWS, INT4_G16)) is None


# --- the headline ---------------------------------------------------------------------------

# 4 x 64 values, two schemes of known cost: int8 per-tensor 8 + 32/256 = 8.125 bits/el;
# int4 symmetric per-tensor 4 + 32/256 = 4.125.
X = torch.linspace(-1.0, 1.0, 256).reshape(4, 64)
INT8_T = QuantConfig(bits=8, granularity=PerTensor())
INT4_T = QuantConfig(bits=4, granularity=PerTensor())


def test_cheaper_scheme_is_named_first_with_the_price_of_its_bits() -> None:
    ab = compare_ab(X, INT8_T, INT4_T)
    ratio = ab.metrics_b.mse / ab.metrics_a.mse
    text = cost_headline(ab)
    assert text.startswith("**B**: 4.125 bits/el, MSE ")
    assert "vs **A**: 8.125 bits/el" in text
    assert f"— B costs 51% of the bits for {ratio:.3g}× the error." in text
    assert text == cost_headline(compare_ab(X, INT8_T, INT4_T))
    swapped = cost_headline(compare_ab(X, INT4_T, INT8_T))
    assert swapped.startswith("**A**: 4.125 bits/el") and "A costs 51% of the bits" in swapped


def test_dominating_exact_and_equal_cost_verdicts() -> None:
    # fp16 scales: 4 + 16/256 bits, and here no more error than fp32's
    fp16 = QuantConfig(bits=4, granularity=PerTensor(), scale_dtype=ScaleDtype.FP16)
    ab = compare_ab(X, INT4_T, fp16)
    assert ab.metrics_b.mse <= ab.metrics_a.mse
    assert cost_headline(ab).startswith("**B**: 4.0625 bits/el")
    assert "B costs 98% of the bits and " in cost_headline(ab)
    assert cost_headline(ab).endswith("better on both.")
    same = cost_headline(compare_ab(X, INT4_T, INT4_T))
    assert same.endswith("the same cost for the same error.")
    # int8 per-tensor holds these integers exactly (s = 1); int2 does not. 4 elements:
    # 8 + 32/4 = 16 bits/el against 2 + 32/4 = 10.
    exact = compare_ab(torch.tensor([[-127.0, 0.0, 64.0, 127.0]]), INT8_T, QuantConfig(bits=2))
    assert exact.metrics_a.mse == 0
    assert cost_headline(exact).endswith(
        "vs **A**: 16 bits/el, MSE 0 — B costs 62% of the bits; A is exact."
    )


@pytest.mark.parametrize(
    ("ratio", "words"),
    [
        (0.5, "half the bits"),
        (0.503, "half the bits"),
        (0.25, "a quarter of the bits"),
        (0.53, "53% of the bits"),
        (0.9, "90% of the bits"),
    ],
)
def test_bits_phrase(ratio: float, words: str) -> None:
    assert bits_phrase(ratio) == words


@pytest.mark.parametrize(
    ("mine", "other", "words"),
    [
        (4.0, 1.0, "4× the error"),
        (1.0, 3.2, "3.2× less error"),
        (2.0, 2.0, "the same error"),
        (1234.0, 1.0, "1,234× the error"),
        (1.025, 1.0, "2.5% more error"),
        (1.0, 1.0004, "0.04% less error"),
    ],
)
def test_error_phrase(mine: float, other: float, words: str) -> None:
    assert error_phrase(mine, other) == words


def test_phrases_reject_what_they_cannot_say() -> None:
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError):
            bits_phrase(bad)
    with pytest.raises(ValueError):
        error_phrase(0.0, 1.0)


def test_the_headline_writes_errors_as_the_tables_do() -> None:
    # three significant digits, as the A/B table's column format (display.errors): int8's
    # MSE here is about 1e-6, which the headline wrote with two (4.7e-05 style)
    ab = compare_ab(X, INT8_T, INT4_T)
    mse = ab.metrics_a.mse
    assert mse < 0.01
    assert f"MSE {mse:.3g}," in cost_headline(ab) or f"MSE {mse:.3g} " in cost_headline(ab)
