"""Caches of the whole-model page: per-layer reports, quantized linears and sentence outputs.

See ``dashboard.cache`` for the keying rule."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.services.model.evaluate import ModelEvalResult, evaluate_safetensors
from dashboard.services.model.linears import QuantizedLinears, quantize_linears, static_ranges
from dashboard.services.model.outputs import (
    FloatReference,
    ModelOutputs,
    float_reference,
    output_report,
)
from dashboard.services.model.streaming import ReportStore
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.model import ModelScheme
from quant_core import (
    QuantConfig,
)

from .sources import bundled_model, linear_inputs

__all__ = [
    "folder_reports",
    "model_float_reference",
    "model_linears",
    "model_outputs",
    "model_report",
]


@st.cache_resource(max_entries=8, show_spinner="Quantizing every linear weight of the file…")
def model_report(
    key: str, _path: Path, _cfg: QuantConfig, _algorithm: AlgorithmChoice
) -> ModelEvalResult:
    """``key``: the model file's identity, the scheme and the (data-free) algorithm."""
    return evaluate_safetensors(
        _path, _cfg, algorithm=_algorithm.algorithm, options=_algorithm.options
    )


@st.cache_resource(max_entries=1, show_spinner=False)
def folder_reports() -> ReportStore:
    """The rows of streamed folder reports, kept per (folder content, scheme) for the
    last 8 reports: an interrupted report resumes, a finished one shows at once."""
    return ReportStore(max_reports=8)


@st.cache_resource(max_entries=4, show_spinner="Quantizing every linear layer…")
def model_linears(key: str, _scheme: ModelScheme) -> QuantizedLinears:
    """``key``: ``scheme.weights_key()``. The bundled model's linear weights under the
    scheme's weight config and algorithm (GPTQ/AWQ calibrated on its sentences)."""
    choice = _scheme.algorithm
    calibration = linear_inputs(choice.calibration) if choice.algorithm.needs_calibration else None
    return quantize_linears(
        bundled_model(),
        _scheme.weight,
        choice.algorithm,
        options=choice.options,
        calibration=calibration,
    )


@st.cache_resource(max_entries=2, show_spinner="Running the model on the sentences…")
def model_float_reference(sentences: tuple[str, ...]) -> FloatReference:
    """The float model on ``sentences`` (inputs, outputs of every linear layer, embeddings):
    the same for every scheme, so a new bit width does not run it again."""
    return float_reference(bundled_model(), sentences)


@st.cache_resource(max_entries=4, show_spinner="Running the quantized model on the sentences…")
def model_outputs(key: str, _scheme: ModelScheme, sentences: tuple[str, ...]) -> ModelOutputs:
    """``key``: ``scheme.key()``; the sentences are hashed as they are (at most 256 short
    lines). Static ranges come from the calibration sentences; the held-out comparison
    with RTN runs on ``sentences`` themselves."""
    linears = model_linears(_scheme.weights_key(), _scheme)
    ranges = None
    if _scheme.static and _scheme.activation is not None:
        capture = linear_inputs(_scheme.algorithm.calibration)
        ranges = static_ranges(capture, _scheme.activation, linears)
    reference = model_float_reference(sentences)
    return output_report(
        bundled_model(),
        sentences,
        linears,
        _scheme.activation,
        ranges=ranges,
        # the held-out comparison with RTN runs on the sentences themselves
        held_out=reference.capture,
        reference=reference,
    )
