"""A/B: two schemes (config and algorithm) on one tensor: what each costs in bits against
what it loses, on one error scale, block by block, and for a model layer on held-out
outputs."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.components import url
from dashboard.components.ab_schemes import ab_side, seed_ab_from_url
from dashboard.components.compare_source import compare_source_or_stop
from dashboard.components.fallback import cannot_quantize
from dashboard.components.tables import with_error_formats
from dashboard.services.compare.ab import metrics_table
from dashboard.services.compare.ab_figures import (
    ab_difference_figure,
    ab_error_figure,
    ab_winner_figure,
)
from dashboard.services.compare.ab_summary import block_unit, cost_headline, output_headline
from dashboard.services.compare.weights import (
    WeightScheme,
    ab_calibration_note,
    linear_layer_of,
)
from dashboard.services.display.metric_help import with_help
from dashboard.services.display.text import literal
from dashboard.services.state.compare import ab_to_query
from dashboard.services.state.scale_storage import DEFAULT_SCALE_DTYPE
from dashboard.services.state.source import source_to_query
from quant_core import Mode, PerChannel, PerGroup, QuantConfig, check_shape
from quant_core.calibration import HELD_OUT_SENTENCES

DEFAULT_A = QuantConfig(
    bits=4, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=0), scale_dtype=DEFAULT_SCALE_DTYPE
)
DEFAULT_B = QuantConfig(
    bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(32), scale_dtype=DEFAULT_SCALE_DTYPE
)

st.title("A/B: two schemes, one tensor")
source = compare_source_or_stop("A/B")
layer = linear_layer_of(source.choice)
seed_ab_from_url()
url.show_warnings()
headline = st.container(key="ab_headline")

cols = int(source.matrix.shape[1])
left, right = st.columns(2)
with left.expander("Scheme A", expanded=True):
    cfg_a, alg_a = ab_side(cols, "a_", DEFAULT_A, layer)
with right.expander("Scheme B", expanded=True):
    cfg_b, alg_b = ab_side(cols, "b_", DEFAULT_B, layer)
st.caption(ab_calibration_note(layer, alg_a, alg_b, len(HELD_OUT_SENTENCES), source.choice))
# Written before the work below, so a run that stops early still leaves URL and page agreeing.
url.write({**source_to_query(source.choice), **ab_to_query(cfg_a, alg_a, cfg_b, alg_b)})

# A side whose blocks do not divide the rows is known from the shape alone: each such side
# says so, with the type llama-quantize stores such a tensor in (as the explorer does).
shape = tuple(int(d) for d in source.matrix.shape)
unfit = False
for side, prefix, cfg in (("A", "a_", cfg_a), ("B", "b_", cfg_b)):
    try:
        check_shape(shape, cfg)
    except ValueError as exc:
        cannot_quantize(exc, cfg, shape, key=f"ab_fallback_{prefix}", side=side, prefix=prefix)
        unfit = True
if unfit:
    st.stop()
scheme_a, scheme_b = WeightScheme.of(cfg_a, alg_a), WeightScheme.of(cfg_b, alg_b)
layer_a = layer_b = None
if layer is not None:
    layer_a = cache.compare_layer(layer, alg_a.calibration)
    layer_b = cache.compare_layer(layer, alg_b.calibration)
key = "|".join((source.key, scheme_a.scheme_id, scheme_b.scheme_id, alg_a.key(), alg_b.key()))
try:
    ab = cache.ab_schemes(key, source.matrix, scheme_a, scheme_b, layer_a, layer_b)
except ValueError as exc:
    st.error(literal(exc))
    st.stop()

with headline:
    st.markdown(cost_headline(ab))
    outputs = output_headline(ab)
    if outputs is not None:
        st.markdown(outputs)
    t = ab.totals
    st.markdown(
        f"**Blocks won** (lower MSE in each {block_unit(ab)}): A **{t.a:,}**, B **{t.b:,}**, "
        f"ties {t.ties:,} of {t.total:,}."
    )
    for side, note in (("A", ab.note_a), ("B", ab.note_b)):
        if note:
            st.warning(f"Scheme {side}: {note}", icon=":material/warning:")
    # what the algorithm had to work around (GPTQ on too few calibration tokens): the
    # explorer shows it; here it went to the server's log only
    for side, scheme, texts in (
        ("A", ab.scheme_a, ab.warnings_a),
        ("B", ab.scheme_b, ab.warnings_b),
    ):
        for text in texts:
            st.warning(
                f"Scheme {side} ({scheme.algorithm.label}): {literal(text)}",
                icon=":material/warning:",
            )
table = metrics_table(ab)
st.dataframe(
    table,
    hide_index=True,
    key="ab_metrics",
    column_config=with_help(with_error_formats(table.columns), table.columns),
)
st.plotly_chart(ab_error_figure(ab), key="ab_errors")
c1, c2 = st.columns(2)
c1.plotly_chart(ab_difference_figure(ab), key="ab_diff")
c2.plotly_chart(ab_winner_figure(ab), key="ab_winner")
