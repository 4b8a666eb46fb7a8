"""The shipped formats in a real browser: pick Q4_K and MXFP4 by name in the explorer and
see what they store, the block scales' map and where the bits go."""

from __future__ import annotations

import pytest

from .locators import choose_option
from .test_explorer_browser import metric_values, wait_for_charts, wait_idle

pytestmark = pytest.mark.browser

SYNTHETIC = "src=synthetic&rows=128&cols=256"


def pick_format(page, label: str) -> None:
    """Choose ``label`` in the scheme's "Shipped format" box."""
    # by key: "Shipped format" is a substring of the sweep's "Shipped formats (…)" box
    choose_option(page, "q_preset", label)


@pytest.mark.parametrize(
    ("label", "name", "bits", "scale_map"),
    [
        ("Q4_K · GGUF", "Q4_K", "4.5", "Block scales as stored: 6-bit sc"),
        ("MXFP4 · OCP MX", "MXFP4", "4.25", "Block exponents as stored: E8M0 e"),
    ],
)
def test_picking_a_shipped_format_shows_its_stored_scales(
    page, app_url: str, label: str, name: str, bits: str, scale_map: str
) -> None:
    page.goto(f"{app_url}/?{SYNTHETIC}&bits=4&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    pick_format(page, label)
    page.wait_for_url(f"**preset={name}**", timeout=90_000)
    wait_idle(page)
    values = metric_values(page, name)
    assert bits in values, values
    section = page.get_by_text("Stored scales: what each level holds", exact=True)
    section.scroll_into_view_if_needed()
    title = page.locator('[data-testid="stPlotlyChart"] .gtitle').filter(has_text=scale_map)
    title.first.wait_for(timeout=90_000)
    assert page.get_by_text(f"{name}: {bits} bits per value").first.is_visible()
