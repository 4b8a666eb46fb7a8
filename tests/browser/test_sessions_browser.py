"""Two browser sessions with different settings do not affect each other."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS
from .locators import widget
from .test_explorer_browser import metric_values, wait_for_charts, wait_idle

pytestmark = pytest.mark.browser


def test_two_sessions_are_independent(browser, app_url: str) -> None:
    ctx_a = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx_b = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        a, b = ctx_a.new_page(), ctx_b.new_page()
        for pg in (a, b):
            pg.set_default_timeout(60_000)
        a.goto(f"{app_url}/?src=example&ex=course_3x3&bits=3")
        b.goto(f"{app_url}/?src=synthetic&rows=64&cols=64&bits=8&mode=asymmetric")
        for pg in (a, b):
            wait_for_charts(pg, 4)
            wait_idle(pg)
        b_before = metric_values(b)
        a_before = metric_values(a)
        assert a_before[0] != b_before[0]

        slider = widget(a, "q_bits", "slider")
        slider.focus()
        slider.press("ArrowRight")
        a.wait_for_function(
            "(prev) => { const v = [...document.querySelectorAll("
            "'.qlab-metric-value')].map(e => e.innerText);"
            " return v.length && v[0] !== prev; }",
            arg=a_before[0],
        )
        wait_idle(a)
        b.reload()
        wait_for_charts(b, 4)
        wait_idle(b)
        assert metric_values(b, "int8 ")[0] == b_before[0]
        assert widget(b, "q_bits", "slider").input_value() == "8"
        assert b.locator('.st-key-q_bits [data-testid="stSliderThumbValue"]').inner_text() == "8"
        assert "shape [64, 64]" in b.get_by_text("shape [64, 64]").first.inner_text()
        assert "shape [3, 3]" in a.get_by_text("shape [3, 3]").first.inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        a.screenshot(path=str(ARTIFACTS / "session_a.png"), full_page=True)
    finally:
        ctx_a.close()
        ctx_b.close()
