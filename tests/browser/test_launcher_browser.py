"""The app as the README starts it, ``python -m dashboard`` (the session's server,
``app_url``): what the launcher prepared before the server started, and the page it serves
with preload links for Streamlit's lazily loaded code."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from dashboard import launch

from .conftest import APP_LOG

pytestmark = pytest.mark.browser


def test_python_m_dashboard_serves_the_app(app_url: str) -> None:
    deadline = time.monotonic() + 120
    text = APP_LOG.read_text()
    while "kernel warm-up" not in text:
        assert time.monotonic() < deadline, text
        time.sleep(0.2)
        text = APP_LOG.read_text()
    with urllib.request.urlopen(f"{app_url}/_stcore/health", timeout=10) as r:
        assert r.status == 200
    with urllib.request.urlopen(f"{app_url}/", timeout=10) as r:
        assert r.status == 200
        page = r.read().decode()
    assert '<div id="root">' in page
    # The page preloads the code Streamlit loads lazily, and the server has it.
    preloaded = re.findall(r'rel="modulepreload" crossorigin href="\./(static/js/[^"]+)"', page)
    assert any("/BidiComponent." in p for p in preloaded), preloaded
    for path in preloaded:
        with urllib.request.urlopen(f"{app_url}/{path}", timeout=10) as r:
            assert r.status == 200
    text = APP_LOG.read_text()
    # Every module the pages import came in before the server started, and its listener
    # got TCP_NODELAY.
    n = len(launch.page_modules(launch._scripts()))
    assert f"{n} of the pages' {n} modules imported" in text
    assert "TCP_NODELAY on 1 server socket(s)" in text
    assert re.search(r"the page preloads \d+ modules and 5 fonts", text), text
    # Started by the launcher or by a page's first run; off only where nothing compiles.
    assert "kernel warm-up started" in text or "kernel warm-up off" in text
    # The launch itself (up to the warm-up) went without an error; later lines belong to
    # the other browser tests' pages.
    assert "Traceback" not in text[: text.index("kernel warm-up")]
