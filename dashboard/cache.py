"""Streamlit caches over the services, keyed on small hashable inputs only.

Tensors are never hashed (``st.cache_*`` samples big arrays and returned stale results for
them; see shared notes): every cache takes a short string key built from frozen values
(``repr`` of a ``SourceChoice``/``QuantConfig``/``ViewOptions``) and receives the heavy
objects as ``_``-prefixed arguments, which Streamlit leaves out of the hash.
Every cache has bounded ``max_entries``. An exploration holds the dequantized matrix and the
codes (about 80 MB at 4096x4096, 1.3 GB at the 64-million-element limit, plus the error map
when a max-|value| overview asks for it), so at most four are kept.
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go
import streamlit as st
import torch

from dashboard.services.activations.figures import (
    LayerFigures,
    SmoothingFigures,
    layer_figures,
    outlier_strip_figure,
    smoothing_figures,
)
from dashboard.services.activations.layer import EvalSplit, LayerInputs, evaluate_layer, sweep_layer
from dashboard.services.activations.layer import layer_inputs as load_layer_inputs
from dashboard.services.activations.sentences import RangeMode
from dashboard.services.activations.static import StaticExploration
from dashboard.services.activations.static import static_exploration as calibrated_exploration
from dashboard.services.compare.ab import ABResult, compare_ab
from dashboard.services.compare.weights import WeightScheme
from dashboard.services.explorer.algorithm import AlgorithmExploration, explore_algorithm
from dashboard.services.explorer.explore import Exploration, explore
from dashboard.services.explorer.exports import DownloadFiles
from dashboard.services.explorer.exports import download_files as build_download_files
from dashboard.services.explorer.heatmaps import (
    OriginalMap,
    OverviewFigures,
    ViewOptions,
    original_key,
    original_map,
    overview_figures,
)
from dashboard.services.explorer.histogram import histogram_figure
from dashboard.services.explorer.research import ResearchExploration, explore_research
from dashboard.services.explorer.research_teaching import research_panel
from dashboard.services.explorer.teaching import TeachingPanel, teaching_panel
from dashboard.services.io import (
    LoadedTensor,
    TensorInfo,
    list_safetensors_file,
    list_tensors,
    load_safetensors_file_tensor,
    load_tensor,
)
from dashboard.services.model.checkpoint import Checkpoint, read_tensor
from dashboard.services.model.embeddings import load_bundled_model
from dashboard.services.model.evaluate import ModelEvalResult, evaluate_safetensors
from dashboard.services.model.files import bundled_model_file
from dashboard.services.model.folder import find_checkpoints, open_checkpoint
from dashboard.services.model.linears import QuantizedLinears, quantize_linears, static_ranges
from dashboard.services.model.outputs import ModelOutputs, output_report
from dashboard.services.model.roots import ModelRoots
from dashboard.services.model.streaming import ReportStore
from dashboard.services.sources.choice import SourceChoice
from dashboard.services.sources.prepared import PreparedSource, prepare
from dashboard.services.sources.synthetic import SyntheticSpec, make_synthetic
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.model import ModelScheme
from dashboard.services.state.research import ResearchScheme
from quant_core import (
    ActivationCapture,
    AlphaSweep,
    LayerScheme,
    LinearEval,
    QuantConfig,
    capture_sentence_inputs,
)
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES, transformer_of


@st.cache_resource(max_entries=8, show_spinner=False)
def synthetic_tensor(key: str, _spec: SyntheticSpec) -> torch.Tensor:
    return make_synthetic(_spec)


@st.cache_resource(max_entries=1, show_spinner=False)
def model_file() -> Path:
    return bundled_model_file()


@st.cache_resource(max_entries=1, show_spinner=False)
def model_tensor_infos() -> tuple[TensorInfo, ...]:
    return list_safetensors_file(model_file())


@st.cache_resource(max_entries=8, show_spinner=False)
def model_tensor(name: str) -> LoadedTensor:
    return load_safetensors_file_tensor(model_file(), name)


@st.cache_resource(max_entries=4, show_spinner=False)
def upload_infos(file_id: str, filename: str, _data: bytes) -> tuple[TensorInfo, ...]:
    return list_tensors(filename, _data)


@st.cache_resource(max_entries=4, show_spinner=False)
def upload_tensor(file_id: str, filename: str, name: str | None, _data: bytes) -> LoadedTensor:
    return load_tensor(filename, _data, name)


@st.cache_resource(max_entries=8, show_spinner=False)
def prepared(
    key: str, _choice: SourceChoice, _tensor: torch.Tensor, label: str, notes: tuple[str, ...]
) -> PreparedSource:
    """``key``: ``repr`` of the source choice (the tensor it names never changes)."""
    return prepare(_choice, _tensor, label, notes)


@st.cache_resource(max_entries=4, show_spinner=False)
def exploration(key: str, _matrix: torch.Tensor, _cfg: QuantConfig) -> Exploration:
    """``key`` must name the matrix (its source) and the config: ``source|config``."""
    return explore(_matrix, _cfg)


@st.cache_resource(max_entries=4, show_spinner=False)
def overview(
    key: str, _exp: Exploration, _opts: ViewOptions, source_key: str | None = None
) -> OverviewFigures:
    """``key``: the exploration's key plus the view options. With ``source_key`` (the
    source's key), the original map of a larger tensor is built once per source, options
    and boundaries (``original_key``): a new bit width or mode does not rebuild it."""
    common = None if source_key is None else original_key(_exp, _opts)
    base = None if common is None else original_overview(f"{source_key}|{common}", _exp, _opts)
    return overview_figures(_exp, _opts, base)


@st.cache_resource(max_entries=4, show_spinner=False)
def original_overview(key: str, _exp: Exploration, _opts: ViewOptions) -> OriginalMap:
    """``key``: the source's key plus ``original_key(exp, opts)``."""
    return original_map(_exp, _opts)


