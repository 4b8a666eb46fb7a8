"""AppTest: the Activations tensor source in the explorer (dynamic and static ranges) and
the Layer outputs page (presets, float schemes, SmoothQuant, static ranges)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
from canvas import metric_value, metrics_shown
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard import cache
from dashboard.services.activations.layer import EvalSplit, SchemeChoice
from dashboard.services.activations.sentences import RangeMode
from dashboard.services.sources.choice import SourceKind
from quant_core import PerChannel, QuantConfig, compare_static_dynamic
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES

pytestmark = pytest.mark.slow

VIEWS = Path(__file__).resolve().parents[2] / "dashboard" / "views"
QUERY = "encoder.layer.0.attention.self.query"


def new_app(page: str, **query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(VIEWS / page), default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def chart_titles(at: AppTest) -> list[str]:
    specs = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    return [s["layout"].get("title", {}).get("text", "") for s in specs]


# --- the Activations source in the explorer --------------------------------------------------


def test_activation_source_gives_the_layer_input_to_the_explorer() -> None:
    at = new_app("explorer.py").run()
    at.selectbox(key="src_kind").set_value(SourceKind.ACTIVATIONS).run()
    no_errors(at)
    assert at.selectbox(key="src_layer").value == QUERY
    captions = " ".join(plain(c.value) for c in at.caption)
    assert f"input of {QUERY}" in captions
    # [tokens, 384]: the 36 calibration sentences give hundreds of real tokens
    shape = captions.split("shape [", 1)[1].split("]", 1)[0]
    tokens, features = (int(v) for v in shape.split(", "))
    assert features == 384 and tokens > 36
    assert "Captured 37 layers on 36 sentences in " in captions
    # the outlier strip sits above the four heatmaps, the explorer's metrics below it
    titles = chart_titles(at)
    assert titles[0].startswith("max |x| per feature")
    assert metric_value(at, "Bits per element")
    # The scheme names the channels of [tokens, features] per token and per feature, in
    # the widgets' labels: the options keep a weight's labels (see the next test).
    gran = at.radio(key="q_gran")
    assert "a token or a feature" in gran.label
    gran.set_value("channel").run()
    axis = at.radio(key="q_axis")
    assert "per token (rows, 0)" in axis.label and "per feature (columns, 1)" in axis.label
    axis.set_value(0).run()
    no_errors(at)
    # The page runs with one scale per token.
    assert "Bits per element" in [m["label"] for m in metrics_shown(at)]


def test_the_granularity_options_read_the_same_for_weights_and_activations() -> None:
    # The browser keeps a radio's choice as its option's label: options renamed under the
    # same key left Granularity with nothing selected on the Activations source, and then
    # per tensor on the way back (tests/browser/test_picker_browser.py shows it).
    at = new_app("explorer.py", gran="channel", axis="0").run()
    weight = [at.radio(key=k).options for k in ("q_gran", "q_axis")]
    at.selectbox(key="src_kind").set_value(SourceKind.ACTIVATIONS).run()
    no_errors(at)
    assert [at.radio(key=k).options for k in ("q_gran", "q_axis")] == weight
    assert at.radio(key="q_gran").value == "channel" and at.radio(key="q_axis").value == 0


def test_activation_source_from_a_link_and_own_sentences() -> None:
    at = new_app("explorer.py", src="act", layer="encoder.layer.2.output.dense").run()
    no_errors(at)
    # the option is the name (shortened to fit the sidebar), the caption under it the shape
    assert at.selectbox(key="src_layer").value == "encoder.layer.2.output.dense"
    assert any("encoder.layer.2.output.dense · input [tokens, 1536]" in plain(c.value)
               for c in at.sidebar.caption)  # fmt: skip
    at.checkbox(key="src_own").check().run()
    at.text_area(key="src_text").input("A cat sat on the mat.\nQuantization clips outliers.").run()
    no_errors(at)
    captions = " ".join(plain(c.value) for c in at.caption)
    assert "on 2 sentences of your own" in captions
    assert "not kept in links" in captions
    # an empty text is refused with a message; the previous tensor stays on the page
    at.text_area(key="src_text").input("   \n  ").run()
    assert any("Sentences:" in plain(e.value) for e in at.error)
    assert not at.exception
    assert metric_value(at, "Bits per element")


def test_a_link_made_with_own_sentences_warns() -> None:
    at = new_app("explorer.py", src="act", layer=QUERY, sents="own").run()
    assert not at.exception
    assert any("do not carry" in plain(w.value) for w in at.warning)
    assert at.checkbox(key="src_own").value is False


def test_static_ranges_report_the_clipping_of_held_out_values() -> None:
    """Per-feature int8 ranges from the calibration sentences clip held-out values: the
    Clipped metric is the exact count of held-out inputs beyond the calibrated levels."""
    query = {"src": "act", "layer": QUERY, "ranges": "static"}
    at = new_app("explorer.py", **query, bits="8", mode="symmetric", gran="channel", axis="1")
    at.run()
    no_errors(at)
    assert at.radio(key="src_ranges").value is RangeMode.STATIC
    cfg = QuantConfig(bits=8, granularity=PerChannel(axis=1))
    cmp = compare_static_dynamic(
        cache.linear_inputs(HELD_OUT_SENTENCES)[QUERY],
        cfg,
        calibration=cache.linear_inputs(CALIBRATION_SENTENCES)[QUERY],
    )
    n = cmp.static.clip.n_clipped
    assert n > 0
    assert metric_value(at, "Clipped") == f"{n:,}"
    assert "18 held-out sentences" in " ".join(plain(c.value) for c in at.caption)
    # Once: the zoom/histogram/teaching and downloads parts look the run up again silently.
    assert sum("calibration tokens" in plain(c.value) for c in at.caption) == 1
    # dynamic ranges on the same held-out rows clip nothing
    at.radio(key="src_ranges").set_value(RangeMode.DYNAMIC).run()
    assert metric_value(at, "Clipped") == "0"


def test_static_ranges_refuse_a_per_token_scheme_with_a_message() -> None:
    at = new_app("explorer.py", src="act", layer=QUERY, ranges="static", gran="channel", axis="0")
    at.run()
    assert not at.exception
    assert any("per-tensor or per-feature" in plain(e.value) for e in at.error)


# --- the Layer outputs page ----------------------------------------------------------------


@pytest.mark.parametrize(
    "choice", [c for c in SchemeChoice if c.preset is not None], ids=lambda c: c.value
)
def test_presets_run_and_show_outputs_and_contributions(choice: SchemeChoice) -> None:
    at = new_app("layer.py").run()
    at.selectbox(key="l_scheme").set_value(choice).run()
    no_errors(at)
    sqnr = float(metric_value(at, "Output SQNR").removesuffix(" dB"))
    assert 5 < sqnr < 80
    titles = chart_titles(at)
    assert titles[0].startswith("Y = X Wᵀ + b") and titles[2].startswith("Output error")
    assert any(t.startswith("Weight only") for t in titles)
    has_act = choice.preset.scheme.activation is not None
    assert any(t.startswith("Activation only") for t in titles) is has_act
    assert (metric_value(at, "Activation-only SQNR") == "float (no error)") is not has_act


def test_weights_whose_blocks_do_not_fit_offer_llama_quantizes_type() -> None:
    """Q4_K weights on a layer whose rows are 384 values (super-blocks of 256 do not divide
    them): the page says so with the button the explorer and A/B show, and the click runs."""
    layer = "encoder.layer.0.intermediate.dense"  # W [1536, 384]
    at = new_app("layer.py", **{"l.layer": layer, "l.scheme": "custom", "l.w.preset": "Q4_K"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 1 and "super-block of 256" in errors[0], errors
    button = at.button(key="l_fallback_w")
    assert button.label.startswith("Use Q5_0 for W")
    button.click().run()
    no_errors(at)
    assert at.selectbox(key="lw_q_preset").value == "Q5_0"
    assert metric_value(at, "Output SQNR").endswith(" dB")


def test_none_none_gives_zero_output_error() -> None:
    at = new_app("layer.py").run()
    at.selectbox(key="l_scheme").set_value(SchemeChoice.CUSTOM).run()
    at.checkbox(key="lw_on").uncheck().run()
    at.checkbox(key="la_on").uncheck().run()
    no_errors(at)
    assert metric_value(at, "Output MSE") == "0"
    assert metric_value(at, "Output SQNR") == "∞ (exact)"
    assert metric_value(at, "Weight-only SQNR") == "float (no error)"


def test_smoothquant_alpha_changes_the_output_error() -> None:
    at = new_app("layer.py").run()
    assert at.selectbox(key="l_layer").value == "encoder.layer.0.intermediate.dense"
    at.checkbox(key="l_sq").check().run()
    no_errors(at)
    first = metric_value(at, "Output MSE (SmoothQuant)")
    at.slider(key="l_alpha").set_value(0.9).run()
    no_errors(at)
    assert metric_value(at, "Output MSE (SmoothQuant)") != first
    titles = chart_titles(at)
    assert any(t.startswith("Input X / s") for t in titles)
    assert any(t.startswith("Output error against α") for t in titles)


def test_held_out_static_per_feature_activations_clip() -> None:
    at = new_app("layer.py").run()
    at.selectbox(key="l_scheme").set_value(SchemeChoice.CUSTOM).run()
    at.radio(key="la_q_agran").set_value("feature").run()
    at.radio(key="l_ranges").set_value(RangeMode.STATIC).run()
    at.radio(key="l_split").set_value(EvalSplit.HELD_OUT).run()
    no_errors(at)
    assert int(metric_value(at, "Inputs clipped").replace(",", "")) > 0
    # static per-token ranges do not exist: a warning, and the page shows dynamic ranges
    at.radio(key="la_q_agran").set_value("token").run()
    no_errors(at)
    assert any("per-token" in plain(w.value) for w in at.warning)


@pytest.mark.parametrize("preset", [SchemeChoice.W8A8, SchemeChoice.W4A8], ids=lambda c: c.value)
@pytest.mark.parametrize("split", list(EvalSplit), ids=lambda s: s.value)
def test_static_ranges_on_a_per_token_preset_fall_back_to_dynamic(
    preset: SchemeChoice, split: EvalSplit
) -> None:
    at = new_app("layer.py").run()
    at.selectbox(key="l_scheme").set_value(preset).run()
    at.radio(key="l_split").set_value(split).run()
    dynamic = [metric_value(at, name) for name in ("Output MSE", "Output SQNR")]
    at.radio(key="l_ranges").set_value(RangeMode.STATIC).run()
    no_errors(at)  # no red box naming PerChannel(axis=0); the page is drawn
    (warning,) = [plain(w.value) for w in at.warning]
    assert "per-token" in warning and "showing dynamic ranges" in warning
    assert "PerChannel" not in warning and "held-out" not in warning
    assert [metric_value(at, name) for name in ("Output MSE", "Output SQNR")] == dynamic
    assert len(at.get("plotly_chart")) >= 3
