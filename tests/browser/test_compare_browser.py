"""The comparison pages in a real browser: a sweep, a click on the frontier that opens the
scheme without scrolling, A/B's headline, and sweep links shared and walked back."""

from __future__ import annotations

import re

import pytest

from .conftest import ARTIFACTS
from .locators import choose_radio, widget
from .test_explorer_browser import wait_for_charts, wait_idle

pytestmark = pytest.mark.browser

SWEEP = "sweep?src=synthetic&rows=64&cols=128"


def in_viewport(locator) -> bool:
    """Whether the element lies wholly inside the window as it is (no scrolling)."""
    return locator.evaluate(
        "e => { const r = e.getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }"
    )


def run_default_sweep(page, app_url: str) -> None:
    page.goto(f"{app_url}/{SWEEP}")
    page.get_by_role("button", name="Run sweep", exact=True).click()
    page.wait_for_url("**sw.bits=**", timeout=90_000)
    wait_for_charts(page, 1)
    wait_idle(page)


def test_sweep_point_opens_in_explorer_without_scrolling(page, app_url: str) -> None:
    run_default_sweep(page, app_url)
    points = page.locator('[data-testid="stPlotlyChart"] .scatterlayer .point')
    assert points.count() >= 10
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sweep.png"), full_page=True)
    # The frontier's red rings are drawn last, over the points: click the last one.
    points.last.click(force=True)
    button = page.get_by_role("button", name="Open in the explorer", exact=True)
    button.wait_for(timeout=60_000)
    wait_idle(page)
    # The open action sits beside the plot: on screen where the click left the page,
    # and above the table.
    assert in_viewport(button)
    table = page.locator('[data-testid="stDataFrame"]').first
    assert button.bounding_box()["y"] < table.bounding_box()["y"]
    page.screenshot(path=str(ARTIFACTS / "sweep-picked.png"))
    scheme = page.locator(".st-key-sw_open_name").inner_text()
    button.click()
    wait_for_charts(page, 4)
    page.wait_for_url("**bits=**", timeout=90_000)
    wait_idle(page)
    page.get_by_role("heading", name="Quantization explorer", exact=True).wait_for()
    # the explorer shows the same tensor the sweep ran on, under the picked scheme
    assert "[64, 128]" in page.get_by_text("shape [64, 128]").first.inner_text()
    head = scheme.split()[0]  # "int4" or "nf4": its bits or its format are in the URL
    assert f"bits={head.removeprefix('int')}&" in page.url or f"fmt={head}" in page.url


def test_ab_headline_weighs_bits_per_element(page, app_url: str) -> None:
    page.goto(f"{app_url}/ab?src=synthetic&rows=64&cols=128")
    wait_for_charts(page, 3)
    wait_idle(page)
    headline = page.locator(".st-key-ab_headline")
    text = headline.inner_text()
    # fp16 scales, the pages' default: int4 sym per row: 4 + 16/128 bits; int4 asym g32
    # (fp16 scale, int4 zero point): 4 + 20/32.
    assert "A: 4.125 bits/el" in text and "B: 4.625 bits/el" in text
    assert "A costs 89% of the bits" in text and "Blocks won" in text
    assert in_viewport(headline)  # the verdict comes first, above the pickers
    assert "a.bits=4" in page.url and "b.group=32" in page.url

    # B at 5 bits: the headline and the URL follow.
    slider = widget(page, "b_q_bits", "slider")  # scheme B's
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url(re.compile(r"[?&]b\.bits=5(&|$)"), timeout=90_000)
    wait_idle(page)
    page.wait_for_function(
        "() => document.querySelector('.st-key-ab_headline').innerText"
        ".includes('B: 5.656 bits/el')",
        timeout=60_000,
    )


def test_sweep_link_restores_the_grid_in_a_new_page_and_back_restores_the_axis(
    page, browser, app_url: str
) -> None:
    run_default_sweep(page, app_url)
    heading = page.get_by_role("heading", name=re.compile(r"\d+ schemes")).inner_text()
    choose_radio(page, "sw_axis", "weight SQNR (dB)")
    page.wait_for_url("**sw.y=sqnr_db**", timeout=90_000)
    wait_idle(page)
    shared = page.url

    # Shared to a new browser (a new session): the grid, its results and the axis.
    other = browser.new_context(viewport={"width": 1500, "height": 1100})
    try:
        fresh = other.new_page()
        fresh.set_default_timeout(60_000)
        fresh.goto(shared)
        wait_for_charts(fresh, 1)
        wait_idle(fresh)
        assert fresh.get_by_role("heading", name=heading, exact=True).count() == 1
        axis = fresh.locator(".st-key-sw_axis")
        assert axis.get_by_role("radio", name="weight SQNR (dB)", exact=True).is_checked()
        assert "weight SQNR (dB)" in fresh.locator(".g-ytitle").first.text_content()
        assert fresh.url == shared
    finally:
        other.close()

    # Back: the address before the axis change, and the page agrees.
    page.go_back()
    page.wait_for_url(re.compile(r"[?&]sw\.y=mse(&|$)"), timeout=90_000)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.g-ytitle')]"
        ".some(e => e.textContent === 'weight MSE')",
        timeout=90_000,
    )
    wait_idle(page)
    axis = page.locator(".st-key-sw_axis")
    assert axis.get_by_role("radio", name="weight MSE", exact=True).is_checked()


HEADINGS = {
    "Sweep & frontier": "Sweep & Pareto frontier",
    "A/B": "A/B: two schemes, one tensor",
    "Explorer": "Quantization explorer",
}


def test_pages_keep_the_tensor_across_navigation(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=48&cols=96")
    wait_for_charts(page, 4)
    for name in ("Sweep & frontier", "A/B", "Explorer"):
        page.get_by_role("link", name=name, exact=True).click()
        page.get_by_role("heading", name=HEADINGS[name], exact=True).first.wait_for()
        page.get_by_text("shape [48, 96]").first.wait_for()
        # By key and role: a label ("Rows") also matched the zoom canvases ("… rows 0–31 …")
        assert widget(page, "src_rows", "spinbutton").input_value() == "48"
