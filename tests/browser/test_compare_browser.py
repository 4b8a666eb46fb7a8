"""The comparison pages in a real browser: a sweep, a click on the frontier, the explorer."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS
from .test_explorer_browser import wait_for_charts, wait_idle

pytestmark = pytest.mark.browser


def test_sweep_point_opens_in_explorer(page, app_url: str) -> None:
    page.goto(f"{app_url}/sweep?src=synthetic&rows=64&cols=128")
    page.get_by_role("button", name="Run sweep").click()
    wait_for_charts(page, 1)
    wait_idle(page)
    points = page.locator('[data-testid="stPlotlyChart"] .scatterlayer .point')
    assert points.count() >= 10
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sweep.png"), full_page=True)
    # The frontier trace is drawn last: click its first point.
    points.last.click(force=True)
    button = page.get_by_role("button", name="in the explorer")
    button.wait_for(timeout=60_000)
    label = button.inner_text()
    button.click()
    wait_for_charts(page, 4)
    # The explorer writes its URL at the end of its run.
    page.wait_for_url("**bits=**", timeout=90_000)
    wait_idle(page)
    assert "Quantization explorer" in page.locator("h1").first.inner_text()
    # the explorer shows the same tensor the sweep ran on
    assert "[64, 128]" in page.get_by_text("shape [64, 128]").first.inner_text()
    scheme = label.removeprefix("Open ").removesuffix(" in the explorer")
    assert scheme.split()[0].removeprefix("int") in page.url or "fmt=" in page.url


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
        page.get_by_role("heading", name=HEADINGS[name]).first.wait_for()
        page.get_by_text("shape [48, 96]").first.wait_for()
        assert page.get_by_label("Rows").input_value() == "48"
