"""AppTest: the explorer's Algorithm control. On a linear weight of the bundled model
GPTQ/AWQ/HQQ run (codes change, output errors on held-out sentences against RTN, the
algorithm in the URL); on any other tensor only RTN and HQQ are offered, and a link asking
for GPTQ says why it cannot run and shows RTN."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
from canvas import canvas_payloads, metric_value, metrics_shown
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from quant_core import Algorithm, Format

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")
QUERY = "encoder.layer.0.attention.self.query.weight"


def new_app(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def query(at: AppTest, key: str) -> str | None:
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def _map(at: AppTest, index: int, title: str) -> str:
    """One of the four overview maps as text that changes with what it shows: a small
    tensor's heatmap traces (JSON), or a larger tensor's image map, by its media address
    (a hash of the PNG's bytes)."""
    found = canvas_payloads(at)
    if "overview_maps" in found:
        maps = found["overview_maps"]["maps"]
        assert maps[index]["title"].startswith(title), [m["title"] for m in maps]
        return maps[index]["src"]
    heatmaps = [
        spec
        for spec in (json.loads(el.proto.spec) for el in at.get("plotly_chart"))
        if spec["data"] and spec["data"][0]["type"] == "heatmap"
    ]
    assert title in heatmaps[index]["layout"]["title"]["text"]
    return json.dumps(heatmaps[index]["data"])


def codes_map(at: AppTest) -> str:
    """The codes map (the second of the four)."""
    return _map(at, 1, "Quantized codes")


def original_map(at: AppTest) -> str:
    """The original map (the first of the four)."""
    return _map(at, 0, "Original")


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def captions(at: AppTest) -> str:
    return " ".join(plain(c.value) for c in at.caption)


@pytest.mark.slow
def test_gptq_on_a_model_weight_changes_codes_and_beats_rtn_on_held_out_output() -> None:
    at = new_app(src="model", tensor=QUERY).run()
    no_errors(at)
    assert at.selectbox(key="a_algo").options == ["RTN", "GPTQ", "AWQ", "HQQ"]
    rtn_codes = codes_map(at)
    at.selectbox(key="a_algo").set_value(Algorithm.GPTQ).run()
    no_errors(at)
    assert codes_map(at) != rtn_codes
    assert float(metric_value(at, "Codes ≠ RTN").rstrip("%")) > 0
    ratio = float(metric_value(at, "Output vs RTN").rstrip("×"))
    assert 0 < ratio < 1  # int4 per-channel, layer 0 query: GPTQ's output error is lower
    assert "held-out sentences" in captions(at)
    assert (query(at, "algo"), query(at, "damp"), query(at, "actord")) == ("gptq", "0.1", "1")
    # GPTQ's knobs are drawn and reach the URL
    at.checkbox(key="a_actord").uncheck().run()
    no_errors(at)
    assert query(at, "actord") == "0"
    # the user's own calibration sentences (the URL says so; a link cannot carry them)
    at.checkbox(key="a_custom").check().run()
    at.text_area(key="a_text").set_value(
        "The cat sat on the mat.\nQuantization rounds numbers to a grid."
    ).run()
    no_errors(at)
    assert "calibrated on your 2 sentences" in captions(at)
    assert query(at, "calib") == "custom"


@pytest.mark.slow
def test_awq_from_a_link_labels_the_scaled_weight() -> None:
    at = new_app(src="model", tensor=QUERY, algo="awq").run()
    no_errors(at)
    assert at.selectbox(key="a_algo").value is Algorithm.AWQ
    assert "W·diag(s)" in captions(at)
    assert query(at, "algo") == "awq"
    assert any("W·diag(s)" in plain(i.value) for i in at.info)  # the teaching panel says it too
    # The original map is W·diag(s) under AWQ, W under RTN: never the other's cached image.
    awq_original = original_map(at)
    at.selectbox(key="a_algo").set_value(Algorithm.RTN).run()
    no_errors(at)
    rtn_original = original_map(at)
    assert rtn_original != awq_original
    at.selectbox(key="a_algo").set_value(Algorithm.AWQ).run()
    assert original_map(at) == awq_original


def test_other_tensors_offer_rtn_and_hqq_and_say_why() -> None:
    at = new_app(src="synthetic", rows="16", cols="64").run()
    no_errors(at)
    assert at.selectbox(key="a_algo").options == ["RTN", "HQQ"]
    assert "GPTQ and AWQ are not offered" in captions(at)
    at.selectbox(key="a_algo").set_value(Algorithm.HQQ).run()
    no_errors(at)
    assert query(at, "algo") == "hqq"
    assert metric_value(at, "Output vs RTN") == "n/a"  # no model inputs for this tensor
    assert metric_value(at, "Codes ≠ RTN").endswith("%")


def test_a_link_asking_gptq_on_a_single_tensor_explains_and_shows_rtn() -> None:
    at = new_app(src="synthetic", rows="16", cols="64", algo="gptq").run()
    assert not at.exception and not at.error
    texts = " ".join(plain(w.value) for w in at.warning)
    assert "calibration data" in texts and "no model" in texts and "showing RTN" in texts
    assert "Bits per element" in [m["label"] for m in metrics_shown(at)]
    assert at.selectbox(key="a_algo").value is Algorithm.RTN
    assert query(at, "algo") is None


@pytest.mark.slow
def test_an_algorithm_the_format_rules_out_leaves_the_selector_and_says_so_on_top() -> None:
    # MiniLM's word embeddings under HQQ, then NF4: HQQ cannot run on a codebook format.
    at = new_app(src="model", tensor="embeddings.word_embeddings.weight", algo="hqq").run()
    no_errors(at)
    assert at.selectbox(key="a_algo").value is Algorithm.HQQ
    at.selectbox(key="q_fmt").set_value(Format.NF4).run()
    no_errors(at)
    # the selector shows what the page computes, and no longer offers HQQ for NF4
    algo = at.selectbox(key="a_algo")
    assert algo.value is Algorithm.RTN and algo.options == ["RTN"]
    assert query(at, "algo") is None
    # said in the page, above the metrics, naming only what is offered here
    (warning,) = [plain(w.value) for w in at.main.warning]
    assert warning == "HQQ works on an integer grid; nf4 is not the int format: showing RTN."
    assert "AWQ" not in warning and not at.sidebar.warning
    assert "Not offered for this scheme: HQQ works on an integer grid" in captions(at)
    # the embeddings belong to the model: they are not a linear layer's weight
    assert "is not the weight of a linear layer" in captions(at)
    assert "no model" not in captions(at)
    # back to integers: HQQ is offered again
    at.selectbox(key="q_fmt").set_value(Format.INT).run()
    assert at.selectbox(key="a_algo").options == ["RTN", "HQQ"]


def test_an_older_address_without_algo_restores_rtn() -> None:
    """Back to an address written under RTN (no algo key) restores RTN, not the widget's
    current HQQ."""
    at = new_app(src="synthetic", rows="16", cols="64").run()
    older = {k: query(at, k) for k in at.query_params}
    at.selectbox(key="a_algo").set_value(Algorithm.HQQ).run()
    assert query(at, "algo") == "hqq"
    for k in list(at.query_params):
        del at.query_params[k]
    for k, v in older.items():
        at.query_params[k] = v
    at.run()
    no_errors(at)
    assert at.selectbox(key="a_algo").value is Algorithm.RTN and query(at, "algo") is None


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"algo": "magic"}, "Ignored the link's algorithm (algo='magic'"),
        ({"algo": "hqq", "damp": "7"}, "damp='7'"),
    ],
)
def test_bad_algorithm_links_warn(params: dict[str, str], text: str) -> None:
    at = new_app(src="synthetic", rows="16", cols="64", **params).run()
    assert not at.exception
    assert any(text in plain(w.value) for w in at.warning), [plain(w.value) for w in at.warning]
    assert at.selectbox(key="a_algo").value is Algorithm.RTN


def test_an_algorithm_the_format_cannot_run_falls_back_to_rtn() -> None:
    at = new_app(src="synthetic", rows="16", cols="64", algo="hqq").run()
    no_errors(at)
    at.selectbox(key="q_fmt").set_value(Format.NF4).run()
    assert not at.exception
    assert any("integer grid" in plain(w.value) for w in at.warning)
    assert "Codes ≠ RTN" not in [m["label"] for m in metrics_shown(at)]