@st.cache_resource(max_entries=8, show_spinner=False)
def histogram(key: str, _exp: Exploration, block: int) -> go.Figure:
    """``key``: the exploration's key; a block's histogram changes only with it."""
    return histogram_figure(_exp, block)


@st.cache_resource(max_entries=8, show_spinner=False)
def teaching(key: str, _exp: Exploration, block: int) -> TeachingPanel:
    """``key``: the exploration's key."""
    return teaching_panel(_exp, block)


@st.cache_resource(max_entries=4, show_spinner=False)
def ab_result(
    key: str, _matrix: torch.Tensor, _cfg_a: QuantConfig, _cfg_b: QuantConfig
) -> ABResult:
    """``key``: source, scheme A and scheme B."""
    return compare_ab(_matrix, _cfg_a, _cfg_b)


@st.cache_resource(max_entries=1, show_spinner="Loading all-MiniLM-L6-v2…")
def bundled_model() -> torch.nn.Module:
    """The bundled sentence-transformer, loaded once per server (about 8 s)."""
    return load_bundled_model()


@st.cache_resource(max_entries=4, show_spinner="Running the model on the sentences…")
def linear_inputs(sentences: tuple[str, ...]) -> ActivationCapture:
    """The input of every linear layer of the bundled model on ``sentences`` (real tokens,
    ``[tokens, in_features]`` per layer; about 20 MB for 32 sentences). Shared by the
    Activations source, the layer page and the calibration of GPTQ/AWQ."""
    return capture_sentence_inputs(bundled_model(), sentences)


@st.cache_resource(max_entries=8, show_spinner="Quantizing every linear weight of the file…")
def model_report(
    key: str, _path: Path, _cfg: QuantConfig, _algorithm: AlgorithmChoice
) -> ModelEvalResult:
    """``key``: the model file's identity, the scheme and the (data-free) algorithm."""
    return evaluate_safetensors(
        _path, _cfg, algorithm=_algorithm.algorithm, options=_algorithm.options
    )


