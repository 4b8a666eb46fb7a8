"""Caches of the explorer's computation and figures: explorations, overview maps,
histograms, teaching panels, downloads, algorithms and research formats.

See ``dashboard.cache`` for the keying rule."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
import torch

from dashboard.services.activations.figures import (
    outlier_strip_figure,
)
from dashboard.services.activations.static import StaticExploration
from dashboard.services.activations.static import static_exploration as calibrated_exploration
from dashboard.services.explorer.algorithm import AlgorithmExploration, explore_algorithm
from dashboard.services.explorer.block_values import BlockValues, block_value_stats
from dashboard.services.explorer.buffers import BufferPool
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
from dashboard.services.explorer.histogram import HistogramView, histogram_view
from dashboard.services.explorer.research import ResearchExploration, explore_research
from dashboard.services.explorer.research_teaching import research_panel
from dashboard.services.explorer.ste import StePanel
from dashboard.services.explorer.ste import ste_panel as build_ste_panel
from dashboard.services.explorer.stored import scale_map_figure, scale_maps
from dashboard.services.explorer.teaching import TeachingPanel, teaching_panel
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.research import ResearchScheme
from quant_core import (
    QkVariant,
    QuantConfig,
)
from quant_core.calibration import HELD_OUT_SENTENCES

from .sources import linear_inputs

__all__ = [
    "algorithm_exploration",
    "block_stats",
    "download_files",
    "exploration",
    "histogram",
    "original_overview",
    "outlier_strip",
    "overview",
    "research_exploration",
    "research_teaching",
    "scale_map_figures",
    "static_exploration",
    "ste_panel",
    "teaching",
]


# The dequantized matrices of the explorations below: the one an evicted exploration held
# is written again by the next, instead of fresh memory each time (see BufferPool).
_DEQUANTIZED = BufferPool()


@st.cache_resource(max_entries=4, show_spinner=False)
def exploration(key: str, _matrix: torch.Tensor, _cfg: QuantConfig) -> Exploration:
    """``key`` must name the matrix (its source) and the config: ``source|config``."""
    out = _DEQUANTIZED.take(tuple(_matrix.shape), _matrix.device)
    return explore(_matrix, _cfg, out=out)


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
def block_stats(key: str, _exp: Exploration, block: int) -> BlockValues | None:
    """``key``: the source's key (or, when the maps show another matrix than the source,
    as AWQ's W·diag(s), the exploration's) and the block's cells: what the block's values
    alone decide, shared by every scheme of one granularity."""
    return block_value_stats(_exp, block)


@st.cache_resource(max_entries=8, show_spinner=False)
def histogram(
    key: str, _exp: Exploration, block: int, _stats: BlockValues | None = None
) -> HistogramView:
    """``key``: the exploration's key; a block's histogram changes only with it.
    ``_stats``: the block's ``block_values`` (cached on the source)."""
    return histogram_view(_exp, block, _stats)


@st.cache_resource(max_entries=8, show_spinner=False)
def teaching(
    key: str, _exp: Exploration, block: int, _stats: BlockValues | None = None
) -> TeachingPanel:
    """``key``: the exploration's key."""
    return teaching_panel(_exp, block, _stats)


@st.cache_resource(max_entries=4, show_spinner=False)
def scale_map_figures(key: str, _exp: Exploration) -> tuple[tuple[str, go.Figure], ...]:
    """``key``: the exploration's key. The maps of what the format stores per block."""
    return tuple((m.name, scale_map_figure(m)) for m in scale_maps(_exp))


@st.cache_resource(max_entries=2, show_spinner="Preparing the downloads…")
def download_files(key: str, _exp: Exploration, tensor_name: str | None = None) -> DownloadFiles:
    """``key``: the exploration's key; ``tensor_name``: the source tensor's name, recorded
    in the export. Built only when the user asks for the downloads."""
    return build_download_files(_exp, tensor_name)


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


@st.cache_resource(max_entries=4, show_spinner="Running the backward pass…")
def ste_panel(
    key: str, _matrix: torch.Tensor, bits: int, variant: QkVariant, rescale: bool
) -> StePanel:
    """``key``: the source (the gradients depend on its values, bits, variant, rescale)."""
    return build_ste_panel(_matrix, bits, variant, rescale)


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
