"""The dashboard's activation services on small hand-built data: sentence sets, static-range
explorations, a layer evaluated with SmoothQuant and a held-out split, and their figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from dashboard.services.activations.figures import (
    layer_figures,
    matrix_heatmap,
    outlier_strip_figure,
    smoothing_figures,
    sweep_figure,
)
from dashboard.services.activations.layer import (
    EvalSplit,
    LayerInputs,
    LayerSettings,
    SchemeChoice,
    evaluate_layer,
    layer_inputs,
    linear_shapes,
    sweep_layer,
)
from dashboard.services.activations.sentences import HELD_OUT, RangeMode, SentenceSet
from dashboard.services.activations.source import activation_notes, capture_summary
from dashboard.services.activations.static import static_exploration
from dashboard.services.explorer.colour import robust_limit
from dashboard.services.sources.choice import ActivationSource
from quant_core import (
    LayerScheme,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    SchemePreset,
    capture_linear_inputs,
    clip_stats,
    quantize,
)
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES

INT8_TENSOR = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerTensor())
INT8_FEATURE = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=1))
INT8_TOKEN = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=0))
W8A8_TENSOR = LayerScheme(weight=SchemePreset.W8A8.scheme.weight, activation=INT8_TENSOR)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def outlier_input(tokens: int, features: int = 16, seed: int = 0) -> torch.Tensor:
    """N(0, 1) with feature 3 forty times larger: one outlier feature."""
    x = torch.randn(tokens, features, generator=gen(seed))
    x[:, 3] *= 40.0
    return x


def small_layer(seed: int = 1) -> LayerInputs:
    g = gen(seed)
    w = torch.randn(8, 16, generator=g) * 0.1
    b = torch.randn(8, generator=g)
    return LayerInputs("fc", w, b, outlier_input(64, seed=2), outlier_input(40, seed=3))


# --- sentence sets and sources ----------------------------------------------------------------


def test_sentence_set_repr_is_short_and_names_its_text() -> None:
    bundled = SentenceSet()
    assert bundled.is_bundled and bundled.sentences == CALIBRATION_SENTENCES
    assert repr(bundled) == "SentenceSet(calibration)"
    assert repr(HELD_OUT) == "SentenceSet(held_out)"
    assert HELD_OUT.sentences == HELD_OUT_SENTENCES and not HELD_OUT.is_bundled
    own = SentenceSet(("one sentence", "two sentences"))
    other = SentenceSet(("one sentence", "two sentences!"))
    assert len(repr(own)) < 60 and own.digest in repr(own)
    assert own.digest != other.digest and repr(own) != repr(other)
    assert own.label == "2 sentences of your own"


@pytest.mark.parametrize(
    ("sentences", "error"),
    [(("fine", "   "), ValueError), ((), ValueError), ("a bare string", TypeError)],
)
def test_sentence_set_rejects_bad_text(sentences: object, error: type) -> None:
    with pytest.raises(error):
        SentenceSet(sentences)  # type: ignore[arg-type]


def test_activation_source_validates_and_names_its_sentences() -> None:
    with pytest.raises(ValueError, match="layer="):
        ActivationSource("encoder layer; drop")
    with pytest.raises(TypeError, match="ranges"):
        ActivationSource(ranges="static")  # type: ignore[arg-type]
    dynamic = ActivationSource()
    assert dynamic.shown == SentenceSet() and dynamic.calibration is None
    assert activation_notes(dynamic) == ()
    own = SentenceSet(("calibrate on this",))
    static = ActivationSource(sentences=own, ranges=RangeMode.STATIC)
    assert static.shown == HELD_OUT and static.calibration == own
    (note,) = activation_notes(static)
    assert HELD_OUT.label in note and own.label in note


def test_capture_summary_counts_layers_and_bytes() -> None:
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    x = torch.randn(5, 4, generator=gen())
    cap = capture_linear_inputs(model, lambda: model(x))
    text = capture_summary(cap, 3)
    # 5 x 4 and 5 x 6 float32 inputs: 200 bytes
    assert text.startswith("Captured 2 layers on 3 sentences in ")
    assert text.endswith(f"{cap.nbytes / 1e6:.1f} MB") and cap.nbytes == 200


# --- static ranges -----------------------------------------------------------------------------


def test_static_exploration_counts_held_out_values_beyond_the_calibrated_range() -> None:
    calibration = torch.randn(200, 16, generator=gen(0))
    held_out = 3.0 * torch.randn(100, 16, generator=gen(1))
    result = static_exploration(calibration, held_out, INT8_TENSOR)
    hi = float(calibration.abs().max())
    assert result.ranges.n_tokens == 200
    # symmetric int8: levels -128 s .. 127 s with s = max|calibration| / 127 (min-max);
    # values clip beyond half a step past either end
    s = hi / 127
    beyond = int(((held_out > 127.5 * s) | (held_out < -128.5 * s)).sum())
    assert beyond > 0
    assert result.exploration.clip.n_clipped == beyond
    assert result.clipped_fraction == pytest.approx(beyond / held_out.numel())
    # the largest error is the most extreme value's distance to the end level it clipped to
    # (rounding errors are at most s/2, far smaller)
    far = max(float(held_out.max()) - 127 * s, -float(held_out.min()) - 128 * s)
    assert result.exploration.metrics.max_abs == pytest.approx(far, rel=1e-5)


def test_static_ranges_on_the_same_data_never_clip() -> None:
    x = outlier_input(50)
    for cfg in (INT8_TENSOR, INT8_FEATURE):
        assert static_exploration(x, x, cfg).exploration.clip.n_clipped == 0


@pytest.mark.parametrize(
    "cfg",
    [INT8_TOKEN, QuantConfig(bits=8, granularity=PerGroup(group_size=4))],
    ids=["per-token", "per-group"],
)
def test_static_exploration_rejects_ranges_that_cannot_carry_over(cfg: QuantConfig) -> None:
    x = outlier_input(20)
    with pytest.raises(ValueError, match=r"per-tensor or per-feature|no activation name"):
        static_exploration(x, x, cfg)


def test_static_exploration_needs_the_same_features() -> None:
    with pytest.raises(ValueError, match="16 features and the matrix 8"):
        static_exploration(outlier_input(10), torch.randn(10, 8), INT8_TENSOR)


# --- one layer ---------------------------------------------------------------------------------


def test_float_scheme_gives_exactly_the_float_output() -> None:
    inputs = small_layer()
    ev = evaluate_layer(inputs, LayerScheme(), RangeMode.DYNAMIC)
    assert torch.equal(ev.y_hat, ev.y)
    assert ev.metrics.mse == 0.0 and math.isinf(ev.metrics.sqnr_db)
    assert ev.weight_only is None and ev.activation_only is None


def test_smoothing_without_quantization_keeps_the_output() -> None:
    """(X / s)(W s)^T = X W^T: only float rounding, one per factor on each side, remains."""
    inputs = small_layer()
    for alpha in (0.0, 0.5, 1.0):
        ev = evaluate_layer(inputs, LayerScheme(), RangeMode.DYNAMIC, alpha)
        # each product term x_j w_j gets at most two roundings of 2^-24 relative error
        bound = 4 * 2**-24 * float((inputs.x_eval.abs() @ inputs.weight.abs().T).max())
        assert float((ev.y_hat - ev.y).abs().max()) <= bound


def test_smoothing_lowers_per_tensor_w8a8_error_on_an_outlier_feature() -> None:
    inputs = small_layer()
    plain = evaluate_layer(inputs, W8A8_TENSOR, RangeMode.DYNAMIC)
    smoothed = evaluate_layer(inputs, W8A8_TENSOR, RangeMode.DYNAMIC, 0.5)
    assert smoothed.metrics.mse < plain.metrics.mse


def test_static_ranges_are_calibrated_on_the_calibration_inputs() -> None:
    """Static per-tensor ranges from X_calib applied to X_eval clip exactly the values of
    X_eval that quantizing with X_calib's range would clip."""
    inputs = small_layer()
    scheme = LayerScheme(activation=INT8_TENSOR)
    ev = evaluate_layer(inputs, scheme, RangeMode.STATIC)
    reference = quantize(
        inputs.x_eval, INT8_TENSOR, ranges=quantize(inputs.x_calib, INT8_TENSOR).chosen_range
    )
    assert ev.activation_clip == clip_stats(inputs.x_eval, reference)
    assert torch.equal(ev.activation_q.codes, reference.codes)
    dynamic = evaluate_layer(inputs, scheme, RangeMode.DYNAMIC)
    assert dynamic.activation_clip.n_clipped == 0
    assert not torch.equal(dynamic.activation_q.codes, reference.codes)


