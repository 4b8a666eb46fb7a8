"""The explorer's metrics rows (``services.explorer.metric_cards``: the cards) on the page."""

from __future__ import annotations

import streamlit as st

from dashboard.components.charts import metric_cards
from dashboard.services.explorer.algorithm import AlgorithmExploration
from dashboard.services.explorer.explore import Exploration
from dashboard.services.explorer.metric_cards import (
    algorithm_cards,
    exploration_cards,
    scale_limit_note,
)


def metrics_row(exp: Exploration) -> None:
    """Two rows of six cards: errors, then storage and clipping (key ``metrics``), then,
    where the stored scales hit their dtype's limits, why the errors are what they are
    (the SQNR card's help says it too)."""
    note = scale_limit_note(exp)
    metric_cards(exploration_cards(exp, note), exp.describe(), key="metrics")
    if note:
        st.warning(note, icon=":material/warning:")


def algorithm_row(run: AlgorithmExploration) -> None:
    """One row of five cards for GPTQ/AWQ/HQQ (key ``algorithm_metrics``), then the run's
    notes."""
    metric_cards((algorithm_cards(run),), run.exploration.describe(), key="algorithm_metrics")
    if run.output is not None:
        st.caption(f"Layer {run.output.describe()}.")
    for line in run.notes():
        st.caption(line)
