"""Sweep & frontier: many schemes on one tensor, every metric, the Pareto frontier."""

from __future__ import annotations

import streamlit as st

from dashboard.components.open_scheme import open_in_explorer
from dashboard.components.source import finite_source_or_stop
from dashboard.components.sweep_grid import run_with_progress, sweep_grid_form
from dashboard.services.compare.frontier import ErrorAxis, pareto_figure
from dashboard.services.compare.sweep import sweep_table

st.title("Sweep & Pareto frontier")
source = finite_source_or_stop("a sweep")

request = sweep_grid_form(tuple(source.matrix.shape), source.key)
if request is None:
    st.info("Pick the schemes to compare and press **Run sweep**.")
    st.stop()

for skip in request.expansion.skipped:
    st.caption(f"Skipped {skip.label}: {skip.reason}")
if not request.expansion.configs:
    st.warning("No scheme of this grid fits this tensor.")
    st.stop()

result = run_with_progress(request, source.matrix)
table = sweep_table(result)

axis = st.radio(
    "Error axis",
    list(ErrorAxis),
    format_func=lambda a: a.label,
    key="sw_axis",
    horizontal=True,
)
event = st.plotly_chart(
    pareto_figure(table, axis),
    key="pareto",
    on_select="rerun",
    selection_mode="points",
)
picked = [p.get("customdata") for p in event.selection.get("points", [])] if event else []
st.caption("Click a point (or pick a table row) to open that scheme in the explorer.")

st.subheader(f"{len(table)} schemes")
shown = table.drop(columns=["scheme_id"])
selection = st.dataframe(
    shown,
    key="sweep_table",
    on_select="rerun",
    selection_mode="single-row",
    hide_index=True,
    column_config={
        "on_frontier": st.column_config.CheckboxColumn("frontier"),
        "mse": st.column_config.NumberColumn(format="%.4e"),
        "sqnr_db": st.column_config.NumberColumn("SQNR dB", format="%.2f"),
        "bits_per_element": st.column_config.NumberColumn("bits/elem", format="%.4f"),
    },
)
rows = selection.selection.get("rows", []) if selection else []
if rows:
    picked.append(table.iloc[rows[0]]["scheme_id"])
if picked and picked[-1]:
    open_in_explorer(source, str(picked[-1]), key="sw_open")
st.download_button(
    "Table (CSV)",
    data=shown.to_csv(index=False),
    file_name="sweep.csv",
    mime="text/csv",
    key="sw_csv",
)
