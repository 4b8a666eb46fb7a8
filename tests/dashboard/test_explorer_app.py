"""AppTest: the explorer page from each tensor source, and each control's effect."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st
from canvas import canvas_payload, formulas_shown, metric_value, metrics_shown
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.sources.choice import SourceKind
from dashboard.services.sources.examples import Example
from dashboard.services.sources.synthetic import Distribution

# The page script runs on its own (it then draws the tensor picker itself): AppTest does not
# carry the entrypoint's widget state between runs the way the browser does, and the
# browser tests cover the entrypoint and page switching.
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")


def new_app(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def test_default_runs_and_shows_four_heatmaps() -> None:
    at = new_app().run()
    no_errors(at)
    heatmaps = [c for c in charts(at) if c["data"] and c["data"][0]["type"] == "heatmap"]
    assert len(heatmaps) >= 4
    assert metric_value(at, "Bits per element")
    assert len(formulas_shown(at)) >= 3


@pytest.mark.parametrize("example", list(Example), ids=lambda e: e.value)
def test_examples_run(example: Example) -> None:
    at = new_app().run()
    at.selectbox(key="src_kind").set_value(SourceKind.EXAMPLE).run()
    at.selectbox(key="src_example").set_value(example).run()
    no_errors(at)
    assert "Bits per element" in [m["label"] for m in metrics_shown(at)]


@pytest.mark.parametrize("dist", list(Distribution), ids=lambda d: d.value)
def test_synthetic_distributions_run(dist: Distribution) -> None:
    at = new_app().run()
    at.selectbox(key="src_dist").set_value(dist).run()
    no_errors(at)


@pytest.mark.slow
def test_bundled_model_source_runs() -> None:
    at = new_app().run()
    at.selectbox(key="src_kind").set_value(SourceKind.MODEL).run()
    no_errors(at)
    assert "query.weight" in at.selectbox(key="src_model").value
    assert "[384, 384]" in " ".join(plain(c.value) for c in at.caption)


def test_more_bits_lowers_mse() -> None:
    at = new_app().run()
    at.slider(key="q_bits").set_value(3).run()
    low = float(metric_value(at, "MSE"))
    at.slider(key="q_bits").set_value(7).run()
    no_errors(at)
    assert float(metric_value(at, "MSE")) < low


def test_symmetric_course_example_shows_reference_scale() -> None:
    # The course keeps fp32 scales (the pages' default is fp16: 5.7383 here).
    course = {"bits": "8", "mode": "symmetric", "gran": "channel", "sdtype": "fp32"}
    at = new_app(src="example", ex="course_3x3", **course).run()
    no_errors(at)
    latex = " ".join(formulas_shown(at))
    assert "5.737" in latex  # row 0: 728.6 / 127
    at.number_input(key="v_block").set_value(1).run()
    assert "2.3268" in " ".join(formulas_shown(at))


def test_per_group_shows_as_many_scales_as_groups() -> None:
    at = new_app(src="synthetic", rows="8", cols="64", bits="4", gran="group", group="16").run()
    no_errors(at)
    heat = charts(at)[0]["data"][0]
    # rich hover on a small tensor: customdata[..., 3] is each cell's scale
    assert "customdata" in heat
    help_text = next(m for m in metrics_shown(at) if m["label"] == "Bits per element")["help"]
    assert "32 scales" in help_text  # 8 rows x 64/16 groups


@pytest.mark.parametrize(
    "query",
    [
        {"bits": "999"},
        {"mode": "sideways"},
        {"gran": "group", "group": "7", "src": "example", "ex": "course_3x3"},
        {"src": "synthetic", "rows": "x" * 5000},
        {"fmt": "__import__('os').system('id')"},
        {"range": "percentile", "pct": "60"},
        {"round": "stochastic", "seed": "-5"},
        {"red": "median", "zs": "999"},
        {"src": "synthetic", "dist": "outliers", "omag": "0.0001"},
    ],
    ids=["bits", "mode", "group", "long", "code", "pct-below-slider", "seed", "view", "omag"],
)
def test_bad_query_params_warn_and_fall_back(query: dict[str, str]) -> None:
    at = new_app(**query).run()
    assert not at.exception
    if query.get("group") == "7":
        # a group size that does not divide 3 columns snaps to a valid divisor
        assert at.select_slider(key="q_group").value in (1, 3)
    else:
        assert at.warning, "expected a warning about the link"
    assert "Bits per element" in [m["label"] for m in metrics_shown(at)]


def test_url_reflects_settings() -> None:
    at = new_app().run()
    at.slider(key="q_bits").set_value(6).run()
    assert at.query_params["bits"] == "6"


def test_view_settings_come_from_the_link() -> None:
    at = new_app(
        src="synthetic",
        rows="64",
        cols="64",
        gran="group",
        group="16",
        blk="5",
        zs="16",
        red="max_abs",
    ).run()
    no_errors(at)
    assert at.number_input(key="v_block").value == 5
    assert at.selectbox(key="v_zsize").value == 16
    assert canvas_payload(at, "histogram")["title"].startswith("Group 5")
    assert canvas_payload(at, "zoom")["nrows"] == 16  # the link's zoom size


def test_link_with_large_outlier_fraction_runs() -> None:
    at = new_app(src="synthetic", dist="outliers", ofrac="0.3", omag="50", rows="32", cols="32")
    at.run()
    no_errors(at)
    assert at.slider(key="src_ofrac").value == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (5.394e-05, "5.39e-5"),
        (0.0123456, "0.0123"),
        (1234.5678, "1235"),
        (9999.9, "1e4"),
        (12345678.0, "1.23e7"),
        (-3.2e-9, "-3.2e-9"),
        (0.0, "0"),
        (float("inf"), "∞"),
    ],
)
def test_compact_numbers_fit_a_metric(value: float, text: str) -> None:
    from dashboard.services.explorer.metric_cards import compact

    assert compact(value) == text
    assert len(text.lstrip("-")) <= 7


def test_compact_counts_and_bytes() -> None:
    from dashboard.services.display.sizes import compact_bytes, compact_count

    assert [compact_count(n) for n in (9_999, 12_345, 4_194_304)] == ["9,999", "12.3k", "4.19M"]
    assert [compact_bytes(n) for n in (812, 45_100, 8_388_608)] == ["812 B", "45.1 kB", "8.39 MB"]


def test_downloads_are_built_only_when_asked() -> None:
    at = new_app(src="example", ex="course_3x3", bits="4", mode="asymmetric").run()
    no_errors(at)
    assert not at.get("download_button")
    at.button(key="dl_prepare").click().run()
    no_errors(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert len(labels) == 3 and any(".safetensors" in label for label in labels)
    # a new scheme: its files are not built until asked again
    at.slider(key="q_bits").set_value(5).run()
    assert not at.get("download_button")


@pytest.mark.parametrize("preset", ["NVFP4", "NF4_DQ", "Q4_K", "int4"])
def test_downloads_caption_matches_the_files_size(preset: str) -> None:
    """NVFP4's export kept its block scales as float32 beside the stored E4M3 ones: the
    caption promised "18,436 bytes ... plus a short header" for a 34 kB file. The export
    now stores what the format stores: the file is the stated bytes plus its header."""
    query = {"preset": preset} if preset != "int4" else {"bits": "4", "mode": "asymmetric"}
    at = new_app(src="synthetic", rows="128", cols="256", **query).run()
    no_errors(at)
    (caption,) = [c.value for c in at.caption if c.value.startswith("Metrics (CSV)")]
    at.button(key="dl_prepare").click().run()
    (label,) = [b.proto.label for b in at.get("download_button") if ".safetensors" in b.proto.label]
    size = int(label.split(", ")[1].split(" bytes")[0].replace(",", ""))
    stated = int(re.search(r"([\d,]+) bytes", caption)[1].replace(",", ""))
    assert "plus a short header" in caption and 0 < size - stated < 2_000, (caption, size)
    if preset == "NVFP4":  # 128 x 256 / 2 FP4 bytes + 128 x 256 / 16 E4M3 bytes + 4
        assert stated == 18_436 and "as NVFP4 stores them" in caption, caption
    if preset == "NF4_DQ":  # named as the picker names it, not by its registry key
        assert "as NF4 + double quant stores them" in caption, caption


def test_a_model_link_without_a_tensor_opens_at_the_pickers_tensor() -> None:
    """``?src=model`` alone is a link to the bundled model: no warning, its default
    weight, and the URL then names it."""
    at = new_app(src="model").run()
    no_errors(at)
    assert not [plain(w.value) for w in at.warning]
    picked = at.selectbox(key="src_model").value
    assert picked.endswith("query.weight"), picked
    assert at.query_params["tensor"] == picked


def test_a_gguf_type_that_cannot_fit_says_so_before_the_cost_gate() -> None:
    """Q4_K on MiniLM's 30522 x 384 embeddings: the page asked "Run: ~23 s" for a run that
    could only fail, and only then said why and offered Q5_0."""
    at = new_app(src="model", tensor="embeddings.word_embeddings.weight", preset="Q4_K").run()
    assert not at.exception
    assert not [b for b in at.button if b.key.startswith("cost_run_")]
    (err,) = [plain(e.value) for e in at.error]
    assert "Q4_K stores its scales per super-block of 256 values: rows of 384 values" in err, err
    at.button(key="use_fallback").click().run()
    assert at.selectbox(key="q_preset").value == "Q5_0"
    # rows no GGUF block divides: the super-block is named, and no type is offered
    at = new_app(src="synthetic", rows="16", cols="250", preset="Q4_K").run()
    assert not [b for b in at.button if b.key.startswith("cost_run_")]
    (err,) = [plain(e.value) for e in at.error]
    assert "super-block of 256 values: rows of 250 values" in err, err
    assert not [b for b in at.button if b.key == "use_fallback"]


def test_teaching_panel_names_block_and_lists_every_value() -> None:
    at = new_app(src="example", ex="course_3x3", bits="8", mode="symmetric", gran="channel").run()
    no_errors(at)
    text = " ".join(m.value for m in at.markdown)
    assert "Row (channel) 0" in text and "one of 3 blocks" in text
    worked = canvas_payload(at, "worked")
    assert len(worked["rows"]) == 3  # row 0 of the 3x3: every value
    (scales,) = (d.value for d in at.dataframe)
    assert len(scales) == 3  # every row's scale at once