def test_static_per_token_activations_are_refused() -> None:
    with pytest.raises(ValueError, match="per-token"):
        evaluate_layer(small_layer(), SchemePreset.W8A8.scheme, RangeMode.STATIC)


@pytest.mark.parametrize("ranges", list(RangeMode), ids=lambda r: r.value)
def test_sweep_points_are_the_evaluations_at_each_alpha(ranges: RangeMode) -> None:
    inputs = small_layer()
    sweep = sweep_layer(inputs, W8A8_TENSOR, ranges, (0.0, 0.3, 0.5, 1.0))
    for alpha, metrics in zip(sweep.alphas, sweep.metrics, strict=True):
        assert evaluate_layer(inputs, W8A8_TENSOR, ranges, alpha).metrics == metrics
    assert sweep.baseline == evaluate_layer(inputs, W8A8_TENSOR, ranges).metrics


def test_layer_inputs_reads_the_module_and_the_two_captures() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    a, b = torch.randn(5, 4, generator=gen(0)), torch.randn(3, 4, generator=gen(1))
    cal = capture_linear_inputs(model, lambda: model(a))
    held = capture_linear_inputs(model, lambda: model(b))
    inputs = layer_inputs(model, "2", cal, held)
    assert torch.equal(inputs.weight, model[2].weight.detach())
    assert inputs.x_calib.shape == (5, 6) and inputs.x_eval.shape == (3, 6)
    assert linear_shapes(model) == {"0": (6, 4), "2": (2, 6)}
    with pytest.raises(ValueError, match="ReLU"):
        layer_inputs(model, "1", cal, held)


