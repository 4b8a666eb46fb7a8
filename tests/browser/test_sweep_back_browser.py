"""A sweep's results survive "Open in the explorer" and the browser's Back (issue 29)."""

from __future__ import annotations

import re

import pytest

from .test_compare_browser import run_default_sweep
from .test_explorer_browser import wait_for_charts, wait_idle

pytestmark = pytest.mark.browser


def test_back_from_the_explorer_shows_the_sweeps_results(page, app_url: str) -> None:
    run_default_sweep(page, app_url)
    sweep_url = page.url
    points = page.locator('[data-testid="stPlotlyChart"] .scatterlayer .point')
    points.last.click(force=True)
    button = page.get_by_role("button", name="Open in the explorer", exact=True)
    button.wait_for(timeout=60_000)
    wait_idle(page)
    button.click()
    page.get_by_role("heading", name="Quantization explorer", exact=True).wait_for()
    wait_for_charts(page, 4)
    wait_idle(page)
    for _ in range(3):  # the explorer may have written its own address after the switch
        if "/sweep" in page.url:
            break
        page.go_back()
        page.wait_for_timeout(1500)
        wait_idle(page)
    assert "/sweep" in page.url, (page.url, sweep_url)
    # the sweep page writes its grid back over the entry switch_page left
    page.wait_for_url(re.compile(r"/sweep\?.*sw\.bits="), timeout=90_000)
    page.get_by_role("heading", name=re.compile("Sweep"), exact=False).first.wait_for()
    wait_for_charts(page, 1)
    wait_idle(page)
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1
    assert page.get_by_text("press Run sweep").count() == 0
    assert page.get_by_role("button", name=re.compile(r"^Run: ~")).count() == 0
