"""The explorer in a real browser: four heatmaps, a slider move, metrics that follow."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def metric_values(page) -> list[str]:
    return page.locator('[data-testid="stMetricValue"]').all_inner_texts()


def wait_for_charts(page, n: int) -> None:
    page.wait_for_function(
        f"document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg').length >= {n}",
        timeout=90_000,
    )


def wait_idle(page) -> None:
    """Until Streamlit's status widget says the script finished."""
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=90_000
    )


def test_slider_changes_metrics(page, app_url: str) -> None:
    page.goto(f"{app_url}/?bits=4&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    heatmaps = page.locator('[data-testid="stPlotlyChart"]')
    assert heatmaps.count() >= 4
    before = metric_values(page)
    assert before and before[0] != ""

    slider = page.get_by_role("slider", name="Bit width")
    # One step at a time: a key pressed while the page reruns can be dropped. The URL is
    # written at the end of a run, after the metrics, so once it names the new width the
    # metrics on the page are that width's.
    for bits in (5, 6, 7):
        slider.focus()
        slider.press("ArrowRight")
        page.wait_for_url(f"**bits={bits}&**", timeout=90_000)
    wait_idle(page)
    after = metric_values(page)
    assert after[0] != before[0]
    # 7 bits instead of 4: the MSE shown falls
    assert float(after[0]) < float(before[0])
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=True)
