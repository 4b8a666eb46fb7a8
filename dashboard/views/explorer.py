"""Explorer: one tensor, one scheme, everything that happened to its numbers."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.components import cost_gate, url
from dashboard.components.algorithm import seed_from_url as seed_algorithm_from_url
from dashboard.components.config import config_picker, seed_from_url
from dashboard.components.explorer_details import ExplorerInputs, details, downloads
from dashboard.components.explorer_run import explorer_algorithm, run_explorer
from dashboard.components.fallback import cannot_quantize
from dashboard.components.layer_source import is_activation, outlier_strip
from dashboard.components.metrics import algorithm_row, metrics_row
from dashboard.components.quantized_view import (
    nonfinite_stored_note,
    quantized_file_view,
    shows_stored,
    undecoded_comparison,
)
from dashboard.components.source import current_source, source_caption
from dashboard.components.stored_maps import stored_maps
from dashboard.components.view import current_view, overview_maps, view_options
from dashboard.components.view import seed_from_url as seed_view_from_url
from dashboard.services.cost import estimate
from dashboard.services.display.reduce import needs_reduction
from dashboard.services.display.text import literal
from dashboard.services.state.algorithm import algorithm_to_query
from dashboard.services.state.research import scheme_to_query
from dashboard.services.state.source import source_to_query
from dashboard.services.state.view import view_to_query
from quant_core import QuantConfig, check_shape

if url.first_run("explorer_scheme"):
    seed_from_url(research=True)
    seed_algorithm_from_url()
    seed_view_from_url()
    if url.query_snapshot():
        cost_gate.link_restored("explorer")

st.title("Quantization explorer")
st.caption("New to quantization? The [lessons](./lessons) follow the course chapter by chapter.")
source = current_source()
url.show_warnings()
if source is None:
    st.stop()
if source.file_tensor is not None and shows_stored(source):
    quantized_file_view(source)  # a quantized file's tensor: the file fixes the scheme
    st.stop()
# A file's tensor with no codes of its own to draw (stored as floats, a type the lab does
# not decode): its values are explored like any float tensor's, under a scheme picked here.
notice = st.container()  # what the sidebar had to change, said above the fold

rows, cols = source.matrix.shape
with st.sidebar:
    st.header("Scheme")
    scheme = config_picker(cols, research=True, activation_terms=is_activation(source))
    st.header("Algorithm")
    algo, layer = explorer_algorithm(source, scheme, notice)
query = {**source_to_query(source.choice), **scheme_to_query(scheme), **algorithm_to_query(algo)}
# Written before the work below, so a run that stops early still leaves URL and page agreeing.
url.write({**query, **view_to_query(current_view())})

source_caption(source)
for note in source.notes:
    st.info(literal(note))
stored_note = nonfinite_stored_note(source)
if stored_note is not None:
    st.info(literal(stored_note))
# a type the lab does not decode (GGUF's lattice IQ types): the file's error against the original
undecoded_comparison(source)
if source.nonfinite is not None:
    st.warning(
        f"{source.nonfinite.describe()}. Quantization needs finite values: the non-finite "
        "cells can be left out (shown magenta, excluded from every metric)."
    )
    if not st.checkbox("Quantize the finite values only", value=True, key="v_finite_only"):
        st.stop()


def refuse(why: object) -> None:
    """Say why the scheme cannot run here, with llama-quantize's type for such a tensor
    when the scheme is a GGUF type that has one, and stop the page."""
    cannot_quantize(why, scheme, (rows, cols), key="use_fallback")
    st.stop()


key = f"{source.key}|{scheme!r}|{algo.key()}"
# A shape the scheme's blocks do not divide is known from the shape alone: said before the
# cost gate, which would otherwise ask for a long run that can only fail (Q4_K on MiniLM's
# 30522 x 384 embeddings: "Run: ~23 s").
if isinstance(scheme, QuantConfig):
    try:
        check_shape((rows, cols), scheme)
    except ValueError as exc:
        refuse(exc)
if not cost_gate.allow("explorer", key, estimate(rows * cols), "this tensor and scheme"):
    st.stop()
try:
    run = run_explorer(key, source, scheme, algo, layer)
except ValueError as exc:
    refuse(exc)
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
stored_maps(key, exp)

# Their own module: a fragment defined here would keep this run's namespace alive with its
# session (see explorer_details).
inputs = ExplorerInputs(key, source, scheme, algo, layer, query)
details(inputs)
downloads(inputs)
