"""AppTest: the shipped formats (issue 25) in the explorer: picked by name or by link, their
stored scales drawn level by level, their teaching panel, and a tensor a format cannot take
(a clear message naming the block, and llama-quantize's fallback one click away)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
from canvas import metric_value
from streamlit.testing.v1 import AppTest

from dashboard.services.display.bits import bits_text
from quant_core import QuantConfig, preset_names, storage_cost

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")
# 128 x 256: every block of 16, 32 and 256 fits, so every shipped format runs (FP8_BLOCK's
# 128 x 128 tiles too).
SYNTHETIC = {"src": "synthetic", "rows": "128", "cols": "256"}
QUERY = "encoder.layer.0.attention.self.query.weight"  # 384 x 384: no 256-value super-block


def new_app(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def chart_keys(at: AppTest) -> list[str]:
    return [el.proto.id for el in at.get("plotly_chart")]


def charts(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def titles(at: AppTest) -> list[str]:
    out = []
    for spec in charts(at):
        title = spec.get("layout", {}).get("title", {})
        out.append(title.get("text", "") if isinstance(title, dict) else str(title))
    return out


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_mxfp4_by_link_shows_its_exponent_map_and_teaching() -> None:
    at = new_app(**SYNTHETIC, preset="MXFP4").run()
    no_errors(at)
    assert at.selectbox(key="q_preset").value == "MXFP4"
    assert any("E8M0 e" in t for t in titles(at)), titles(at)
    text = markdown(at)
    assert "MXFP4" in text and "4.25 bits per value" in text
    assert r"\log_2" in text  # the exponent's derivation with the block's numbers
    assert metric_value(at, "Bits per element") == "4.25"


def test_picking_nvfp4_draws_its_fp8_scales_and_the_tensor_scale() -> None:
    at = new_app(**SYNTHETIC).run()
    at.selectbox(key="q_preset").set_value("NVFP4").run()
    no_errors(at)
    assert any("FP8 E4M3" in t for t in titles(at)), titles(at)
    assert "fp32 per tensor" in markdown(at)


def test_picking_gguf_nvfp4_draws_its_e4m3_scales_without_a_tensor_scale() -> None:
    at = new_app(**SYNTHETIC).run()
    at.selectbox(key="q_preset").set_value("NVFP4_GGUF").run()
    no_errors(at)
    assert any("E4M3 values (no tensor scale)" in t for t in titles(at)), titles(at)
    text = markdown(at)
    assert "unsigned E4M3, no tensor scale" in text and "fp32 per tensor" not in text
    assert metric_value(at, "Bits per element") == "4.5"


def test_picking_q1_0_derives_its_scale_from_the_mean_magnitude() -> None:
    at = new_app(**SYNTHETIC).run()
    at.selectbox(key="q_preset").set_value("Q1_0").run()
    no_errors(at)
    assert r"\operatorname{mean}|x|" in markdown(at)
    assert metric_value(at, "Bits per element") == "1.125"


@pytest.mark.parametrize("name", preset_names())
def test_every_shipped_format_runs_and_reports_its_bits(name: str) -> None:
    at = new_app(**SYNTHETIC, preset=name).run()
    no_errors(at)
    bits = storage_cost((128, 256), QuantConfig.from_name(name)).bits_per_element
    assert metric_value(at, "Bits per element") == bits_text(bits)  # Q6_K: 6.5625, not 6.562


def test_a_format_that_does_not_fit_names_its_block_and_offers_the_fallback() -> None:
    at = new_app(src="model", tensor=QUERY, preset="Q4_K").run()
    assert not at.exception
    assert len(at.error) == 1 and "256" in at.error[0].value, [e.value for e in at.error]
    at.button(key="use_fallback").click().run()
    no_errors(at)
    assert at.selectbox(key="q_preset").value == "Q5_0"
    assert metric_value(at, "Bits per element") == "5.5"


def test_custom_scales_stored_as_e8m0_give_a_two_level_int_scheme() -> None:
    at = new_app(**SYNTHETIC).run()
    at.selectbox(key="q_sstore").set_value("e8m0").run()
    no_errors(at)
    assert any("E8M0 e" in t for t in titles(at))


def test_a_scale_storage_that_does_not_fit_warns_and_stores_fp32() -> None:
    at = new_app(**SYNTHETIC).run()  # default: int4 per channel
    at.selectbox(key="q_sstore").set_value("u6s256").run()  # super-blocks need groups
    assert not at.exception and not at.error
    assert any("super-block" in w.value and "fp16 scales" in w.value for w in at.warning)


SWEEP = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "sweep.py")


def test_sweep_adds_the_formats_people_ship_and_runs_them() -> None:
    st.cache_data.clear()
    at = AppTest.from_file(SWEEP, default_timeout=180)
    at.query_params.update({"src": "synthetic", "rows": "64", "cols": "256"})
    at.run()
    at.button(key="sw_shipped").click().run()
    assert "MXFP4" in at.multiselect(key="sw_presets").value
    at.multiselect(key="sw_formats").set_value([])
    at.multiselect(key="sw_presets").set_value(["Q4_0", "MXFP4", "NVFP4", "NF4_DQ"])
    at.button(key="sw_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    names = " ".join(str(v) for v in table.to_numpy().ravel())
    for name in ("Q4_0", "MXFP4", "NVFP4", "NF4_DQ"):
        assert name in names, names
