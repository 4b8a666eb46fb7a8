"""A/B: two schemes on one tensor, on one error scale, block by block."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.components.config import config_picker
from dashboard.components.source import finite_source_or_stop
from dashboard.services.compare.ab import metrics_table
from dashboard.services.compare.ab_figures import (
    ab_difference_figure,
    ab_error_figure,
    ab_winner_figure,
)
from quant_core import Mode, PerChannel, PerGroup, QuantConfig

DEFAULT_A = QuantConfig(bits=4, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=0))
DEFAULT_B = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(group_size=32))

st.title("A/B: two schemes, one tensor")
source = finite_source_or_stop("A/B")

cols = int(source.matrix.shape[1])
left, right = st.columns(2)
with left.expander("Scheme A", expanded=True):
    cfg_a = config_picker(cols, prefix="a_", default=DEFAULT_A)
with right.expander("Scheme B", expanded=True):
    cfg_b = config_picker(cols, prefix="b_", default=DEFAULT_B)

try:
    ab = cache.ab_result(f"{source.key}|{cfg_a!r}|{cfg_b!r}", source.matrix, cfg_a, cfg_b)
except ValueError as exc:
    st.error(str(exc))
    st.stop()

st.dataframe(metrics_table(ab), hide_index=True, key="ab_metrics")
t = ab.totals
st.markdown(
    f"**Blocks won** (lower MSE per block): A **{t.a}**, B **{t.b}**, ties {t.ties} of {t.total}."
)
st.plotly_chart(ab_error_figure(ab), key="ab_errors")
c1, c2 = st.columns(2)
c1.plotly_chart(ab_difference_figure(ab), key="ab_diff")
c2.plotly_chart(ab_winner_figure(ab), key="ab_winner")
