"""The explorer's algorithm control and its one exploration per run: round-to-nearest (the
source's own path, static activation ranges included), a weight algorithm (GPTQ, AWQ,
HQQ) or a research format; and the teaching panel that fits it."""

from __future__ import annotations

from dataclasses import dataclass, replace

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard import cache
from dashboard.components.algorithm import algorithm_picker
from dashboard.components.layer_source import explore_source, is_activation
from dashboard.services.compare.weights import (
    BUNDLED_PATH,
    calibration_note,
    linear_layer_of,
    offered_algorithms,
)
from dashboard.services.explorer.algorithm import AlgorithmExploration
from dashboard.services.explorer.block_values import BlockValues
from dashboard.services.explorer.explore import Exploration
from dashboard.services.explorer.research import ResearchExploration
from dashboard.services.explorer.teaching import TeachingPanel
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.research import ExplorerScheme, ResearchScheme
from quant_core import Algorithm
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES

__all__ = ["ExplorerRun", "explorer_algorithm", "run_explorer", "teaching_for"]


def explorer_algorithm(
    source: PreparedSource, scheme: ExplorerScheme, notice: DeltaGenerator | None = None
) -> tuple[AlgorithmChoice, str | None]:
    """Draw the algorithm control (current container) and return the choice with the
    bundled model's layer the source is the weight of (``None`` for any other tensor).
    ``notice``: where an algorithm the scheme cannot run is explained (near the top of the
    page), see ``algorithm_picker``.

    A linear weight of the bundled model is offered RTN, GPTQ, AWQ and HQQ; any other
    tensor RTN and HQQ, with the reason GPTQ/AWQ are missing. A research format and an
    activation source are round-to-nearest by nature and get RTN with a line saying so;
    an algorithm on a tensor with NaN/Inf falls back to RTN with a warning."""
    if isinstance(scheme, ResearchScheme):
        st.caption(
            "A research format is its own rounding rule (q_k), so it has no algorithm; "
            "GPTQ, AWQ and HQQ work on the integer and codebook formats."
        )
        return AlgorithmChoice(), None
    if is_activation(source):
        st.caption(
            "GPTQ, AWQ and HQQ choose weight codes; a layer's input is quantized "
            f"round-to-nearest (its weight is under {BUNDLED_PATH})."
        )
        return AlgorithmChoice(), None
    layer = linear_layer_of(source.choice)
    n_cal, n_held = len(CALIBRATION_SENTENCES), len(HELD_OUT_SENTENCES)
    st.caption(calibration_note(layer, n_cal, n_held, source.choice))
    choice = algorithm_picker(
        scheme, has_calibration=layer is not None, offered=offered_algorithms(layer), notice=notice
    )
    if choice.algorithm is not Algorithm.RTN and source.nonfinite is not None:
        st.warning(
            f"{choice.algorithm.label} needs finite values, and this tensor has NaN/Inf: "
            "showing RTN with the non-finite cells left out."
        )
        return AlgorithmChoice(), layer
    return choice, layer


@dataclass(frozen=True, eq=False)
class ExplorerRun:
    """The page's ``exploration``, with the ``algorithm`` or ``research`` run it came from
    (both ``None`` for round-to-nearest)."""

    exploration: Exploration
    algorithm: AlgorithmExploration | None = None
    research: ResearchExploration | None = None


def run_explorer(
    key: str,
    source: PreparedSource,
    scheme: ExplorerScheme,
    choice: AlgorithmChoice,
    layer: str | None,
    *,
    note: bool = True,
) -> ExplorerRun:
    """The exploration of ``source`` under ``scheme`` and ``choice`` (``key``: source,
    scheme and choice). Raises ``ValueError`` when the scheme cannot quantize the tensor.
    ``note``: draw a static activation source's clipping caption (``explore_source``);
    a second lookup of the same run passes ``False``."""
    if isinstance(scheme, ResearchScheme):
        rexp = cache.research_exploration(key, source.matrix, scheme)
        return ExplorerRun(rexp.exploration, research=rexp)
    if choice.algorithm is Algorithm.RTN:
        return ExplorerRun(explore_source(key, source, scheme, note=note))
    aexp = cache.algorithm_exploration(key, source.matrix, scheme, choice, layer)
    return ExplorerRun(aexp.exploration, algorithm=aexp)


def teaching_for(
    key: str, run: ExplorerRun, block: int, stats: BlockValues | None = None
) -> TeachingPanel:
    """The teaching panel: the research one for a research format; the scheme's own
    otherwise, with a note on what the algorithm changed. ``stats``: the block's values
    summarised (``cache.block_stats``)."""
    if run.research is not None:
        return cache.research_teaching(key, run.research)
    panel = cache.teaching(key, run.exploration, block, stats)
    if run.algorithm is None:
        return panel
    label = run.algorithm.choice.algorithm.label
    note = (
        f"The codes are {label}'s; the 'rounded' column is plain round-to-nearest of r under "
        f"the same scale and zero point, so a row where they differ is a code {label} moved."
    )
    if run.algorithm.shows_scaled_weight:
        note = (
            "Under AWQ the values r are of W·diag(s), the weight the codes encode; its codes "
            "are round-to-nearest of those."
        )
    return replace(panel, notes=(*panel.notes, note))
