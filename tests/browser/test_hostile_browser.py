"""Hostile text in a real browser: link values, an uploaded file's name and its tensors'
names, each an image, a link, raw HTML and a bare URL pointing at a local listener on
another port, go through every page; the listener receives nothing, no request leaves the
app's origin, and no image or link to it is in the page."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import torch
from safetensors.torch import save_file

from dashboard.services.display.text import WORD_JOINER

from .conftest import ARTIFACTS
from .locators import choose_option, choose_radio
from .test_explorer_browser import wait_idle

pytestmark = pytest.mark.browser


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server on a free port: its ``host:port`` and the paths it was asked."""
    hits: list[str] = []
    handler = type("Handler", (_Recorder,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def _hostile(host: str, tag: str) -> str:
    return (
        f"![px](http://{host}/{tag}.png) <img src=http://{host}/{tag}-img.png> "
        f"[l](http://{host}/{tag}-link) http://{host}/{tag}-bare"
    )


LEAKS = """(host) => [...document.querySelectorAll('img, image, a, iframe, source, link')]
  .map(e => e.getAttribute('src') || e.getAttribute('href') || e.getAttribute('xlink:href') || '')
  .filter(u => u.includes(host))"""
IMAGES_SETTLED = "() => [...document.images].every(i => i.complete)"


def _settle_and_check(page, host: str) -> None:
    """Until the run has finished and every image has loaded or failed; then no element
    of the page points at ``host``."""
    wait_idle(page)
    page.wait_for_function(IMAGES_SETTLED, timeout=90_000)
    assert page.evaluate(LEAKS, host) == []


def _shows(page, text: str) -> bool:
    """Whether the page's visible text holds ``text`` (word joiners, invisible, aside)."""
    visible = page.evaluate("() => document.body.innerText").replace(WORD_JOINER, "")
    return text in visible


def _goto_page(page, title: str) -> None:
    page.get_by_role("link", name=title, exact=True).click()
    page.get_by_role("heading", level=1).first.wait_for()
    wait_idle(page)


def test_hostile_text_makes_no_request_outside_the_app(
    page, app_url: str, listener: tuple[str, list[str]], tmp_path: Path
) -> None:
    host, hits = listener
    outside: list[str] = []
    page.on(
        "request",
        lambda r: None if r.url.startswith((app_url, "data:", "blob:")) else outside.append(r.url),
    )
    short = f"![p](//{host}/p.png)"  # within the scheme keys' 32 characters
    synth = "src=synthetic&rows=16&cols=64"
    links = [
        f"/?{synth}&bits={quote(short, safe='')}",
        f"/?src=model&tensor={quote(_hostile(host, 'tensor'), safe='')}",
        f"/sweep?{synth}&sw.bits={quote(_hostile(host, 'sweep'), safe='')}",
        f"/ab?{synth}&a.algo={quote(short, safe='')}",
        f"/model?m.act={quote(short, safe='')}",
    ]
    for link in links:
        page.goto(app_url + link)
        warning = page.locator('[data-testid="stAlertContentWarning"]').first
        warning.wait_for()
        assert f"//{host}/" in warning.inner_text().replace(WORD_JOINER, "")  # shown as text
        _settle_and_check(page, host)

    # An uploaded file named like an image, holding weights named like images and links.
    path = tmp_path / f"![px](http:\\\\{host}\\file.png) [l](x).safetensors"
    g = torch.Generator().manual_seed(0)
    names = [f"{_hostile(host, 'w1')}.weight", f"{_hostile(host, 'w2')}.weight"]
    save_file({n: torch.randn(32, 64, generator=g) for n in names}, str(path))
    page.goto(f"{app_url}/?{synth}")
    page.get_by_role("heading", name="Quantization explorer", exact=True).wait_for()
    wait_idle(page)
    choose_option(page, "src_kind", "Upload a file")
    wait_idle(page)
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    page.get_by_text("shape [32, 64]").first.wait_for()
    assert _shows(page, f"![px](http://{host}/w1.png)")  # the caption names it, as text
    _settle_and_check(page, host)

    _goto_page(page, "Sweep & frontier")
    page.get_by_role("button", name="Run sweep", exact=True).click()
    page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
    _settle_and_check(page, host)
    _goto_page(page, "A/B")
    page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
    _settle_and_check(page, host)

    _goto_page(page, "Whole model")
    choose_radio(page, "m_source", "Upload a .safetensors or .gguf model")
    wait_idle(page)
    uploader = page.locator('.st-key-m_upload [data-testid="stFileUploaderDropzoneInput"]')
    uploader.set_input_files(str(path))
    page.locator('[data-testid="stPlotlyChart"]').first.wait_for()
    _settle_and_check(page, host)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "hostile_text.png"), full_page=True)

    assert hits == [], f"the listener was asked for {hits}"
    assert outside == [], f"requests left the app's origin: {outside}"
