"""The explorer's view of an activation source: the outlier strip above the heatmaps, and
the exploration under static ranges (calibrated on other sentences) when the source asks."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.services.activations.sentences import RangeMode
from dashboard.services.explorer.explore import Exploration
from dashboard.services.sources.choice import ActivationSource
from dashboard.services.sources.prepared import PreparedSource
from quant_core import QuantConfig


def is_activation(source: PreparedSource) -> bool:
    """Whether the explorer shows a linear layer's input (its scheme picker then names
    granularities per token / per feature)."""
    return isinstance(source.choice, ActivationSource)


def outlier_strip(source: PreparedSource) -> None:
    """For an activation source, the per-feature max-|x| bars with the outliers marked;
    nothing for any other source."""
    if isinstance(source.choice, ActivationSource):
        st.plotly_chart(
            cache.outlier_strip(source.key, source.matrix),
            key="act_outlier_strip",
            config={"displaylogo": False},
        )


def explore_source(
    key: str, source: PreparedSource, cfg: QuantConfig, *, note: bool = True
) -> Exploration:
    """The source's exploration under ``cfg`` (``key``: ``source|config``): with ranges
    calibrated on the calibration sentences for a static activation source (and, with
    ``note``, a caption of how many held-out values clip), with the matrix's own ranges
    otherwise. Raises ``ValueError`` as ``explore`` does, and for a static source under a
    per-token or per-group scheme."""
    choice = source.choice
    if not isinstance(choice, ActivationSource) or choice.calibration is None:
        return cache.exploration(key, source.matrix, cfg)
    calibration = cache.linear_inputs(choice.calibration.sentences)[choice.layer]
    result = cache.static_exploration(key, calibration, source.matrix, cfg)
    clip = result.exploration.clip
    if not note:
        return result.exploration
    st.caption(
        f"{RangeMode.STATIC.label}: ranges from {result.ranges.n_tokens:,} calibration "
        f"tokens; {clip.n_clipped:,} of {clip.n_elements:,} held-out values "
        f"({result.clipped_fraction:.2%}) fall outside them and clip."
    )
    return result.exploration
