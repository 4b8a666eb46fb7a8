"""Quick arrow presses on a slider (issue 29, item 3): no step is lost, and the URL, the
slider and what the page computed agree once the runs have settled."""

from __future__ import annotations

import re

import pytest

from .locators import widget
from .test_explorer_browser import metric_values, wait_for_charts, wait_idle

pytestmark = pytest.mark.browser

TENSOR = "encoder.layer.0.intermediate.dense.weight"


def _settled(page) -> None:
    """Until no run is under way for a whole second (the presses' reruns have all ended)."""
    for _ in range(3):
        page.wait_for_timeout(1000)
        wait_idle(page)


def test_three_quick_presses_move_three_steps_and_the_link_agrees(page, app_url: str) -> None:
    start = 8
    page.goto(f"{app_url}/?src=model&tensor={TENSOR}&bits={start}&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    metric_values(page, f"int{start} ")
    slider = widget(page, "q_bits", "slider")
    slider.focus()
    for _ in range(3):  # about 0.1 s apart: each press lands while the last one's run goes on
        slider.press("ArrowLeft")
        page.wait_for_timeout(100)
    _settled(page)
    want = str(start - 3)
    shown = slider.input_value()
    found = re.search(r"[?&]bits=(\d+)", page.url)
    in_url = found.group(1) if found else None
    assert (shown, in_url) == (want, want), page.url
    # the cards measure the width shown (their data-of names the scheme they measured)
    metric_values(page, f"int{want} ")
