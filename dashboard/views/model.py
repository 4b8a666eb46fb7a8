"""Whole model: every linear layer quantized under one scheme (weights by an algorithm, and
for the bundled model its inputs too), and what the model then computes. A model folder on
this machine is reported weight by weight as it streams."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.components import url
from dashboard.components.config import divisors
from dashboard.components.model_scheme import model_scheme_picker, seed_model_scheme_from_url
from dashboard.components.model_source import ModelFolder, model_picker, model_query
from dashboard.components.quantized_model import quantized_model_page
from dashboard.components.tables import with_error_formats
from dashboard.services.display.counts import counted
from dashboard.services.display.metric_help import Metric, metric_help, size_ratio
from dashboard.services.display.sizes import compact_bytes
from dashboard.services.display.text import literal
from dashboard.services.files.open import QuantizedModel
from dashboard.services.model.checkpoint import listing_table
from dashboard.services.model.evaluate import COLUMN_LABELS, LayerMetric, layer_table, order_by
from dashboard.services.model.fallbacks import fallback_note
from dashboard.services.model.figures import cosine_figure, layer_figure
from dashboard.services.model.files import list_linear_weights
from dashboard.services.model.judge import COSINE_HINT, JUDGE_SENTENCES
from dashboard.services.model.streaming import collect, run_report, stream_table
from dashboard.services.model.tables import most_sensitive, output_table
from dashboard.services.model.throughput import throughput
from dashboard.services.state.algorithm import parse_sentences
from dashboard.services.state.model import model_scheme_to_query
from dashboard.services.state.scale_storage import DEFAULT_SCALE_DTYPE
from quant_core import Mode, PerGroup, QuantConfig

MAX_GROUP = 4096
HEADERS = {**COLUMN_LABELS, "in embedding": "reaches the embedding"}
DEFAULT = QuantConfig(
    bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(64), scale_dtype=DEFAULT_SCALE_DTYPE
)

if url.first_run("model_scheme"):
    seed_model_scheme_from_url()

st.title("Whole model")
model = model_picker()
url.show_warnings()
if model is None:
    st.stop()
if isinstance(model, QuantizedModel):  # a .gguf, a GPTQ/AWQ/... folder: what it stores
    url.write(model_query())
    quantized_model_page(model)
    st.stop()
folder = model.checkpoint if isinstance(model, ModelFolder) else None
try:
    weights = (
        tuple(t.info for t in folder.linear_weights)
        if folder is not None
        else list_linear_weights(model.path)
    )
except (OSError, ValueError) as exc:
    st.error(f"{literal(model.label)}: {literal(exc)}")
    st.stop()
if folder is not None:
    largest = folder.largest_weight
    st.caption(
        f"**{literal(folder.folder)}**: {counted(len(folder.shards), 'file')}, "
        f"{counted(len(folder.tensors), 'tensor')}, "
        f"{compact_bytes(folder.stored_bytes)}"
        + (
            f"; largest linear weight {literal(largest.name)} {list(largest.info.shape)} "
            f"{largest.info.dtype}: the report reads one tensor at a time"
            if largest is not None
            else ""
        )
    )
    for note in folder.notes:
        st.caption(literal(note))
    with st.expander(f"Tensors in the folder, from the headers ({len(folder.tensors)})"):
        st.dataframe(listing_table(folder), hide_index=True, key="m_folder_tensors")
if not weights:
    st.warning(f"{literal(model.label)} holds no 2-D linear weights to quantize.")
    st.stop()

# Group sizes offered: those that fit at least one weight's rows; a layer a size does not
# fit is listed as skipped.
widths = sorted({w.shape[1] for w in weights if w.shape[1] > 0})
sizes = sorted({d for width in widths for d in divisors(width) if d <= MAX_GROUP})
with st.sidebar:
    st.header("Scheme")
    scheme = model_scheme_picker(widths[0] if widths else 1, sizes, DEFAULT, bundled=model.bundled)
url.write({**model_query(), **model_scheme_to_query(scheme)})
st.caption(
    f"**{literal(model.label)}** · {counted(len(weights), 'linear layer')} · "
    f"**{literal(scheme.describe())}**"
)
fallback = fallback_note(scheme.weight, ((w.name, tuple(w.shape)) for w in weights))
if fallback is not None:
    st.info(fallback)

if not model.bundled:
    st.info(
        f"{'A model folder' if folder else 'An uploaded file'} holds weights but not the "
        "model's code, so its inputs cannot be computed: this report is of the weights alone "
        "(activations and GPTQ/AWQ need the bundled model)."
    )
    if folder is None:
        result = cache.model_report(
            f"{model.key}|{scheme.weights_key()}", model.path, scheme.weight, scheme.algorithm
        )
    else:
        bar, live = st.progress(0.0), st.empty()

        def show(rows, total):
            bar.progress(len(rows) / max(total, 1), text=f"{len(rows)} of {total} weights")
            table = stream_table(rows)  # redrawn: no key
            live.dataframe(table, hide_index=True, column_config=with_error_formats(table.columns))

        try:  # a rerun stops it at the next redraw; the rows done so far are kept
            rows = run_report(
                cache.folder_reports(),
                f"{model.key}|{scheme.weights_key()}",
                folder,
                scheme.weight,
                scheme.algorithm.algorithm,
                scheme.algorithm.options,
                on_rows=show,
            )
        except ValueError as exc:
            st.error(f"{literal(model.label)}: {literal(exc)}")
            st.stop()
        bar.empty()
        live.empty()
        st.caption(throughput(rows).describe())
        result = collect(scheme.weight, rows)
    table = layer_table(result)
    fp32, quantized, skipped = result.fp32_bytes, result.quantized_bytes, result.skipped
else:
    text = st.text_area(
        "Sentences the model is judged on (one per line; by default held-out sentences, "
        "none of them in the calibration set)",
        "\n".join(JUDGE_SENTENCES),
        key="m_sentences",
        height=140,
    )
    try:
        sentences = parse_sentences(text)
    except ValueError as exc:
        st.error(f"Sentences: {literal(exc)}")
        st.stop()
    seen = sorted(set(sentences) & set(scheme.algorithm.calibration))
    if seen:
        st.warning(
            f"{len(seen)} of these sentences are calibration sentences: errors on them are "
            "not errors on data the calibration never saw."
        )
    try:
        outputs = cache.model_outputs(scheme.key(), scheme, sentences)
    except ValueError as exc:
        st.error(f"This scheme cannot run on the model: {literal(exc)}")
        st.stop()
    table = output_table(outputs)
    fp32, quantized, skipped = outputs.fp32_bytes, outputs.quantized_bytes, outputs.skipped
    e1, e2, e3 = st.columns(3)
    cosine = metric_help(Metric.EMBEDDING_COSINE)
    e1.metric("Mean embedding cosine", f"{outputs.mean_cosine:.5f}", help=f"{cosine} The mean.")
    e2.metric("Worst sentence", f"{outputs.min_cosine:.5f}", help=f"{cosine} The lowest.")
    e3.metric(
        "Report time",
        f"{outputs.seconds:.2f} s",
        help=metric_help(Metric.TIME, "the model run on the sentences"),
    )
    st.caption(COSINE_HINT)
    linears = cache.model_linears(scheme.weights_key(), scheme)
    st.caption(
        f"Weights quantized by {linears.algorithm.label} in {linears.seconds:.2f} s (cached "
        "while the weight scheme stays); the report runs the model on the sentences."
    )
    if linears.warnings:
        warned = counted(len(linears.warnings), "layer")
        with st.expander(f"{linears.algorithm.label} warned on {warned}"):
            for text in linears.warnings:
                st.caption(literal(text))

c1, c2, c3 = st.columns(3)
c1.metric("Linear weights, fp32", compact_bytes(fp32), help=f"4 bytes per weight: {fp32:,} bytes.")
c2.metric("Quantized", compact_bytes(quantized), help=metric_help(Metric.BYTES))
c3.metric(*size_ratio("fp32", fp32 / max(quantized, 1)), help=metric_help(Metric.SIZE_RATIO))
for skip in skipped:
    st.caption(
        f"Skipped (kept float) {literal(skip.name)} {list(skip.shape)}: {literal(skip.reason)}"
    )
if table.empty:
    st.warning("The scheme fits no layer of this model: every layer stays float.")
    st.stop()

offered = [m for m in LayerMetric if m.value in table.columns]
metric = st.radio(
    "Chart",
    offered,
    index=offered.index(LayerMetric.OUTPUT_MSE) if LayerMetric.OUTPUT_MSE in offered else 0,
    format_func=lambda m: m.label,
    key="m_metric",
    horizontal=True,
)
if model.bundled:
    st.subheader("Most sensitive layers")
    top = most_sensitive(table)
    st.caption(
        "Ranked by the layer output's MSE on the sentences above (higher is worse); the "
        "weight error alone ranks them differently."
    )
    if not top["in embedding"].all():
        st.caption(
            "`pooler.dense` works on the [CLS] token only and does not reach the sentence "
            "embedding (the mean of the token states): its error costs nothing here."
        )
    st.dataframe(
        top, hide_index=True, key="m_top", column_config=with_error_formats(top.columns, HEADERS)
    )
st.plotly_chart(layer_figure(table, metric), key="m_layers")
st.dataframe(
    order_by(table, metric),
    hide_index=True,
    key="m_table",
    column_config=with_error_formats(table.columns, HEADERS),
)
if model.bundled:
    st.subheader("What the model computes: sentence embeddings, fp32 vs quantized")
    st.plotly_chart(
        cosine_figure(outputs.sentences, outputs.cosines, scheme.describe()), key="m_cosines"
    )
