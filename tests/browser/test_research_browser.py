"""The research formats in a real browser: pick DoReFa in the Format box, see its teaching
panel (every formula rendered by KaTeX, the tanh note, the transfer curve), then the
centered q_k variant."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS
from .locators import choose_option, choose_radio
from .test_explorer_browser import wait_for_charts, wait_idle

pytestmark = pytest.mark.browser


def test_picking_dorefa_shows_its_teaching_panel(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=16&cols=64")
    wait_for_charts(page, 4)
    wait_idle(page)
    # by key: "Format" is also a substring of the "Shipped format" box's name
    choose_option(page, "q_fmt", "DoReFa, tanh (research)")
    page.wait_for_url("**fmt=dorefa**", timeout=90_000)
    wait_idle(page)
    page.get_by_text("tanh is not clipping").first.wait_for(timeout=90_000)
    page.get_by_text("What each value becomes on this tensor").first.wait_for()
    assert page.locator(".katex").count() >= 4  # normalise, q_k, rescale, stored form
    assert page.locator(".katex-error").count() == 0
    choose_radio(page, "q_qk", "centered: (floor(2^k·u)+½)/2^k")
    page.wait_for_url("**qk=centered**", timeout=90_000)
    wait_idle(page)
    assert page.locator(".katex-error").count() == 0
    # A retrying assertion: the run's alerts replace the previous ones as they arrive.
    centered = page.locator('[data-testid="stAlert"]').filter(has_text="no level at either end")
    expect(centered).to_have_count(1)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "explorer-dorefa.png"), full_page=True)