@st.cache_resource(max_entries=4, ttl=60, show_spinner=False)
def model_folders(key: str, _roots: ModelRoots) -> tuple[Path, ...]:
    """``key``: ``roots.key()``. The model folders under the allowed roots (looked for
    again after a minute: new downloads appear)."""
    return find_checkpoints(_roots)


@st.cache_resource(max_entries=8, show_spinner="Reading the model's headers…")
def model_checkpoint(key: str, _path: str, _roots: ModelRoots) -> Checkpoint:
    """``key``: ``folder.snapshot_key(path, roots)`` (the roots, the path and its files'
    sizes and times: a changed file reads the headers again). Errors are not cached."""
    return open_checkpoint(_path, _roots)


@st.cache_resource(max_entries=4, show_spinner="Reading the tensor…")
def folder_tensor(key: str, _checkpoint: Checkpoint, name: str) -> LoadedTensor:
    """``key``: ``checkpoint.key`` (its shards' names, sizes and times) and ``name``."""
    return read_tensor(_checkpoint, name)


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
    return output_report(
        bundled_model(),
        sentences,
        linears,
        _scheme.activation,
        ranges=ranges,
        held_out=linear_inputs(sentences),
    )


# --- Activations and layer outputs (H7) -----------------------------------------------------


@st.cache_resource(max_entries=4, show_spinner=False)
def static_exploration(
    key: str, _calibration: torch.Tensor, _matrix: torch.Tensor, _cfg: QuantConfig
) -> StaticExploration:
    """``key``: ``source|config``; the source names both sentence sets and the layer."""
    return calibrated_exploration(_calibration, _matrix, _cfg)


@st.cache_resource(max_entries=8, show_spinner=False)
def outlier_strip(key: str, _matrix: torch.Tensor) -> go.Figure:
    """``key``: the activation source."""
    return outlier_strip_figure(_matrix)


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


@st.cache_resource(max_entries=2, show_spinner="Preparing the downloads…")
def download_files(key: str, _exp: Exploration) -> DownloadFiles:
    """``key``: the exploration's key. Built only when the user asks for the downloads."""
    return build_download_files(_exp)


# --- Sweep and A/B with algorithms (H9) ------------------------------------------------------


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


# --- Explorer: weight algorithms and research formats (issue 9) -------------------------------


@st.cache_resource(max_entries=4, show_spinner="Running the algorithm on the weight…")
def algorithm_exploration(
    key: str,
    _matrix: torch.Tensor,
    _cfg: QuantConfig,
    _choice: AlgorithmChoice,
    layer: str | None,
) -> AlgorithmExploration:
    """``key``: ``source|config|choice.key()``. ``layer``: the bundled model's linear layer
    whose weight the matrix is (its inputs calibrate GPTQ/AWQ and give the held-out output
    errors), ``None`` for any other tensor (data-free algorithms, no output errors)."""
    calibration = held_out = None
    if layer is not None:
        if _choice.algorithm.needs_calibration:
            calibration = linear_inputs(_choice.calibration)[layer]
        held_out = linear_inputs(HELD_OUT_SENTENCES)[layer]
    return explore_algorithm(
        _matrix,
        _cfg,
        _choice,
        calibration=calibration,
        held_out=held_out,
        n_held_out_sentences=len(HELD_OUT_SENTENCES),
    )


@st.cache_resource(max_entries=4, show_spinner=False)
def research_exploration(
    key: str, _matrix: torch.Tensor, _scheme: ResearchScheme
) -> ResearchExploration:
    """``key``: ``source|scheme`` (the ``ResearchScheme``'s ``repr``)."""
    return explore_research(_matrix, _scheme)


@st.cache_resource(max_entries=8, show_spinner=False)
def research_teaching(key: str, _rexp: ResearchExploration) -> TeachingPanel:
    """``key``: the research exploration's key."""
    return research_panel(_rexp)
