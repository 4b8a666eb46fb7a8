"""Explorer: one tensor, one scheme, everything that happened to its numbers."""

from __future__ import annotations

import math

import streamlit as st

from dashboard import cache
from dashboard.components import url
from dashboard.components.config import config_picker, seed_from_url
from dashboard.components.layer_source import explore_source, outlier_strip
from dashboard.components.metrics import metrics_row
from dashboard.components.source import current_source
from dashboard.components.view import (
    block_chooser,
    current_view,
    view_options,
    zoom_window,
)
from dashboard.components.view import seed_from_url as seed_view_from_url
from dashboard.services.explorer import exports
from dashboard.services.explorer.heatmaps import zoom_figure
from dashboard.services.state.scheme import config_to_query
from dashboard.services.state.source import source_to_query
from dashboard.services.state.view import view_to_query

if url.first_run("explorer_scheme"):
    seed_from_url()
    seed_view_from_url()

st.title("Quantization explorer")
source = current_source()
url.show_warnings()
if source is None:
    st.stop()

rows, cols = source.matrix.shape
with st.sidebar:
    st.header("Scheme")
    cfg = config_picker(cols)
opts = view_options()

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

key = f"{source.key}|{cfg!r}"
try:
    exp = explore_source(key, source, cfg)
except ValueError as exc:
    st.error(f"This scheme cannot quantize this tensor: {exc}")
    st.stop()

metrics_row(exp)

outlier_strip(source)
figs = cache.overview(f"{key}|{opts!r}", exp, opts)
top = st.columns(2)
bottom = st.columns(2)
for col, fig, name in zip(
    (*top, *bottom), figs.all(), ("original", "codes", "dequantized", "error"), strict=True
):
    col.plotly_chart(fig, key=f"heat_{name}", config={"displaylogo": False})

with st.expander("Zoom: full resolution with per-cell hover", expanded=rows * cols > 32_768):
    win = zoom_window(rows, cols)
    st.plotly_chart(zoom_figure(exp, win.row, win.col, win.size), key="zoom")

st.subheader("Distribution and levels")
block = block_chooser(cfg, exp.n_blocks)
st.plotly_chart(cache.histogram(key, exp, block), key="histogram")

st.subheader("How a value becomes a code")
panel = cache.teaching(key, exp, block)
for line in panel.formulas:
    st.latex(line)
for note in panel.notes:
    st.info(note)
st.dataframe(panel.table, hide_index=True, key="worked")

url.write(
    {**source_to_query(source.choice), **config_to_query(cfg), **view_to_query(current_view())}
)

st.subheader("Downloads")
d1, d2, d3 = st.columns(3)
slug = cfg.describe().replace(" ", "_").replace("(", "").replace(")", "")
d1.download_button(
    "Metrics (CSV)",
    data=exports.metrics_csv(exp),
    file_name=f"metrics_{slug}.csv",
    mime="text/csv",
    key="dl_csv",
)
d2.download_button(
    "Codes, scales, zero points (.safetensors)",
    data=lambda: exports.quantized_safetensors(exp),
    file_name=f"quantized_{slug}.safetensors",
    mime="application/octet-stream",
    key="dl_st",
)
n_bytes = math.ceil(exp.qt.codes.numel() * cfg.bits / 8)
d3.download_button(
    f"Packed codes ({n_bytes:,} bytes)",
    data=lambda: exports.packed_codes(exp),
    file_name=f"codes_{slug}_{cfg.bits}bit.bin",
    mime="application/octet-stream",
    key="dl_packed",
)
