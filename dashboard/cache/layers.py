"""Caches of the layer-outputs page and of the A/B and sweep comparisons of layers.

See ``dashboard.cache`` for the keying rule."""

from __future__ import annotations

import streamlit as st
import torch

from dashboard.services.activations.figures import (
    LayerFigures,
    SmoothingFigures,
    layer_figures,
    smoothing_figures,
)
from dashboard.services.activations.layer import EvalSplit, LayerInputs, evaluate_layer, sweep_layer
from dashboard.services.activations.layer import layer_inputs as load_layer_inputs
from dashboard.services.activations.sentences import RangeMode
from dashboard.services.compare.ab import ABResult, compare_ab
from dashboard.services.compare.weights import WeightScheme
from quant_core import (
    AlphaSweep,
    LayerScheme,
    LinearEval,
    QuantConfig,
)
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES, transformer_of

from .sources import bundled_model, linear_inputs

__all__ = [
    "ab_result",
    "ab_schemes",
    "compare_layer",
    "layer_eval",
    "layer_inputs",
    "layer_plots",
    "layer_sweep",
    "smoothing_plots",
]


@st.cache_resource(max_entries=2, show_spinner="Capturing the layer inputs…")
def layer_inputs(name: str, split: EvalSplit) -> LayerInputs:
    """The bundled model's layer ``name``: weight, bias and its inputs on the calibration
    sentences and on those of ``split``."""
    calibration = linear_inputs(CALIBRATION_SENTENCES)
    evaluation = (
        calibration if split is EvalSplit.CALIBRATION else linear_inputs(HELD_OUT_SENTENCES)
    )
    return load_layer_inputs(transformer_of(bundled_model()), name, calibration, evaluation)


@st.cache_resource(max_entries=8, show_spinner=False)
def layer_eval(
    key: str, _inputs: LayerInputs, _scheme: LayerScheme, ranges: RangeMode, alpha: float | None
) -> LinearEval:
    """``key``: layer, split and scheme (``repr``); ``alpha`` ``None`` without SmoothQuant."""
    return evaluate_layer(_inputs, _scheme, ranges, alpha)


@st.cache_resource(max_entries=8, show_spinner=False)
def layer_plots(key: str, _ev: LinearEval) -> LayerFigures:
    """``key``: the evaluation's key and alpha."""
    return layer_figures(_ev)


@st.cache_resource(max_entries=4, show_spinner="Sweeping α…")
def layer_sweep(
    key: str, _inputs: LayerInputs, _scheme: LayerScheme, ranges: RangeMode
) -> AlphaSweep:
    """``key``: layer, split and scheme."""
    return sweep_layer(_inputs, _scheme, ranges)


@st.cache_resource(max_entries=4, show_spinner=False)
def smoothing_plots(
    key: str, _x: torch.Tensor, _base: LinearEval, _smoothed: LinearEval
) -> SmoothingFigures:
    """``key``: the layer settings' key and alpha."""
    return smoothing_figures(_x, _base, _smoothed)


@st.cache_resource(max_entries=2, show_spinner="Capturing the layer's inputs…")
def compare_layer(name: str, calibration: tuple[str, ...]) -> LayerInputs:
    """The bundled model's layer ``name``: weight, bias, its inputs on ``calibration``
    (what GPTQ/AWQ learn from) and on ``HELD_OUT_SENTENCES`` (output errors)."""
    return load_layer_inputs(
        transformer_of(bundled_model()),
        name,
        linear_inputs(calibration),
        linear_inputs(HELD_OUT_SENTENCES),
    )


@st.cache_resource(max_entries=4, show_spinner=False)
def ab_result(
    key: str, _matrix: torch.Tensor, _cfg_a: QuantConfig, _cfg_b: QuantConfig
) -> ABResult:
    """``key``: source, scheme A and scheme B."""
    return compare_ab(_matrix, _cfg_a, _cfg_b)


@st.cache_resource(max_entries=4, show_spinner="Quantizing A and B…")
def ab_schemes(
    key: str,
    _matrix: torch.Tensor,
    _a: WeightScheme,
    _b: WeightScheme,
    _layer_a: LayerInputs | None,
    _layer_b: LayerInputs | None,
) -> ABResult:
    """``key``: source, both schemes' ids and, for a layer, each side's calibration."""
    return compare_ab(_matrix, _a, _b, layer_a=_layer_a, layer_b=_layer_b)
