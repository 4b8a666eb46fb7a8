"""The Layer outputs page in a real browser: SmoothQuant's α slider moves the output error."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS
from .locators import click_checkbox, widget

pytestmark = pytest.mark.browser

SMOOTHED_MSE = "Output MSE (SmoothQuant)"


def wait_idle(page) -> None:
    """Until Streamlit's status widget says the script finished."""
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=120_000
    )


def metric_value(page, label: str):
    """The value of the metric labelled exactly ``label``."""
    return (
        page.locator('[data-testid="stMetric"]')
        .filter(has=page.get_by_text(label, exact=True))
        .locator('[data-testid="stMetricValue"]')
        .first
    )


def test_alpha_slider_changes_the_output_error(page, app_url: str) -> None:
    page.goto(f"{app_url}/layer")
    page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=180_000)
    wait_idle(page)
    click_checkbox(page, "l_sq")  # Smooth (X ← X / s, W ← W · s)
    slider = widget(page, "l_alpha", "slider")
    slider.wait_for(timeout=120_000)
    value = metric_value(page, SMOOTHED_MSE)
    value.wait_for(timeout=120_000)
    wait_idle(page)
    before = value.inner_text()
    assert before

    # α 0.50 -> 0.65, one step at a time (a key pressed during a rerun can be dropped)
    for _ in range(3):
        slider.focus()
        slider.press("ArrowRight")
        wait_idle(page)
    page.wait_for_function(
        """([label, before]) => {
            const m = [...document.querySelectorAll('[data-testid="stMetric"]')]
                .find(e => e.querySelector('[data-testid="stMetricLabel"]')
                    ?.innerText.trim() === label);
            const v = m && m.querySelector('[data-testid="stMetricValue"]');
            return v && v.innerText !== before;
        }""",
        arg=[SMOOTHED_MSE, before],
        timeout=120_000,
    )
    after = value.inner_text()
    assert after != before
    assert float(after) > 0 and float(before) > 0
    assert float(slider.input_value()) == pytest.approx(0.65)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "layer.png"), full_page=True)