def test_layer_settings_and_scheme_choice() -> None:
    assert [c.preset for c in SchemeChoice][:4] == list(SchemePreset)
    assert SchemeChoice.CUSTOM.preset is None
    s = LayerSettings("fc", LayerScheme(), alpha=0.25)
    assert s.alpha == 0.25
    assert "0.25" not in s.key and "fc" in s.key
    assert LayerSettings("fc", LayerScheme(), split=EvalSplit.HELD_OUT).key != s.key
    with pytest.raises(ValueError, match="alpha"):
        LayerSettings("fc", LayerScheme(), alpha=1.5)
    with pytest.raises(TypeError, match="scheme"):
        LayerSettings("fc", SchemePreset.W8A8)  # type: ignore[arg-type]


# --- figures -------------------------------------------------------------------------------


def test_outlier_strip_marks_the_outlier_feature() -> None:
    fig = outlier_strip_figure(outlier_input(100))
    bar = fig.data[0]
    colors = list(bar.marker.color)
    assert len(colors) == 16
    assert [i for i, c in enumerate(colors) if c != colors[0]] == [3]
    assert "1 outlier feature " in fig.layout.title.text and "feature 3" in fig.layout.title.text


def test_heatmap_is_reduced_to_its_cell_budget() -> None:
    fig = matrix_heatmap(torch.randn(600, 1536, generator=gen()), "big", max_cells=128 * 384)
    z = fig.data[0].z
    assert z.shape[0] * z.shape[1] <= 128 * 384
    assert "downsampled 600×1536" in fig.layout.title.text
    z_abs = np.sort(np.abs(np.asarray(z)).reshape(-1))
    # the 99.5th percentile of the shown |z| (numpy's "higher": an actual value)
    expected = z_abs[math.ceil(0.995 * (z_abs.size - 1))]
    assert fig.data[0].zmax == -fig.data[0].zmin == pytest.approx(float(expected))


def test_one_extreme_value_does_not_wash_out_a_map() -> None:
    # 1,000 cells of ±1 and one of 1,000: the old limit (max |value|) drew every cell but
    # one at 0.1% of the scale. The 99.5th percentile of |value| is 1; one cell lies beyond.
    m = torch.ones(10, 100)
    m[::2] = -1.0
    m[3, 7] = 1000.0
    fig = matrix_heatmap(m, "one outlier", max_cells=10_000)
    assert fig.data[0].zmax == 1.0 and fig.data[0].zmin == -1.0
    assert "±1 (99.5th pct of |value|; 1 beyond, saturated)" in fig.layout.title.text


def test_layer_figures_share_one_error_scale() -> None:
    ev = evaluate_layer(small_layer(), W8A8_TENSOR, RangeMode.DYNAMIC)
    figs = layer_figures(ev)
    errors = [ev.y_hat - ev.y, ev.y_weight_only - ev.y, ev.y_activation_only - ev.y]
    # small_layer is drawn cell by cell: the robust limit of every error cell shown
    expected = robust_limit(torch.cat([e.reshape(-1) for e in errors]))
    for fig in (figs.error, figs.weight_only, figs.activation_only):
        assert fig.data[0].zmax == pytest.approx(expected)
        assert fig.layout.title.text.split("<br>")[0] in (
            "Output error Ŷ − Y",
            "Weight only X Ŵᵀ + b − Y",
            "Activation only X̂ Wᵀ + b − Y",
        )
    assert figs.y.data[0].zmax == figs.y_hat.data[0].zmax
    assert figs.y.data[0].zmax == pytest.approx(robust_limit(torch.cat([ev.y, ev.y_hat])))
    float_side = layer_figures(
        evaluate_layer(small_layer(), SchemePreset.W8A16.scheme, RangeMode.DYNAMIC)
    )
    assert float_side.activation_only is None and float_side.weight_only is not None


def test_smoothing_figures_show_the_divided_input() -> None:
    inputs = small_layer()
    base = evaluate_layer(inputs, W8A8_TENSOR, RangeMode.DYNAMIC)
    smoothed = evaluate_layer(inputs, W8A8_TENSOR, RangeMode.DYNAMIC, 0.5)
    figs = smoothing_figures(inputs.x_eval, base, smoothed)
    after = figs.x_after.data[0].z
    assert after == pytest.approx((inputs.x_eval / smoothed.smoothing).numpy())
    with pytest.raises(ValueError, match="without SmoothQuant"):
        smoothing_figures(inputs.x_eval, base, base)


def test_sweep_figure_marks_the_current_alpha() -> None:
    inputs = small_layer()
    sweep = sweep_layer(inputs, W8A8_TENSOR, RangeMode.DYNAMIC)
    current = evaluate_layer(inputs, W8A8_TENSOR, RangeMode.DYNAMIC, 0.3).metrics
    fig = sweep_figure(sweep, 0.3, current)
    assert list(fig.data[0].y) == list(sweep.mse())
    assert list(fig.data[1].x) == [0.3] and list(fig.data[1].y) == [current.mse]
    assert len(sweep_figure(sweep, None, None).data) == 1
