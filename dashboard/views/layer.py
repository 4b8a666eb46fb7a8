"""Layer outputs: one linear layer of the bundled model with quantized weights and inputs."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.components import url
from dashboard.components.fallback import cannot_quantize
from dashboard.components.layer_controls import (
    layer_controls,
    layer_query,
    seed_layer_from_url,
)
from dashboard.components.layer_metrics import contribution_metrics, output_metrics
from dashboard.services.activations.figures import sweep_figure
from dashboard.services.activations.layer import EvalSplit, linear_shapes
from dashboard.services.activations.layer_export import layer_metrics_csv, layer_metrics_table
from dashboard.services.activations.mx_clip import mx_clipping
from dashboard.services.activations.source import capture_summary
from dashboard.services.display.labels import scheme_text
from dashboard.services.display.text import literal
from quant_core import check_shape
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES, transformer_of

if url.first_run("layer"):
    seed_layer_from_url()

st.title("Layer outputs")
st.caption(
    "Y = X Wᵀ + b against Ŷ = X̂ Ŵᵀ + b for one linear layer of all-MiniLM-L6-v2, X its "
    "captured input on the bundled sentences."
)
with st.sidebar:
    st.header("Layer")
    settings = layer_controls(linear_shapes(transformer_of(cache.bundled_model())))
url.show_warnings()
# Written before the work below, so a run that stops early still leaves URL and page agreeing.
url.write(layer_query(settings))

inputs = cache.layer_inputs(settings.layer, settings.split)
with st.sidebar:
    sets = [("Calibration", CALIBRATION_SENTENCES)]
    if settings.split is EvalSplit.HELD_OUT:
        sets.append(("Held-out", HELD_OUT_SENTENCES))
    for name, sentences in sets:
        summary = capture_summary(cache.linear_inputs(sentences), len(sentences))
        st.caption(f"{name}: {summary}")

key = settings.key
# Weights whose blocks do not divide the rows (Q4_K on rows of 384) are known from the shape
# alone: say so with llama-quantize's type for such a tensor one click away, as the
# explorer and A/B do (the weight picker's keys start with "lw_").
weight_cfg = settings.scheme.weight
if weight_cfg is not None:
    w_shape = tuple(int(d) for d in inputs.weight.shape)
    try:
        check_shape(w_shape, weight_cfg)
    except ValueError as exc:
        cannot_quantize(exc, weight_cfg, w_shape, key="l_fallback_w", side="W", prefix="lw_")
        st.stop()
try:
    base = cache.layer_eval(key, inputs, settings.scheme, settings.ranges, None)
    smoothed = (
        None
        if settings.alpha is None
        else cache.layer_eval(key, inputs, settings.scheme, settings.ranges, settings.alpha)
    )
except ValueError as exc:
    st.error(f"This scheme cannot run on this layer: {literal(exc)}")
    st.stop()

out_f, in_f = inputs.weight.shape
st.caption(
    f"**{settings.layer}** · W [{out_f}, {in_f}] · X [{inputs.x_eval.shape[0]} tokens, {in_f}] "
    f"· {scheme_text(settings.scheme)}"
)
output_metrics(base)
contribution_metrics(base)
if weight_cfg is not None:  # an MX format's power-of-two scale clips a block's largest weights
    clipping = mx_clipping(inputs.weight, inputs.x_eval, weight_cfg)
    if clipping is not None and clipping.matters:
        st.info(clipping.describe(weight_cfg.name))
figs = cache.layer_plots(f"{key}|base", base)
top = zip(st.columns(3), (figs.y, figs.y_hat, figs.error), ("y", "yhat", "err"), strict=True)
for col, fig, name in top:
    col.plotly_chart(fig, key=f"l_{name}", config={"displaylogo": False})
st.subheader("Where the error comes from")
for col, fig, name in zip(
    st.columns(2), (figs.weight_only, figs.activation_only), ("weights", "activations"), strict=True
):
    if fig is None:
        col.info(f"The {name} stay in float: they add no error.")
    else:
        col.plotly_chart(fig, key=f"l_only_{name}", config={"displaylogo": False})

st.subheader("SmoothQuant")
if smoothed is None or settings.alpha is None:
    st.info("Turn on **Smooth** in the sidebar to migrate outliers from X into W.")
else:
    output_metrics(smoothed, " (SmoothQuant)")
    sq = cache.smoothing_plots(f"{key}|{settings.alpha}", inputs.x_eval, base, smoothed)
    figures = {"x_before": sq.x_before, "x_after": sq.x_after}
    figures |= {"e_before": sq.error_before, "e_after": sq.error_after}
    for i, (name, fig) in enumerate(figures.items()):
        if i % 2 == 0:
            cols = st.columns(2)
        cols[i % 2].plotly_chart(fig, key=f"sq_{name}", config={"displaylogo": False})
    sweep = cache.layer_sweep(key, inputs, settings.scheme, settings.ranges)
    st.plotly_chart(sweep_figure(sweep, settings.alpha, smoothed.metrics), key="sq_sweep")

st.download_button(
    "Download the metrics (CSV)",
    layer_metrics_csv(layer_metrics_table(settings, base, smoothed)),
    file_name=f"layer-metrics-{settings.layer}.csv",
    mime="text/csv",
    key="l_export",
    on_click="ignore",
)
