"""AppTest: the scheme picker's zero-point convention and the link's scheme on the explorer."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from canvas import metric_value
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from quant_core import Mode, ZeroPoint

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")


def new_app(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def query(at: AppTest, key: str) -> str:
    """The URL's value of ``key`` (AppTest keeps repeated keys as a list)."""
    value = at.query_params[key]
    return value[-1] if isinstance(value, list) else value


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def test_zero_point_shown_only_for_integer_asymmetric() -> None:
    at = new_app(src="synthetic", rows="16", cols="64").run()
    no_errors(at)
    assert not [r for r in at.radio if r.key == "q_zp"]
    at.radio(key="q_mode").set_value(Mode.ASYMMETRIC).run()
    zp = at.radio(key="q_zp")
    assert zp.value is ZeroPoint.INCLUDE_ZERO
    assert zp.options == ["Include zero", "Float min", "Course clamp"]
    assert "contains 0" in zp.help


def test_float_min_at_int4_g32_fp16_costs_five_bits_and_reaches_the_url() -> None:
    # 4-bit codes + per group of 32: a 16-bit scale and a 4-bit integer zero point is 4.625;
    # float min stores a 16-bit offset instead: 4 + (16 + 16) / 32 = 5.0 (GGUF Q4_1).
    at = new_app(
        src="synthetic",
        rows="16",
        cols="64",
        bits="4",
        mode="asymmetric",
        gran="group",
        group="32",
        sdtype="fp16",
    ).run()
    no_errors(at)
    assert metric_value(at, "Bits per element") == "4.625"
    assert query(at, "zp") == "include_zero"
    at.radio(key="q_zp").set_value(ZeroPoint.FLOAT_MIN).run()
    no_errors(at)
    assert metric_value(at, "Bits per element") == "5"
    assert query(at, "zp") == "float_min"


def test_zero_point_comes_from_the_link() -> None:
    at = new_app(src="synthetic", rows="16", cols="64", mode="asymmetric", zp="course_clamp")
    at.run()
    no_errors(at)
    assert at.radio(key="q_zp").value is ZeroPoint.COURSE_CLAMP


def test_group_that_does_not_fit_warns_with_the_value_used() -> None:
    at = new_app(src="synthetic", rows="8", cols="256", bits="4", gran="group", group="100")
    at.run()
    assert not at.exception
    assert at.select_slider(key="q_group").value == 128
    texts = [plain(w.value) for w in at.warning]
    assert any("group=100 does not fit 256 columns; using 128" in t for t in texts), texts
    assert query(at, "group") == "128"
    # once only: the next run does not repeat it
    at.run()
    assert not any("group=100" in plain(w.value) for w in at.warning)


def test_a_fitting_link_does_not_warn() -> None:
    at = new_app(src="synthetic", rows="8", cols="256", bits="4", gran="group", group="64")
    at.run()
    no_errors(at)
    assert not at.warning


def test_an_older_address_restores_its_state() -> None:
    """Back/Forward: Streamlit reruns with the history entry's query string; the widgets
    follow the address rather than overwrite it with their current values."""
    at = new_app(src="synthetic", rows="16", cols="64", bits="5").run()
    no_errors(at)
    older = {k: query(at, k) for k in at.query_params}
    at.slider(key="q_bits").set_value(7).run()
    assert query(at, "bits") == "7"
    for k in list(at.query_params):
        del at.query_params[k]
    for k, v in older.items():
        at.query_params[k] = v
    at.run()
    no_errors(at)
    assert at.slider(key="q_bits").value == 5
    assert query(at, "bits") == "5"
    assert metric_value(at, "Bits per element").startswith("5")
    # and the user's next change wins again
    at.slider(key="q_bits").set_value(6).run()
    assert at.slider(key="q_bits").value == 6 and query(at, "bits") == "6"
