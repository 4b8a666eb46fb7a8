"""AppTest: the whole-model page with weights, activations and algorithms, on the bundled
all-MiniLM-L6-v2 (37 linear layers: 36 in the encoder and the pooler)."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.model.evaluate import LayerMetric
from dashboard.services.state.model import ActivationChoice, RangeKind
from quant_core import HELD_OUT_SENTENCES

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "model.py"
N_LINEAR = 37

pytestmark = pytest.mark.slow


def open_page(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=300)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def query(at: AppTest, key: str) -> str:
    value = at.query_params[key]
    return value[0] if isinstance(value, list) else value


def full_table(at: AppTest):
    # The last frame is the whole per-layer table; the first the five most sensitive.
    return at.dataframe[-1].value


def test_default_reports_every_layer_with_output_errors() -> None:
    at = open_page()
    no_errors(at)
    table = full_table(at)
    assert len(table) == N_LINEAR
    assert table["out_mse"].notna().all() and (table["out_mse"] > 0).all()
    # The default chart metric is the output MSE, and the table is ordered by it.
    assert at.radio(key="m_metric").value is LayerMetric.OUTPUT_MSE
    assert table["out_mse"].is_monotonic_decreasing
    top = at.dataframe[0].value
    assert list(top["name"]) == list(table["name"][:5])
    # The weight error alone ranks the layers differently: say where each one stands.
    assert "rank by weight SQNR" in top.columns and "in embedding" in top.columns
    m = metrics(at)
    assert 0.9 < float(m["Mean embedding cosine"]) <= 1.0
    assert float(m["Worst sentence"]) <= float(m["Mean embedding cosine"])
    assert m["Smaller than fp32"].endswith("×")  # int4: a quarter of the size and less
    # Float activations: no activation-only error, nothing clipped.
    assert table["activation_only_sqnr_db"].isna().all()
    assert query(at, "m.act") == "none" and query(at, "m.bits") == "4"


def test_chart_metric_orders_the_table() -> None:
    at = open_page()
    at.radio(key="m_metric").set_value(LayerMetric.SQNR_DB).run()
    no_errors(at)
    table = full_table(at)
    assert table["sqnr_db"].is_monotonic_increasing  # lower SQNR is worse: worst first


def test_more_weight_bits_raise_the_embedding_cosine() -> None:
    at = open_page()
    before = float(metrics(at)["Mean embedding cosine"])
    at.slider(key="m_q_bits").set_value(8).run()
    no_errors(at)
    assert float(metrics(at)["Mean embedding cosine"]) > before


def test_w8a8_preset_from_the_link_quantizes_every_input() -> None:
    at = open_page(**{"m.act": "w8a8"})
    no_errors(at)
    assert at.selectbox(key="m_act").value is ActivationChoice.W8A8
    table = full_table(at)
    assert len(table) == N_LINEAR
    assert table["activation_only_sqnr_db"].notna().all()
    # Both sides quantized: the output error is at least each side's own, within 1 dB
    # (errors of the two sides are nearly uncorrelated and add in power).
    assert (table["out_sqnr_db"] <= table["weight_only_sqnr_db"] + 1.0).all()
    assert (table["out_sqnr_db"] <= table["activation_only_sqnr_db"].astype(float) + 1.0).all()
    assert float(metrics(at)["Mean embedding cosine"]) > 0.98


def test_static_per_tensor_ranges_report_clipping() -> None:
    at = open_page(
        **{"m.act": "custom", "m.a.bits": "8", "m.a.gran": "tensor", "m.ranges": "static"}
    )
    no_errors(at)
    assert at.radio(key="m_ranges").value is RangeKind.STATIC
    assert full_table(at)["clipped_pct"].astype(float).notna().all()
    # Every held-out sentence, code and commands included (the default is the prose ones,
    # which stay inside the calibrated ranges): they exceed them somewhere in the model.
    at.text_area(key="m_sentences").set_value("\n".join(HELD_OUT_SENTENCES)).run()
    no_errors(at)
    clipped = full_table(at)["clipped_pct"].astype(float)
    assert clipped.notna().all()
    assert (clipped > 0).any()
    assert query(at, "m.ranges") == "static"


def test_bad_link_values_warn_and_the_page_still_runs() -> None:
    at = open_page(**{"m.act": "w3a3", "m.bits": "99"})
    no_errors(at)
    text = " ".join(plain(w.value) for w in at.warning)
    assert "w3a3" in text and "99" in text
    assert len(full_table(at)) == N_LINEAR


def test_gptq_beats_rtn_on_the_page_sentences() -> None:
    at = open_page(**{"m.algo": "gptq"})
    no_errors(at)
    table = full_table(at)
    gain = table["gain_vs_rtn_db"].astype(float)
    assert gain.notna().all()
    # Calibrated on other sentences, GPTQ still lowers most layers' output error.
    assert (gain > 0).mean() > 0.5, gain.describe()
    # The pooler sees one token per sentence: fewer tokens than inputs, said on the page.
    assert any("GPTQ" in e.label and "warned" in e.label for e in at.expander)


def test_own_sentences_that_are_calibration_sentences_warn() -> None:
    from quant_core import CALIBRATION_SENTENCES

    at = open_page(**{"m.act": "w8a8", "m.ranges": "dynamic"})
    at.text_area(key="m_sentences").set_value("\n".join(CALIBRATION_SENTENCES[:3])).run()
    no_errors(at)
    assert any("calibration sentences" in plain(w.value) for w in at.warning)
    assert len(full_table(at)) == N_LINEAR
