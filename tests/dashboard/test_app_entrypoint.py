"""AppTest runs the real entrypoint: navigation, the shared sidebar and every page."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def test_entrypoint_opens_the_explorer_with_the_shared_picker() -> None:
    at = AppTest.from_file(str(APP), default_timeout=180).run()
    assert not at.exception
    assert at.title[0].value == "Quantization explorer"
    assert len(at.sidebar.selectbox) >= 1  # the shared tensor picker is drawn


@pytest.mark.parametrize("page", ["views/sweep.py", "views/ab.py"])
def test_entrypoint_switches_pages(page: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=180).run()
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.title
