"""The whole-model page's services: every linear layer of MiniLM quantized (weights by an
algorithm, inputs fake-quantized), per-layer output errors, embeddings; its URL scheme;
and the layer chart ordered by what it plots."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from dashboard.services.model import embeddings
from dashboard.services.model.evaluate import LayerMetric, order_by
from dashboard.services.model.figures import cosine_figure, layer_figure
from dashboard.services.model.outputs import (
    float_reference,
    output_report,
    quantize_linears,
    static_ranges,
)
from dashboard.services.model.tables import OUTPUT_COLUMNS, most_sensitive, output_table
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.model import (
    ActivationChoice,
    ModelScheme,
    RangeKind,
    model_scheme_from_query,
    model_scheme_to_query,
)
from quant_core import (
    Algorithm,
    GPTQOptions,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    SchemePreset,
    capture_sentence_inputs,
)
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES, transformer_of

W4G128 = QuantConfig(bits=4, mode=Mode.SYMMETRIC, granularity=PerGroup(group_size=128))
A8_TOKEN = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=0))
A8_TENSOR = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerTensor())
SENTENCES = HELD_OUT_SENTENCES[:6]


@pytest.fixture(scope="module")
def minilm() -> nn.Module:
    return embeddings.load_bundled_model()


@pytest.fixture(scope="module")
def calibration(minilm: nn.Module):
    return capture_sentence_inputs(minilm, CALIBRATION_SENTENCES)


@pytest.fixture(scope="module")
def held_out(minilm: nn.Module):
    return capture_sentence_inputs(minilm, HELD_OUT_SENTENCES)


@pytest.fixture(scope="module")
def rtn(minilm: nn.Module):
    return quantize_linears(minilm, W4G128)


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


# --- quantize_linears --------------------------------------------------------------------


def test_every_linear_layer_is_quantized_in_module_order(minilm: nn.Module, rtn) -> None:
    names = list(rtn.results)
    assert len(names) == 37 and names[-1] == "pooler.dense" and not rtn.skipped
    assert names[0] == "encoder.layer.0.attention.self.query"
    for name in names:
        assert rtn.results[name].quantized.config == W4G128


def test_calibrated_algorithms_need_a_capture(minilm: nn.Module) -> None:
    with pytest.raises(ValueError, match="calibrat"):
        quantize_linears(minilm, W4G128, Algorithm.GPTQ)
    with pytest.raises(TypeError, match="QuantConfig"):
        quantize_linears(minilm, "int4")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Algorithm"):
        quantize_linears(minilm, W4G128, "gptq")  # type: ignore[arg-type]


def test_a_group_size_that_fits_no_layer_skips_with_the_reason(minilm: nn.Module) -> None:
    # 512 divides the 1536-wide inputs of output.dense only
    cfg = QuantConfig(bits=4, granularity=PerGroup(group_size=512))
    lin = quantize_linears(minilm, cfg)
    assert {n.split(".")[-2] for n in lin.results} == {"output"}
    assert len(lin.results) == 6 and len(lin.skipped) == 31
    assert all("512" in s.reason for s in lin.skipped)


# --- output_report -----------------------------------------------------------------------


def test_weight_only_report_agrees_with_a_direct_computation(
    minilm: nn.Module, rtn, held_out
) -> None:
    before = _state(minilm)
    out = output_report(minilm, SENTENCES, rtn, None, held_out=held_out)
    after = minilm.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # the cached model is shared
    assert len(out.layers) == 37 and len(out.cosines) == len(SENTENCES)
    inner = transformer_of(minilm)
    capture = capture_sentence_inputs(minilm, SENTENCES)
    row = next(r for r in out.layers if r.name == "encoder.layer.3.intermediate.dense")
    linear = dict(inner.named_modules())[row.name]
    x = capture[row.name]
    y = F.linear(x, linear.weight.detach())
    y_hat = F.linear(x, rtn.results[row.name].quantized.dequantize())
    # the bias cancels in Y - Ŷ: the MSE is of (W - Ŵ) x alone
    assert row.output.mse == pytest.approx(float(((y - y_hat) ** 2).mean()), rel=1e-4)
    assert row.output == row.weight_only and row.activation_only is None
    assert row.clipped_fraction is None
    # RTN against RTN on held-out: the same numbers
    assert row.held_out == row.held_out_rtn


def test_embeddings_agree_with_the_weight_only_comparison(minilm: nn.Module, rtn) -> None:
    """Reference: ``compare_embeddings`` quantizes the model's layers its own way
    (``quantize_model``); float activations and RTN weights must give the same cosines."""
    out = output_report(minilm, SENTENCES, rtn, None)
    ref = embeddings.compare_embeddings(minilm, W4G128, list(SENTENCES))
    assert out.cosines == pytest.approx([s.cosine for s in ref.sentences], abs=1e-5)


def test_sixteen_bits_everywhere_leave_the_embeddings_unchanged(minilm: nn.Module) -> None:
    cfg = QuantConfig(bits=16, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=0))
    lin = quantize_linears(minilm, cfg)
    out = output_report(minilm, SENTENCES, lin, dataclasses.replace(A8_TOKEN, bits=16))
    assert out.min_cosine > 0.99999
    assert all(r.output.sqnr_db > 60 for r in out.layers)


def test_activations_add_error_and_each_side_is_reported(minilm: nn.Module, rtn) -> None:
    w_only = output_report(minilm, SENTENCES, rtn, None)
    both = output_report(minilm, SENTENCES, rtn, dataclasses.replace(A8_TOKEN, bits=4))
    for a, b in zip(w_only.layers, both.layers, strict=True):
        assert a.name == b.name and b.activation_only is not None
        assert b.weight_only == a.weight_only  # same weights, same captured input
        assert b.output.mse > 0
    # int4 inputs on top of int4 weights: the embeddings move further from fp32
    assert both.mean_cosine < w_only.mean_cosine


def test_static_ranges_clip_held_out_inputs(minilm: nn.Module, rtn, calibration) -> None:
    ranges = static_ranges(calibration, A8_TENSOR, rtn)
    assert set(ranges) == set(rtn.results)
    out = output_report(minilm, SENTENCES, rtn, A8_TENSOR, ranges=ranges)
    fractions = [r.clipped_fraction for r in out.layers]
    assert all(f is not None and 0.0 <= f <= 1.0 for f in fractions)
    with pytest.raises(ValueError, match="token"):
        static_ranges(calibration, A8_TOKEN, rtn)


@pytest.mark.slow
def test_gptq_beats_rtn_on_held_out_outputs(minilm: nn.Module, calibration, held_out) -> None:
    opts = GPTQOptions(damp=0.1, act_order=True)
    lin = quantize_linears(minilm, W4G128, Algorithm.GPTQ, options=opts, calibration=calibration)
    out = output_report(minilm, SENTENCES, lin, None, held_out=held_out)
    table = output_table(out)
    gains = table["gain_vs_rtn_db"].to_numpy()
    assert (gains > 0).mean() > 0.9 and gains.mean() > 1.0
    rtn_out = output_report(minilm, SENTENCES, quantize_linears(minilm, W4G128), None)
    assert out.mean_cosine > rtn_out.mean_cosine


def test_output_table_is_most_sensitive_first(minilm: nn.Module, rtn) -> None:
    table = output_table(output_report(minilm, SENTENCES, rtn, A8_TOKEN))
    assert tuple(table.columns) == OUTPUT_COLUMNS and len(table) == 37
    assert table["out_sqnr_db"].is_monotonic_increasing
    by_mse = order_by(table, LayerMetric.OUTPUT_MSE)
    assert by_mse["out_mse"].is_monotonic_decreasing


def test_most_sensitive_ranks_by_output_mse_beside_the_weight_rank() -> None:
    table = pd.DataFrame(
        {
            "name": ["encoder.a", "pooler.dense", "encoder.b", "encoder.c"],
            "out_mse": [1e-4, 5e-3, 2e-3, 1e-5],
            "out_sqnr_db": [30.0, 12.0, 20.0, 40.0],
            "sqnr_db": [18.0, 25.0, 22.0, 15.0],  # weight SQNR: c < a < b < pooler
        }
    )
    top = most_sensitive(table, 3)
    assert list(top["name"]) == ["pooler.dense", "encoder.b", "encoder.a"]
    assert list(top["rank by weight SQNR"]) == [4, 3, 2]
    assert list(top["in embedding"]) == [False, True, True]
    with pytest.raises(ValueError, match="n must be"):
        most_sensitive(table, 0)
    with pytest.raises(ValueError, match="out_mse"):
        most_sensitive(table.drop(columns="out_mse"))


# --- chart order: by the plotted metric (issue: titled MSE but ordered by SQNR) ---------


def _table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": ["a", "b", "c"],
            "mse": [1e-3, 1e-5, 1e-4],
            "sqnr_db": [20.0, 10.0, 30.0],  # deliberately not in MSE's order
            "cosine": [0.99, 0.9, 0.999],
            "bits_per_element": [4.5, 4.25, 5.0],
            "quantized_bytes": [10, 30, 20],
        }
    )


@pytest.mark.parametrize(
    ("metric", "top_to_bottom"),
    [
        (LayerMetric.MSE, ["a", "c", "b"]),
        (LayerMetric.SQNR_DB, ["b", "a", "c"]),
        (LayerMetric.COSINE, ["b", "a", "c"]),
        (LayerMetric.BITS_PER_ELEMENT, ["c", "a", "b"]),
        (LayerMetric.BYTES, ["b", "c", "a"]),
    ],
)
def test_layer_chart_bars_follow_the_plotted_values(metric, top_to_bottom) -> None:
    fig = layer_figure(_table(), metric)
    assert fig.layout.yaxis.autorange == "reversed"  # the first bar is drawn at the top
    assert list(fig.data[0].y) == top_to_bottom
    assert metric.worse in fig.layout.title.text


def test_layer_chart_without_output_columns_says_so() -> None:
    with pytest.raises(ValueError, match="output MSE"):
        layer_figure(_table(), LayerMetric.OUTPUT_MSE)


def test_cosine_figure_checks_lengths() -> None:
    fig = cosine_figure(["a", "b"], [0.9, 0.8], "x")
    assert list(fig.data[0].customdata) == [0.9, 0.8]  # 1 - cosine is drawn, cosine hovered
    with pytest.raises(ValueError, match="2 sentences but 1"):
        cosine_figure(["a", "b"], [0.9], "x")


# --- the page's scheme and its URL ---------------------------------------------------------


@pytest.mark.parametrize(
    "scheme",
    [
        ModelScheme(weight=W4G128),
        ModelScheme.of(ActivationChoice.W8A8, weight=W4G128),
        ModelScheme.of(ActivationChoice.W4A16_G128, weight=W4G128),
        ModelScheme.of(
            ActivationChoice.CUSTOM,
            weight=W4G128,
            activation=A8_TENSOR,
            ranges=RangeKind.STATIC,
            algorithm=AlgorithmChoice(algorithm=Algorithm.GPTQ, gptq_damp=0.25, act_order=False),
        ),
        ModelScheme.of(
            ActivationChoice.NONE,
            weight=QuantConfig(bits=3, mode=Mode.ASYMMETRIC, granularity=PerGroup(64)),
            algorithm=AlgorithmChoice(algorithm=Algorithm.HQQ),
        ),
    ],
)
def test_model_scheme_round_trips_through_the_url(scheme: ModelScheme) -> None:
    query = model_scheme_to_query(scheme)
    assert all(k.startswith("m.") for k in query)
    parsed = model_scheme_from_query(query)
    assert not parsed.problems
    back = ModelScheme.of(
        parsed.choice,
        weight=parsed.weight or scheme.weight,
        activation=parsed.activation,
        ranges=parsed.ranges or RangeKind.DYNAMIC,
        algorithm=parsed.algorithm,
    )
    assert back == scheme and back.key() == scheme.key()


def test_a_bad_url_part_loses_only_that_part() -> None:
    query = model_scheme_to_query(ModelScheme(weight=W4G128))
    query |= {"m.act": "w9a9", "m.algo": "magic"}
    parsed = model_scheme_from_query(query)
    assert parsed.choice is None and parsed.algorithm is None and parsed.weight == W4G128
    assert len(parsed.problems) == 2 and "w9a9" in parsed.problems[0]
    assert model_scheme_from_query({"bits": "4"}).empty  # the explorer's keys are not ours


def test_model_scheme_rejects_inconsistent_parts() -> None:
    with pytest.raises(ValueError, match="W8A8"):
        ModelScheme(weight=W4G128, activation=A8_TOKEN, choice=ActivationChoice.W8A8)
    with pytest.raises(ValueError, match="per-tensor or per-feature"):
        ModelScheme.of(
            ActivationChoice.CUSTOM, weight=W4G128, activation=A8_TOKEN, ranges=RangeKind.STATIC
        )
    with pytest.raises(ValueError, match="static ranges need"):
        ModelScheme(weight=W4G128, ranges=RangeKind.STATIC)
    with pytest.raises(TypeError, match="weight"):
        ModelScheme(weight="int4")  # type: ignore[arg-type]
    preset = ModelScheme.of(ActivationChoice.W8A16, weight=W4G128)
    assert preset.weight == SchemePreset.W8A16.scheme.weight and preset.activation is None
    assert math.isfinite(len(preset.describe()))


# --- reusing the float reference ---------------------------------------------------------


def _rows_equal(a, b) -> None:
    assert a.cosines == b.cosines and a.sentences == b.sentences
    for ra, rb in zip(a.layers, b.layers, strict=True):
        assert ra == rb, ra.name


@pytest.mark.parametrize("algorithm", [Algorithm.RTN, Algorithm.HQQ])
def test_a_kept_float_reference_and_own_inputs_give_the_same_report(
    minilm: nn.Module, algorithm: Algorithm
) -> None:
    """The page keeps the float forward across schemes and compares with RTN on the
    report's own sentences: the same numbers as a report that recomputes both."""
    lin = quantize_linears(minilm, W4G128, algorithm)
    own = capture_sentence_inputs(minilm, SENTENCES)
    fresh = output_report(minilm, SENTENCES, lin, A8_TOKEN, held_out=own)
    ref = float_reference(minilm, SENTENCES)
    kept = output_report(minilm, SENTENCES, lin, A8_TOKEN, held_out=ref.capture, reference=ref)
    _rows_equal(fresh, kept)
    if algorithm is Algorithm.RTN:  # RTN against itself: no gain, by construction
        assert all(r.held_out_rtn == r.held_out for r in kept.layers)
    with pytest.raises(ValueError, match="these sentences"):
        output_report(minilm, SENTENCES[:2], lin, reference=ref)
