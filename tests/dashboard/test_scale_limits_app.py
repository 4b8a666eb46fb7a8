"""AppTest: the explorer's metric cards say why when the stored scales hit their dtype's
limits (an fp16 scale that overflowed, or one capped at fp16's largest value)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

from dashboard.services.compare.sweep import run_sweep
from quant_core import QuantConfig

VIEWS = Path(__file__).resolve().parents[2] / "dashboard" / "views"
EXPLORER, AB = str(VIEWS / "explorer.py"), str(VIEWS / "ab.py")
APP = str(VIEWS.parent / "app.py")
# 32 values (one Q8_0 block) reaching 3e7: Q8_0's fp16 d = 3e7 / 127 overflows 65504
HUGE = ", ".join(["1e7", "-3e7", "2e7", "5"] * 8)
INT2_FP16 = {"bits": "2", "mode": "symmetric", "gran": "group", "group": "32", "fmt": "int"}


def _explorer(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=180)
    for k, v in {"src": "example", "ex": "typed", "vals": HUGE, **query}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _cards(at: AppTest) -> dict[str, tuple[str, str]]:
    for el in at.get("bidi_component"):
        if el.key == "metrics":
            data = json.loads(el.proto.json)
            return {c["label"]: (c["value"], c["help"]) for row in data["rows"] for c in row}
    raise AssertionError("no metric cards")


def test_q8_0_scale_that_overflows_fp16_shows_infinite_errors_and_says_why() -> None:
    """Q8_0 on values near 3e7: d = 3e7 / 127 overflows fp16, so the block decodes as inf
    and NaN (as llama.cpp decodes it). The page refused the tensor with "x_hat holds 8 NaN
    and 24 Inf value(s) ...; quantization needs finite values", blaming the input. Now the
    cards show the infinite errors and both the SQNR card and a warning say the scale
    overflowed fp16."""
    at = _explorer(preset="Q8_0")
    cards = _cards(at)
    assert cards["MSE"][0] == "∞"
    assert cards["SQNR"][0] == "-∞ dB"
    assert "Scale overflowed fp16 in 1 of 1 block" in cards["SQNR"][1], cards["SQNR"]
    assert any("Scale overflowed fp16" in w.value for w in at.warning), at.warning


@pytest.mark.parametrize(("sdtype", "noted"), [("fp16", True), ("fp32", False)])
def test_a_scale_capped_at_fp16s_largest_value_explains_the_sqnr(sdtype: str, noted: bool) -> None:
    """int2 with fp16 scales on values near 3e7: the scale saturates at 65504, every large
    value clips and the SQNR card read 0.0 dB without a word. Now it says the scale was
    capped at fp16's largest value; fp32 scales need no note."""
    at = _explorer(**INT2_FP16, sdtype=sdtype)
    value, help_text = _cards(at)["SQNR"]
    warned = [w.value for w in at.warning if "Scale capped" in w.value]
    if noted:
        assert value == "0.0 dB", value
        assert "Scale capped at fp16's largest value 65504 in 1 of 1 block" in help_text
        assert len(warned) == 1 and "24 values beyond" in warned[0], warned
    else:
        assert "Scale capped" not in help_text and not warned


def test_a_scale_raised_to_fp16s_smallest_value_explains_the_sqnr() -> None:
    """int8 with fp16 scales on values near 1e-9: the scale is raised to fp16's smallest
    subnormal 5.96e-8, every value rounds to 0 and the SQNR card read 0.0 dB unexplained."""
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=180)
    query = {"src": "example", "ex": "typed", "vals": "1e-9, -3e-9, 2e-9, 5e-10", "bits": "8",
             "mode": "symmetric", "gran": "tensor", "fmt": "int", "sdtype": "fp16"}
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception and not at.error
    assert _cards(at)["SQNR"][0] == "0.0 dB"
    assert "smallest positive value 5.96e-08" in _cards(at)["SQNR"][1]
    assert any("Scale raised to fp16" in w.value for w in at.warning)


def test_ab_and_sweep_name_the_overflowed_scale_not_the_input() -> None:
    """A/B said "scheme A (Q8_0): x_hat holds 8 NaN and 24 Inf value(s) out of 32;
    quantization needs finite values" and the sweep skipped Q8_0 for the same reason,
    blaming a finite input. Both now say the scale overflowed fp16."""
    st.cache_data.clear()
    at = AppTest.from_file(AB, default_timeout=180)
    for k, v in {"src": "example", "ex": "typed", "vals": HUGE, "a.preset": "Q8_0"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (err,) = [e.value for e in at.error]
    assert "scale overflowed fp16 in 1 of 1 block" in err and "x\\_hat" not in err, err

    x = torch.tensor([[float(v) for v in HUGE.split(", ")]])
    result = run_sweep(x, [QuantConfig.from_name("Q8_0"), QuantConfig(bits=8)])
    (skip,) = result.skipped
    assert skip.reason.startswith("scale overflowed fp16 in 1 of 1 block"), skip.reason


def test_ab_says_why_both_schemes_lose_every_value_to_fp16s_smallest_scale() -> None:
    """Values near 1e-9 under both default schemes (fp16 scales): every value rounds to 0,
    both sides showed SQNR 0 dB and "A costs 89% of the bits for the same error", with no
    word of why. Each side now says its scale was raised to fp16's smallest value."""
    st.cache_data.clear()
    at = AppTest.from_file(AB, default_timeout=180)
    for k, v in {"src": "example", "ex": "typed", "vals": "1e-9, -3e-9, 2e-9, 5e-10"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception and not at.error
    notes = [w.value for w in at.warning]
    for side in "AB":
        assert any(
            n.startswith(f"Scheme {side}: Scale raised to fp16's smallest") for n in notes
        ), notes


def test_sweep_names_the_schemes_whose_scales_hit_fp16s_limits() -> None:
    """A sweep of values near 3e7: every fp16-scale scheme's SQNR read 0 to 4 dB in the
    table with no reason given (its scale saturates at 65504: 65504 x 127 < 3e7). The page
    now lists each of them with its scale capped at fp16's largest value."""
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update({"src": "example", "ex": "typed", "vals": HUGE})
    at.run()
    at.switch_page("views/sweep.py").run()
    at.button(key="sw_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    capped = table[table["scale_dtype"] == "fp16"]
    assert len(capped) and (capped["sqnr_db"] < 5.0).all(), capped[["scheme", "sqnr_db"]]
    lines = [c.value for c in at.caption if "Scale capped at fp16" in c.value]
    assert len(lines) == len(capped), (len(lines), len(capped))


def _strict(text: str) -> object:
    def refuse(token: str) -> object:
        raise ValueError(f"{token} is not JSON a browser can parse")

    return json.loads(text, parse_constant=refuse)


def test_every_browser_payload_of_an_overflowed_block_is_strict_json() -> None:
    """The histogram of a Q8_0 block whose scale overflowed sent levels NaN and +-3.4e38:
    ``NaN`` is not JSON (the browser's JSON.parse fails and the chart is lost), and the
    levels stretched the axis to 1e38. The block's histogram now draws no levels and says
    why; every component's data parses as strict JSON."""
    rows = HUGE + "\n" + ", ".join(["0.1", "-0.3", "0.2", "5"] * 8)
    at = _explorer(vals=rows, preset="Q8_0")
    for el in at.get("bidi_component"):
        _strict(el.proto.json)
    (el,) = [e for e in at.get("bidi_component") if e.key == "histogram"]
    data = _strict(el.proto.json)
    assert data["levels"] is None and "scale overflowed" in data["title"], data["title"]
