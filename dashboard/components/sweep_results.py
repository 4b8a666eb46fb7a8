"""The sweep's results: the error-axis choice, the Pareto plot with the open action beside
it (so a clicked point opens without scrolling past the table), where the weight and
output frontiers part, the table and its CSV."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard.components import persist
from dashboard.components.open_scheme import open_in_explorer
from dashboard.components.persist import PERSIST
from dashboard.components.tables import with_error_formats
from dashboard.services.compare.frontier import ErrorAxis, frontier_difference, pareto_figure
from dashboard.services.compare.sweep_view import conclusion, has_output, shown_table
from dashboard.services.display.counts import counted
from dashboard.services.sources.prepared import PreparedSource

__all__ = ["axis_picker", "sweep_results"]

_AXIS = "sw_axis"
_PICK = "_sw_pick"
_IDS = "_sw_ids"
_COLUMNS = {
    "on_frontier": st.column_config.CheckboxColumn("weight frontier"),
    "on_output_frontier": st.column_config.CheckboxColumn("output frontier"),
    "mse": "weight MSE",
    "sqnr_db": st.column_config.NumberColumn("SQNR dB", format="%.2f"),
    "output_mse": "output MSE",
    "output_sqnr_db": st.column_config.NumberColumn("output SQNR dB", format="%.2f"),
    "cosine": st.column_config.NumberColumn("cosine", format="%.6f"),
    # the codes' width (TQ1_0's ternary codes: 2), beside what the layout spends per
    # element (TQ1_0: 1.6875); a bare "bits" read as the latter
    "bits": st.column_config.NumberColumn("code bits", format="%d"),
    "bits_per_element": st.column_config.NumberColumn("bits/elem", format="%.4f"),
    # not "s": the pages write s for the scale
    "seconds": st.column_config.NumberColumn("time (s)", format="%.3f"),
}


def axis_picker(layer: str | None) -> ErrorAxis:
    """The plot's error axis: weight MSE or SQNR, and output MSE for a model layer."""
    options = [a for a in ErrorAxis if layer is not None or not a.needs_layer]
    persist.defaults({_AXIS: ErrorAxis.MSE})
    if st.session_state[_AXIS] not in options:
        st.session_state[_AXIS] = ErrorAxis.MSE
    return st.radio(
        "Error axis",
        options,
        format_func=lambda a: a.label,
        key=_AXIS,
        persist_state=PERSIST,
        horizontal=True,
        help="Output MSE: the layer's outputs x ŵᵀ + b against x wᵀ + b on held-out "
        "sentences, which no algorithm calibrated on.",
    )


def _on_point() -> None:
    event = st.session_state.get("pareto") or {}
    points = event.get("selection", {}).get("points", [])
    ids = [p.get("customdata") for p in points if p.get("customdata")]
    if ids:
        st.session_state[_PICK] = ids[-1]


def _on_row() -> None:
    event = st.session_state.get("sweep_table") or {}
    rows = event.get("selection", {}).get("rows", [])
    ids = st.session_state.get(_IDS, [])
    if rows and rows[0] < len(ids):
        st.session_state[_PICK] = ids[rows[0]]


def _open_panel(
    source: PreparedSource, table: pd.DataFrame, has_output: bool, custom: bool
) -> None:
    st.markdown("**Open a scheme**")
    pick = st.session_state.get(_PICK)
    if pick in st.session_state[_IDS]:
        open_in_explorer(source, pick, key="sw_open", custom_calibration=custom)
    else:
        st.caption(
            "Click a point on the plot (or a row of the table below) to open that scheme "
            "in the explorer."
        )
    if has_output:
        st.info(frontier_difference(table).describe())


def sweep_results(
    source: PreparedSource, table: pd.DataFrame, axis: ErrorAxis, custom_calibration: bool
) -> None:
    """Draw the conclusion, the plot, the open panel beside it, the table and the CSV."""
    output = has_output(table)
    other = None
    if output:
        other = ErrorAxis.MSE if axis is ErrorAxis.OUTPUT_MSE else ErrorAxis.OUTPUT_MSE
    shown = shown_table(table, axis)
    st.session_state[_IDS] = shown.index.tolist()  # the rows in the order they are shown
    if len(table):
        st.markdown(conclusion(table, axis))
    left, right = st.columns([3, 1])
    left.plotly_chart(
        pareto_figure(table, axis, compare_with=other),
        key="pareto",
        on_select=_on_point,
        selection_mode="points",
    )
    with right.container(key="sw_open_panel"):
        _open_panel(source, table, output, custom_calibration)

    st.subheader(counted(len(table), "scheme"))
    st.caption(
        f"Sorted by bits per element, then best first by {axis.label}; click a heading to "
        "sort by another column. Errors at three significant digits; an empty cell is a "
        "part the scheme does not have (no zero point, no group size)."
    )
    st.dataframe(
        shown,
        key="sweep_table",
        on_select=_on_row,
        selection_mode="single-row",
        hide_index=True,
        placeholder="",
        column_config=with_error_formats(shown.columns, _COLUMNS),
    )
    st.download_button(
        "Table (CSV)",
        data=table.drop(columns=["scheme_id"]).to_csv(index=False),
        file_name="sweep.csv",
        mime="text/csv",
        key="sw_csv",
        on_click="ignore",
    )
