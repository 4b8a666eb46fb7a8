"""Sweep & frontier: many schemes (and algorithms) on one tensor, every metric, the Pareto
frontiers of weight error and, for a model layer, of output error on held-out sentences."""

from __future__ import annotations

import streamlit as st

from dashboard.components import cost_gate, url
from dashboard.components.compare_source import compare_source_or_stop
from dashboard.components.sweep_grid import (
    has_result,
    run_with_progress,
    seed_sweep_from_url,
    sweep_grid_form,
)
from dashboard.components.sweep_results import axis_picker, sweep_results
from dashboard.services.compare.sweep import sweep_table
from dashboard.services.compare.weights import linear_layer_of
from dashboard.services.cost import LIMITS, estimate
from dashboard.services.display.counts import counted
from dashboard.services.display.text import literal
from dashboard.services.model.fallbacks import fallback_name
from dashboard.services.state.source import source_to_query

st.title("Sweep & Pareto frontier")
source = compare_source_or_stop("a sweep")
layer = linear_layer_of(source.choice)
seed_sweep_from_url(int(source.matrix.shape[1]), layer)
url.show_warnings()
where = source_to_query(source.choice)

request = sweep_grid_form(tuple(source.matrix.shape), source.key, layer, source.choice)
st.caption(LIMITS.describe())
if request is None:
    url.write(where)
    st.info("Pick the schemes to compare and press **Run sweep**.")
    st.stop()

skipped = request.expansion.skipped
if skipped:
    title = f"{counted(len(skipped), 'scheme')} skipped"
    with st.expander(title, expanded=not request.expansion.schemes):
        shape = tuple(int(d) for d in source.matrix.shape)
        for skip in skipped:
            # what the explorer offers and the whole-model report uses for such a tensor
            fallback = fallback_name(skip.config, shape)
            also = (
                f"; llama-quantize stores such a tensor as {fallback} (add it to compare)"
                if fallback
                else ""
            )
            st.caption(f"Skipped {skip.label}: {skip.reason}{also}")
if not request.expansion.schemes:
    url.write({**where, **request.query()})
    st.warning("No scheme of this grid can run on this tensor (see why above).")
    st.stop()

axis = axis_picker(layer)
# Written before the work below, so a run that stops early still leaves URL and page agreeing.
url.write({**where, **request.query(axis)})
cost = estimate(source.matrix.numel(), len(request.expansion.schemes))
if not has_result(request) and not cost_gate.allow("sweep", request.key, cost, "this sweep"):
    st.stop()
result = run_with_progress(request, source.matrix)
if result.skipped:
    # refused by the work itself, not the shape (a scale past its dtype's largest value):
    # without this they vanished, and a grid of only such schemes drew "0 schemes"
    with st.expander(
        f"{counted(len(result.skipped), 'scheme')} could not run on these values",
        expanded=True,
    ):
        for skip in result.skipped:
            st.caption(f"{literal(skip.label)}: {literal(skip.reason)}")
if not result.results:
    st.warning("No scheme of this grid could run on these values (see why above).")
    st.stop()
limited = [r for r in result.results if r.note]
if limited:
    # the table shows their SQNR near 0 dB (or infinite errors) without a reason
    with st.expander(
        f"{counted(len(limited), 'scheme')} hit their scale dtype's limits", expanded=True
    ):
        for r in limited:
            st.caption(f"{literal(r.label)}: {r.note}")
warned = [r for r in result.results if r.warnings]
if warned:
    # what an algorithm had to work around (GPTQ on fewer calibration tokens than input
    # features): the explorer shows it; here it went to the server's log only
    with st.expander(
        f"{counted(len(warned), 'scheme')}: the algorithm had to work around its input"
    ):
        for r in warned:
            for text in r.warnings:
                st.caption(f"{literal(r.label)}: {literal(text)}")
sweep_results(source, sweep_table(result, tensor=source.label), axis, request.custom_calibration)
