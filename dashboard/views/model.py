"""Whole model: every linear weight quantized under one scheme, and what the model then
computes."""

from __future__ import annotations

import streamlit as st

from dashboard import cache
from dashboard.components.config import config_picker, divisors
from dashboard.components.model_source import model_picker
from dashboard.services.model.evaluate import LayerMetric, layer_table
from dashboard.services.model.figures import layer_figure, sentence_cosine_figure
from dashboard.services.model.files import list_linear_weights
from quant_core import Mode, PerGroup, QuantConfig

MAX_GROUP = 4096
DEFAULT = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(group_size=64))
SENTENCES = (
    "Quantization stores each weight in a few bits.\n"
    "The cat sat on the mat.\n"
    "A feline rested on the rug.\n"
    "Stock markets fell sharply on Monday."
)

st.title("Whole model")
model = model_picker()
if model is None:
    st.stop()
try:
    weights = list_linear_weights(model.path)
except (OSError, ValueError) as exc:
    st.error(f"{model.label}: {exc}")
    st.stop()
if not weights:
    st.warning(f"{model.label} holds no 2-D linear weights to quantize.")
    st.stop()

# Group sizes offered: those that fit at least one weight's rows; a layer a size does not
# fit is listed as skipped.
widths = sorted({w.shape[1] for w in weights if w.shape[1] > 0})
sizes = sorted({d for width in widths for d in divisors(width) if d <= MAX_GROUP})
with st.sidebar:
    st.header("Scheme")
    cfg = config_picker(widths[0] if widths else 1, prefix="m_", default=DEFAULT, group_sizes=sizes)

st.caption(f"**{model.label}** · {len(weights)} linear weights · scheme **{cfg.describe()}**")
result = cache.model_report(f"{model.key}|{cfg!r}", model.path, cfg)
c1, c2, c3 = st.columns(3)
c1.metric("Linear weights, fp32", f"{result.fp32_bytes / 1e6:.2f} MB")
c2.metric("Quantized", f"{result.quantized_bytes / 1e6:.2f} MB")
c3.metric("Smaller by", f"{result.fp32_bytes / max(result.quantized_bytes, 1):.2f}×")
for skip in result.skipped:
    st.caption(f"Skipped {skip.name} {list(skip.shape)}: {skip.reason}")

table = layer_table(result)
metric = st.radio(
    "Chart", list(LayerMetric), format_func=lambda m: m.label, key="m_metric", horizontal=True
)
st.plotly_chart(layer_figure(table, metric), key="m_layers")
st.dataframe(table, hide_index=True, key="m_table")

if model.bundled:
    st.subheader("What the model computes: sentence embeddings, fp32 vs quantized")
    text = st.text_area("Sentences (one per line)", SENTENCES, key="m_sentences", height=140)
    sentences = tuple(line.strip() for line in text.splitlines() if line.strip())
    try:
        cmp = cache.embeddings(repr(cfg), cfg, sentences)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    e1, e2, e3 = st.columns(3)
    e1.metric("Mean cosine (fp32 vs quantized)", f"{cmp.mean_cosine:.5f}")
    e2.metric("Model size, fp32", f"{cmp.model_bytes / 1e6:.1f} MB")
    e3.metric("Model size, quantized", f"{cmp.model_quantized_bytes / 1e6:.1f} MB")
    st.plotly_chart(sentence_cosine_figure(cmp), key="m_cosines")
else:
    st.info("Sentence embeddings need the model's code: shown for the bundled model only.")
