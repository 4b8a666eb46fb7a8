"""Explorer: one tensor, one scheme, everything that happened to its numbers."""

from __future__ import annotations

import re

import streamlit as st

from dashboard import cache
from dashboard.components import url
from dashboard.components.algorithm import seed_from_url as seed_algorithm_from_url
from dashboard.components.charts import histogram_chart, static_table, zoom_chart
from dashboard.components.config import config_picker, seed_from_url
from dashboard.components.explorer_run import explorer_algorithm, run_explorer, teaching_for
from dashboard.components.layer_source import is_activation, outlier_strip
from dashboard.components.metrics import algorithm_row, metrics_row
from dashboard.components.source import current_source
from dashboard.components.view import (
    block_chooser,
    current_view,
    overview_maps,
    view_options,
    zoom_window,
)
from dashboard.components.view import seed_from_url as seed_view_from_url
from dashboard.services.display.reduce import needs_reduction
from dashboard.services.explorer.explore import block_cells
from dashboard.services.explorer.zoom import zoom_view
from dashboard.services.state.algorithm import algorithm_to_query
from dashboard.services.state.research import scheme_to_query
from dashboard.services.state.source import source_to_query
from dashboard.services.state.view import view_to_query

if url.first_run("explorer_scheme"):
    seed_from_url(research=True)
    seed_algorithm_from_url()
    seed_view_from_url()

st.title("Quantization explorer")
source = current_source()
url.show_warnings()
if source is None:
    st.stop()

rows, cols = source.matrix.shape
with st.sidebar:
    st.header("Scheme")
    scheme = config_picker(cols, research=True, activation_terms=is_activation(source))
    st.header("Algorithm")
    algo, layer = explorer_algorithm(source, scheme)
query = {**source_to_query(source.choice), **scheme_to_query(scheme), **algorithm_to_query(algo)}
# Written before the work below, so a run that stops early still leaves URL and page agreeing.
url.write({**query, **view_to_query(current_view())})

st.caption(f"**{source.label}** · shape {list(source.original_shape)} · {source.dtype_label}")
for note in source.notes:
    st.info(note)
if source.nonfinite is not None:
    st.warning(
        f"{source.nonfinite.describe()}. Quantization needs finite values: the non-finite "
        "cells can be left out (shown magenta, excluded from every metric)."
    )
    if not st.checkbox("Quantize the finite values only", value=True, key="v_finite_only"):
        st.stop()

key = f"{source.key}|{scheme!r}|{algo.key()}"
try:
    run = run_explorer(key, source, scheme, algo, layer)
except ValueError as exc:
    st.error(f"This scheme cannot quantize this tensor: {exc}")
    st.stop()
exp = run.exploration

metrics_row(exp)
if run.algorithm is not None:
    algorithm_row(run.algorithm)

outlier_strip(source)
opts = view_options(reduced=needs_reduction((rows, cols)))
# The original map is cached per source, except under AWQ, whose maps show W·diag(s): that
# "original" belongs to this scheme and calibration.
scaled = run.algorithm is not None and run.algorithm.shows_scaled_weight
figs = cache.overview(f"{key}|{opts!r}", exp, opts, source_key=key if scaled else source.key)
overview_maps(figs)


@st.fragment
def details() -> None:
    """Zoom, histogram and teaching panel: moving their controls reruns only this part,
    not the heatmaps above (nor the quantization)."""
    with st.expander("Zoom: full resolution with per-cell hover", expanded=rows * cols > 32_768):
        win = zoom_window(rows, cols)
        zoom_chart(zoom_view(exp, win.row, win.col, win.size), key="zoom")

    st.subheader("Distribution and levels")
    block = block_chooser(exp.config, exp.n_blocks)
    # The block's values (range, extremes, histogram counts) are the same for every scheme
    # of this granularity: cached on the source, as the original map is.
    values_key = f"{key if scaled else source.key}|{block_cells(exp, block)!r}"
    stats = cache.block_stats(values_key, exp, block)
    histogram_chart(cache.histogram(key, exp, block, stats), key="histogram")

    st.subheader("How a value becomes a code")
    panel = teaching_for(key, run, block, stats)
    st.markdown(panel.markdown)
    st.caption(panel.symbols)
    for note in panel.notes:
        st.info(note)
    if panel.figure is not None:
        st.plotly_chart(panel.figure, key="transfer", config={"displaylogo": False})
    static_table(panel.table, key="worked")
    if panel.scales is not None:
        st.caption("Every block's scale (and zero point or offset):")
        st.dataframe(panel.scales, hide_index=True, key="worked_scales")
    # Written here, so a fragment rerun (a new block or zoom window) updates the link too.
    url.write({**query, **view_to_query(current_view())})


@st.fragment
def downloads() -> None:
    """Built only when asked: preparing them on every rerun cost up to 0.2 s at 4096²."""
    st.subheader("Downloads")
    if st.session_state.get("dl_ready") != key:
        st.caption(
            f"Metrics (CSV), the quantized tensor as .safetensors ({exp.storage.total_bytes:,} "
            "bytes of packed codes, scales and zero points, plus a short header) and the "
            "packed codes alone."
        )
        if not st.button("Prepare downloads", key="dl_prepare"):
            return
        st.session_state["dl_ready"] = key
    files = cache.download_files(key, exp)
    d1, d2, d3 = st.columns(3)
    slug = re.sub(r"[^A-Za-z0-9.=_-]+", "_", exp.describe()).strip("_")
    # Static bytes and no rerun on click: the file's address stays valid, so a second
    # click (however quick) downloads it again.
    d1.download_button(
        "Metrics (CSV)",
        data=files.metrics_csv,
        file_name=f"metrics_{slug}.csv",
        mime="text/csv",
        key="dl_csv",
        on_click="ignore",
    )
    d2.download_button(
        f"Quantized tensor (.safetensors, {len(files.safetensors):,} bytes)",
        data=files.safetensors,
        file_name=f"quantized_{slug}.safetensors",
        mime="application/octet-stream",
        key="dl_st",
        on_click="ignore",
        help="codes packed at the bit width, scales in the scale dtype, zero points packed "
        "(or float-min offsets); the metadata names the scheme and the formula to dequantize",
    )
    d3.download_button(
        f"Packed codes ({len(files.packed_codes):,} bytes)",
        data=files.packed_codes,
        file_name=f"codes_{slug}_{exp.config.bits}bit.bin",
        mime="application/octet-stream",
        key="dl_packed",
        on_click="ignore",
    )


details()
downloads()
