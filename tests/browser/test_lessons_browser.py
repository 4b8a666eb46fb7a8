"""A lesson link on a laptop screen at 150% zoom (1280x720 CSS pixels at 1.5: 853x480),
sidebar open: every metric value fits its card, in the lesson and in the explorer it links
to; previous/next move the address."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS
from .locators import choose_radio

pytestmark = pytest.mark.browser

ZOOM = 1.5
VIEWPORT = {"width": round(1280 / ZOOM), "height": round(720 / ZOOM)}

CUT_METRICS = """() => Array.from(document.querySelectorAll(
        '.qlab-metric-value, [data-testid="stMetricValue"]'))
    .filter(e => e.scrollWidth > e.clientWidth)
    .map(e => `${e.textContent}: ${e.scrollWidth} > ${e.clientWidth}`)"""

# A formula wider than its column scrolls: part of it is out of sight.
CUT_FORMULAS = """() => Array.from(document.querySelectorAll('.katex-display'))
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => `${e.textContent}: ${e.scrollWidth} > ${e.clientWidth}`)"""


@pytest.fixture
def zoomed(browser):
    """A page as a 1280x720 screen shows it at 150% browser zoom."""
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=ZOOM)
    pg = context.new_page()
    pg.set_default_timeout(90_000)
    try:
        yield pg
    finally:
        context.close()


def sidebar_open(page) -> None:
    """The sidebar is shown, on screen, beside the page (as it opens at this width)."""
    box = page.get_by_test_id("stSidebar").bounding_box()
    assert box is not None and box["x"] >= 0 and box["width"] > 200, box


def wait_for_cards(page, n: int, of: str | None = None) -> None:
    """Until ``n`` rows of metric cards are drawn (the last measuring a scheme whose
    description starts with ``of``) and their values are fitted: none wider than its box.
    Fails, naming the values that stay cut."""
    page.wait_for_function(
        "([n, of]) => { const m = document.querySelectorAll('.qlab-metrics[data-drawn]');"
        " return m.length >= n && (of === null"
        " || (m[m.length - 1].dataset.of || '').startsWith(of)); }",
        arg=[n, of],
    )
    try:
        page.wait_for_function(f"({CUT_METRICS})().length === 0", timeout=15_000)
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "lessons-zoom-cut.png"))
    assert page.evaluate(CUT_METRICS) == []


def test_lesson_link_at_150_percent_zoom_cuts_no_metric(zoomed, app_url: str) -> None:
    page = zoomed
    page.goto(f"{app_url}/lessons?lesson=symmetric-asymmetric")
    page.get_by_role("heading", name="3. Symmetric vs asymmetric mode", exact=True).wait_for()
    sidebar_open(page)
    assert page.get_by_test_id("stSidebarNavLink").first.inner_text().split()[-1] == "Lessons"

    choose_radio(page, "lesson_q_symmetric-asymmetric", "Asymmetric")
    wait_for_cards(page, 2, "int8 sym per-tensor")
    values = page.locator(".qlab-metric-value").all_inner_texts()
    assert "2.5092" in values and "1.5730" in values  # the course's numbers, whole

    # The same state in the explorer, one click away (its link opens a new tab: follow it).
    href = page.get_by_role("link", name="Open this in the explorer →", exact=True)
    target = href.get_attribute("href")
    assert target is not None and target.startswith("./?")
    page.goto(f"{app_url}/{target[2:]}")
    page.get_by_role("heading", name="Quantization explorer", exact=True).wait_for()
    wait_for_cards(page, 1, "int8 sym per-tensor")
    sidebar_open(page)


def test_the_zero_point_lesson_shows_its_formulas_whole(zoomed, app_url: str) -> None:
    page = zoomed
    page.goto(f"{app_url}/lessons?lesson=scale-zero-point")
    page.get_by_role("heading", name="2. Get the scale and zero point", exact=True).wait_for()
    page.get_by_role("button", name="Show the result without answering", exact=True).click()
    wait_for_cards(page, 1, "int8 asym per-tensor")
    # the z line, with the lesson's numbers, is the widest of the page
    expect(page.locator(".katex-display").filter(has_text="−76.586")).to_have_count(1)
    assert page.evaluate(CUT_FORMULAS) == []


def test_next_and_previous_move_the_address(zoomed, app_url: str) -> None:
    page = zoomed
    page.goto(f"{app_url}/lessons?lesson=packing")
    page.get_by_role("heading", name="9. Pack and unpack 2-bit weights", exact=True).wait_for()
    page.get_by_role("button", name="Next →", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]lesson=beyond-linear(&|$)"))
    page.get_by_role("heading", name="10. Beyond linear quantization", exact=True).wait_for()
    page.get_by_role("button", name="← Previous", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]lesson=packing(&|$)"))
    choose_radio(page, "lesson_q_packing", "177")
    wait_for_cards(page, 2, "2-bit packing")
