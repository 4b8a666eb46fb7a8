"""compare.weights: the WeightScheme value (normalised options, ids that round-trip),
which tensors are layers, and one scheme measured on weight and held-out outputs."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
import torch
from layer_builders import synthetic_layer

from dashboard.services.compare.measure import (
    check_layer,
    held_out_reference,
    quantize_and_measure,
)
from dashboard.services.compare.weights import (
    SWEEP_GPTQ,
    WeightScheme,
    calibration_note,
    linear_layer_of,
    offered_algorithms,
    quantize_scheme,
)
from dashboard.services.sources.choice import ExampleSource, ModelSource
from dashboard.services.sources.examples import Example
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.scheme import scheme_id
from quant_core import (
    Algorithm,
    AWQOptions,
    Format,
    GPTQOptions,
    HQQOptions,
    Mode,
    PerChannel,
    PerGroup,
    QuantConfig,
    ScaleDtype,
    ZeroPoint,
    error_metrics,
    layer_output_error,
    quantize,
)

CONFIGS = [
    QuantConfig(),
    QuantConfig(bits=4, granularity=PerGroup(32), scale_dtype=ScaleDtype.FP16),
    QuantConfig(bits=3, mode=Mode.ASYMMETRIC, granularity=PerChannel(0)),
    QuantConfig(bits=4, mode=Mode.ASYMMETRIC, zero_point=ZeroPoint.FLOAT_MIN),
    QuantConfig(format=Format.NF4, bits=4, granularity=PerGroup(16)),
]
SCHEMES = [
    WeightScheme(cfg, algorithm, options)
    for cfg in CONFIGS
    for algorithm, options in (
        (Algorithm.RTN, None),
        (Algorithm.GPTQ, None),
        (Algorithm.GPTQ, GPTQOptions(damp=0.25, act_order=False)),
        (Algorithm.AWQ, None),
        (Algorithm.HQQ, None),
    )
]


@pytest.mark.parametrize(
    ("tensor", "layer"),
    [
        ("encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.self.query"),
        ("encoder.layer.5.intermediate.dense.weight", "encoder.layer.5.intermediate.dense"),
        ("encoder.layer.3.output.dense.weight", "encoder.layer.3.output.dense"),
        ("pooler.dense.weight", "pooler.dense"),
        ("encoder.layer.0.attention.self.query.bias", None),
        ("encoder.layer.0.output.LayerNorm.weight", None),
        ("embeddings.word_embeddings.weight", None),
    ],
)
def test_linear_layer_of_model_weights(tensor: str, layer: str | None) -> None:
    assert linear_layer_of(ModelSource(tensor)) == layer


def test_other_sources_are_not_layers_and_get_data_free_algorithms() -> None:
    assert linear_layer_of(ExampleSource(next(iter(Example)))) is None
    assert offered_algorithms(None) == (Algorithm.RTN, Algorithm.HQQ)
    assert offered_algorithms("pooler.dense") == tuple(Algorithm)
    note = calibration_note(None, 36, 18)
    assert "calibration data" in note and "RTN and HQQ" in note
    assert "36 sentences" in calibration_note("pooler.dense", 36, 18)


def test_options_are_normalised() -> None:
    cfg = QuantConfig(bits=4)
    assert WeightScheme(cfg, Algorithm.GPTQ).options == SWEEP_GPTQ
    assert WeightScheme(cfg, Algorithm.GPTQ) == WeightScheme(cfg, Algorithm.GPTQ, SWEEP_GPTQ)
    assert WeightScheme(cfg, Algorithm.AWQ, AWQOptions()).options is None
    assert WeightScheme(cfg, Algorithm.HQQ, HQQOptions()) == WeightScheme(cfg, Algorithm.HQQ)
    with pytest.raises(ValueError, match="default options"):
        WeightScheme(cfg, Algorithm.AWQ, AWQOptions(n_grid=5))
    with pytest.raises(TypeError, match="RTN cannot take"):
        WeightScheme(cfg, Algorithm.RTN, GPTQOptions())
    with pytest.raises(TypeError, match="HQQ cannot take"):
        WeightScheme(cfg, Algorithm.HQQ, AWQOptions())
    with pytest.raises(TypeError, match="config"):
        WeightScheme("int4")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="algorithm"):
        WeightScheme(cfg, "gptq")  # type: ignore[arg-type]


def test_labels() -> None:
    cfg = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(128))
    assert WeightScheme(cfg).label == "int4 asym g128, fp32 scales"
    assert WeightScheme(cfg, Algorithm.GPTQ).label == "int4 asym g128, fp32 scales · GPTQ"
    fp16 = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(128), scale_dtype="fp16")
    assert WeightScheme(fp16).label == "int4 asym g128, fp16 scales"
    assert WeightScheme(QuantConfig.from_name("Q4_K")).label == "Q4_K"
    assert WeightScheme(cfg, Algorithm.GPTQ).algorithm_label == "GPTQ (damp 0.1, act-order)"
    assert WeightScheme(cfg, Algorithm.HQQ).algorithm_label == "HQQ"


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: f"{s.label}|{s.options}")
def test_scheme_ids_round_trip(scheme: WeightScheme) -> None:
    assert WeightScheme.from_id(scheme.scheme_id) == scheme
    assert WeightScheme.from_query(scheme.to_query()) == scheme
    if scheme.algorithm is Algorithm.RTN:
        assert scheme.scheme_id == scheme_id(scheme.config)


def test_scheme_ids_are_distinct() -> None:
    assert len({s.scheme_id for s in SCHEMES}) == len(set(SCHEMES)) == len(SCHEMES)


@pytest.mark.parametrize(
    ("sid", "match"),
    [
        ("bits=4&algo=magic", "algo='magic'"),
        ("bits=4&color=red", "'color' is not one of"),
        ("bits=4&bits=8", "repeats key 'bits'"),
        ("bits=4&damp=2", "damp='2'"),
        ("bits=4", "canonical"),
        ("x" * 1000, "too long"),
        ("bits", "bad query field"),
    ],
)
def test_bad_scheme_ids_raise(sid: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        WeightScheme.from_id(sid)


def test_reordered_id_is_not_canonical() -> None:
    scheme = WeightScheme(QuantConfig(bits=4), Algorithm.GPTQ)
    reordered = urlencode(dict(reversed(list(scheme.to_query().items()))))
    with pytest.raises(ValueError, match="canonical"):
        WeightScheme.from_id(reordered)


def test_algorithm_choice_round_trip() -> None:
    cfg = QuantConfig(bits=3)
    choice = AlgorithmChoice(algorithm=Algorithm.GPTQ, gptq_damp=0.3, act_order=False)
    scheme = WeightScheme.of(cfg, choice)
    assert scheme.options == GPTQOptions(damp=0.3, act_order=False)
    assert scheme.algorithm_choice() == choice
    assert WeightScheme.of(cfg, AlgorithmChoice(algorithm=Algorithm.AWQ)).options is None
    custom = WeightScheme(cfg, Algorithm.RTN).algorithm_choice(custom=True)
    assert not custom.custom_calibration  # RTN calibrates on nothing


def test_rtn_is_quantize_and_calibrated_algorithms_need_inputs() -> None:
    layer = synthetic_layer()
    cfg = QuantConfig(bits=4, granularity=PerGroup(16))
    res = quantize_scheme(layer.weight, WeightScheme(cfg))
    assert torch.equal(res.quantized.codes, quantize(layer.weight, cfg).codes)
    for algorithm in (Algorithm.GPTQ, Algorithm.AWQ):
        with pytest.raises(ValueError, match="calibration data"):
            quantize_scheme(layer.weight, WeightScheme(cfg, algorithm))
    with pytest.raises(TypeError):
        quantize_scheme(layer.weight, cfg)  # type: ignore[arg-type]


@pytest.mark.parametrize("algorithm", list(Algorithm))
def test_measurements_match_quant_core(algorithm: Algorithm) -> None:
    layer = synthetic_layer()
    scheme = WeightScheme(QuantConfig(bits=4, granularity=PerChannel(0)), algorithm)
    m = quantize_and_measure(layer.weight, scheme, layer)
    w_eff = m.result.effective_weight()
    assert torch.equal(m.effective, w_eff)
    assert m.metrics == error_metrics(layer.weight, w_eff)
    assert m.output == layer_output_error(layer.weight, w_eff, layer.x_eval, layer.bias)
    if algorithm is Algorithm.AWQ:
        assert torch.equal(m.quantized_input, layer.weight * m.result.input_scale)
    else:
        assert m.quantized_input is layer.weight
    assert quantize_and_measure(layer.weight, WeightScheme(scheme.config)).output is None
    reference = held_out_reference(layer.weight, layer)
    shared = quantize_and_measure(layer.weight, scheme, layer, reference)
    assert shared.output == m.output and shared.metrics == m.metrics


def test_gptq_trades_weight_error_for_output_error() -> None:
    """On inputs with outlier features GPTQ's weight MSE is higher than RTN's and its
    held-out output MSE lower: the reason the two Pareto frontiers differ."""
    layer = synthetic_layer()
    cfg = QuantConfig(bits=4, granularity=PerChannel(0))
    rtn = quantize_and_measure(layer.weight, WeightScheme(cfg), layer)
    gptq = quantize_and_measure(layer.weight, WeightScheme(cfg, Algorithm.GPTQ), layer)
    assert gptq.metrics.mse > rtn.metrics.mse
    assert gptq.output is not None and rtn.output is not None
    assert gptq.output.mse < rtn.output.mse


def test_check_layer_rejects_another_layer() -> None:
    layer = synthetic_layer(out=8, inp=16)
    check_layer(layer.weight, layer)
    with pytest.raises(ValueError, match=r"\(8, 32\)"):
        check_layer(torch.zeros(8, 32), layer)
    with pytest.raises(TypeError):
        check_layer(layer.weight, "layer")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is not layer"):
        quantize_and_measure(torch.zeros(4, 16), WeightScheme(QuantConfig()), layer)
