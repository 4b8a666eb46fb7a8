"""Back and Forward in a real browser: the page returns to the earlier state and the URL
and the page agree on it."""

from __future__ import annotations

import re

import pytest

from .conftest import ARTIFACTS
from .locators import widget
from .test_explorer_browser import metric_values, wait_for_charts, wait_idle

pytestmark = pytest.mark.browser


def _bits_in_url(page) -> str:
    found = re.search(r"[?&]bits=(\d+)", page.url)
    assert found, page.url
    return found.group(1)


def _bits_on_page(page) -> str:
    return widget(page, "q_bits", "slider").input_value()


def _wait_bits_on_page(page, want: str) -> None:
    """Until the Back/Forward rerun has drawn the slider at ``want`` and finished."""
    page.wait_for_function(
        "(want) => { const s = document.querySelector("
        "'.st-key-q_bits input[type=range]');"
        " return s !== null && s.value === want; }",
        arg=want,
        timeout=90_000,
    )
    page.wait_for_timeout(300)
    wait_idle(page)


def _step(page, bits: int) -> None:
    """One ArrowRight on the bit-width slider, then wait until the run has finished."""
    slider = widget(page, "q_bits", "slider")
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url(re.compile(rf"[?&]bits={bits}(&|$)"), timeout=90_000)
    wait_idle(page)


def test_back_restores_the_earlier_bits_and_the_url_agrees(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=64&cols=64&bits=4&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    _step(page, 5)
    at_five = metric_values(page, "int5 ")
    _step(page, 6)
    at_six = metric_values(page, "int6 ")
    assert _bits_on_page(page) == "6" and at_six[0] != at_five[0]

    page.go_back()
    page.wait_for_url(re.compile(r"[?&]bits=5(&|$)"), timeout=90_000)
    _wait_bits_on_page(page, "5")
    # the URL still says 5 once the rerun has finished (it is not overwritten with 6)
    assert _bits_in_url(page) == "5"
    assert _bits_on_page(page) == "5"
    assert metric_values(page, "int5 ")[0] == at_five[0]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "url_history_back.png"), full_page=True)

    page.go_forward()
    page.wait_for_url(re.compile(r"[?&]bits=6(&|$)"), timeout=90_000)
    _wait_bits_on_page(page, "6")
    assert _bits_in_url(page) == "6" and _bits_on_page(page) == "6"
    assert metric_values(page, "int6 ")[0] == at_six[0]
