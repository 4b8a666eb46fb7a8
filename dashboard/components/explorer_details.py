"""The explorer's lower half, as two fragments: the zoom, histogram and teaching panel
(``details``), and the downloads, built only when asked (``downloads``).

A fragment is kept by its session, with its arguments, until the next full run replaces it,
and a closed tab's session is kept 120 s more for a reconnect (Streamlit's
``server.disconnectedSessionTTL``). A fragment defined in the page script held the whole
run's namespace (its globals): the exploration with its full-size matrices (about 85 MB at
4096x4096) stayed alive after the cache had let it go, and a buffer the explorer's pool
could have written again was not free. These take only what finds the exploration again
(``ExplorerInputs``) and look it up in the cache on every run: a hit, or the same values
computed again when another session's work evicted it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from dashboard import cache
from dashboard.components import url
from dashboard.components.charts import histogram_chart, static_table, zoom_chart
from dashboard.components.explorer_run import ExplorerRun, run_explorer, teaching_for
from dashboard.components.ste import ste_section
from dashboard.components.view import block_chooser, current_view, zoom_window
from dashboard.services.display.labels import format_label
from dashboard.services.explorer.explore import block_cells
from dashboard.services.explorer.zoom import zoom_view
from dashboard.services.files.tensor import source_tensor_name
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.research import ExplorerScheme, ResearchScheme
from dashboard.services.state.view import view_to_query

__all__ = ["ExplorerInputs", "details", "downloads"]


@dataclass(frozen=True, eq=False)
class ExplorerInputs:
    """What finds one explorer run again: its cache ``key`` (source, scheme, algorithm),
    the ``source``, ``scheme``, algorithm ``choice`` and the bundled model's ``layer`` (see
    ``run_explorer``), and the page's URL ``query`` without the view."""

    key: str
    source: PreparedSource
    scheme: ExplorerScheme
    choice: AlgorithmChoice
    layer: str | None
    query: Mapping[str, str]

    def run(self) -> ExplorerRun:
        """The run again, drawing nothing (the page drew its notes)."""
        return run_explorer(self.key, self.source, self.scheme, self.choice, self.layer, note=False)


@st.fragment
def details(inputs: ExplorerInputs) -> None:
    """Zoom, histogram and teaching panel: moving their controls reruns only this part,
    not the heatmaps above (nor the quantization)."""
    run = inputs.run()
    exp = run.exploration
    rows, cols = inputs.source.matrix.shape
    key = inputs.key
    scaled = run.algorithm is not None and run.algorithm.shows_scaled_weight
    with st.expander("Zoom: full resolution with per-cell hover", expanded=rows * cols > 32_768):
        win = zoom_window(rows, cols)
        zoom_chart(zoom_view(exp, win.row, win.col, win.size), key="zoom")

    st.subheader("Distribution and levels")
    block = block_chooser(exp.config, exp.n_blocks)
    # The block's values (range, extremes, histogram counts) are the same for every scheme
    # of this granularity: cached on the source, as the original map is.
    values_key = f"{key if scaled else inputs.source.key}|{block_cells(exp, block)!r}"
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
    scheme = inputs.scheme
    if isinstance(scheme, ResearchScheme):
        st.subheader("The backward pass: straight-through estimator")
        matrix = inputs.source.matrix
        ste_section(inputs.source.key, matrix, scheme.bits, scheme.variant, scheme.rescale, "ste")
    # Written here, so a fragment rerun (a new block or zoom window) updates the link too.
    url.write({**inputs.query, **view_to_query(current_view())})


@st.fragment
def downloads(inputs: ExplorerInputs) -> None:
    """Built only when asked: preparing them on every rerun cost up to 0.2 s at 4096²."""
    st.subheader("Downloads")
    key = inputs.key
    exp = inputs.run().exploration
    cfg = exp.config
    # Every export stores what the format stores (a two-level format's scales as its E8M0,
    # E4M3 or 8-bit codes, not as float32): the file is these bytes plus its JSON header,
    # about 1 kB (NVFP4 at 128x256: 19,748 bytes for 18,436).
    two_level = cfg.two_level
    what = (
        f"packed codes and block scales as {format_label(cfg)} stores them"
        if two_level
        else "packed codes, scales and zero points"
    )
    contents = f"{exp.storage.total_bytes:,} bytes of {what}, plus a short header"
    if st.session_state.get("dl_ready") != key:
        st.caption(
            f"Metrics (CSV), the quantized tensor as .safetensors ({contents}) and the "
            "packed codes alone."
        )
        if not st.button("Prepare downloads", key="dl_prepare"):
            return
        st.session_state["dl_ready"] = key
    # the tensor's name goes into the export: reopened, it is matched with its original
    files = cache.download_files(key, exp, source_tensor_name(inputs.source))
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
        help=(
            "codes packed at the bit width, block scales only as the format stores them "
            "(stored_codes, ...)"
            if two_level
            else "codes packed at the bit width, scales in the scale dtype, zero points packed "
            "(or float-min offsets)"
        )
        + "; the metadata names the scheme and the formula to dequantize",
    )
    d3.download_button(
        f"Packed codes ({len(files.packed_codes):,} bytes)",
        data=files.packed_codes,
        file_name=f"codes_{slug}_{exp.config.bits}bit.bin",
        mime="application/octet-stream",
        key="dl_packed",
        on_click="ignore",
    )
