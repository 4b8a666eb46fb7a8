"""The scheme picker in a real browser keeps what it shows when the tensor source changes."""

from __future__ import annotations

import re

import pytest

from .locators import choose_option
from .test_explorer_browser import wait_for_charts, wait_idle

pytestmark = pytest.mark.browser

CHECKED = """(name) => {
  const group = [...document.querySelectorAll('[data-testid="stSidebar"] [role=radiogroup]')]
    .find(g => (g.getAttribute('aria-label') || '').startsWith(name));
  if (!group) return null;
  return [...group.querySelectorAll('input[type=radio]')].filter(i => i.checked)
    .map(i => i.closest('label').innerText.trim());
}"""


def _checked(page, label: str) -> list[str] | None:
    """The checked options of the sidebar radio whose label starts with ``label`` (None: no
    such radio)."""
    return page.evaluate(CHECKED, label)


def _pick_source(page, name: str) -> None:
    choose_option(page, "src_kind", name)
    wait_idle(page)


def test_granularity_survives_a_switch_to_activations_and_back(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=64&cols=64&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    assert _checked(page, "Granularity") == ["Per channel"]

    _pick_source(page, "Activations (MiniLM inputs)")
    page.wait_for_url(re.compile(r"[?&]src=act(&|$)"), timeout=90_000)
    wait_idle(page)
    page.get_by_role("radiogroup", name="Ranges", exact=True).wait_for()
    assert _checked(page, "Granularity") == ["Per channel"]
    assert _checked(page, "Scale per token") == ["0: one scale per row"]
    assert re.search(r"[?&]gran=channel(&|$)", page.url) and re.search(r"[?&]axis=0(&|$)", page.url)

    _pick_source(page, "Synthetic")
    page.wait_for_url(re.compile(r"[?&]src=synthetic(&|$)"), timeout=90_000)
    wait_idle(page)
    page.get_by_role("radiogroup", name="Granularity", exact=True).wait_for()
    assert _checked(page, "Granularity") == ["Per channel"]
    assert re.search(r"[?&]gran=channel(&|$)", page.url), page.url
