"""What closed sessions leave behind: N browser sessions each upload a model on the Whole
model page (one of them a file the page refuses) and close their tab. Their temporary
files go as each tab closes (before the fix: every upload stayed in a temporary folder for
good, 24 MiB each here), and once Streamlit has dropped the closed sessions (after
``server.disconnectedSessionTTL``, at the next connection) the server's memory is back to
what it was before them, within one upload: nothing of the N uploads stays (the app's
TTL: 30 s; Streamlit's default, 120 s, kept them four times as long).

The memory is measured with a fixed malloc mmap threshold: glibc otherwise moves its
threshold up to the size of each large block freed (up to 32 MiB), so a 24 MiB upload may
land in the heap, whose free pages go back to the system only when nothing sits above
them. The test's earlier form (a drop of half the uploads from the memory while the closed
sessions were kept) read 73 to 122 MiB in some runs and failed CI in another; with the
threshold fixed, every large block goes back on free, and what is measured is what the
server still references."""

from __future__ import annotations

import os
import tempfile
import time
import tomllib
from collections.abc import Callable
from getpass import getuser
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from .conftest import ARTIFACTS, ROOT, launched_app
from .locators import choose_radio
from .test_explorer_browser import wait_idle

pytestmark = pytest.mark.browser

SESSIONS = 4
ROWS, COLS = 1536, 4096  # one float32 linear weight: 24 MiB a file
UPLOAD_BYTES = ROWS * COLS * 4
TTL_S = 3
"""The test's server drops closed sessions after 3 s (the app's setting is 30 s: see
``test_the_app_drops_closed_sessions_within_half_a_minute``), so the test waits less."""


def rss_bytes(pid: int) -> int:
    """The resident memory of process ``pid`` (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def session_files(tmp: Path) -> list[Path]:
    """Every model file under the server's temporary folder ``tmp``, wherever the app
    wrote it."""
    return [p for p in tmp.rglob("*.safetensors") if p.is_file()]


def until(condition, timeout_s: float, what: str | Callable[[], str]) -> None:
    """Poll ``condition()`` every 0.2 s until it is true; fail naming ``what`` (or what
    ``what()`` says at the failure, for a message with the last measured values) after
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"not within {timeout_s:.0f} s: {said}")
        time.sleep(0.2)


def model_file(path: Path, seed: int) -> Path:
    weight = torch.randn(ROWS, COLS, generator=torch.Generator().manual_seed(seed))
    save_file({"layer.dense.weight": weight}, str(path))
    return path


def upload_on_model_page(browser, base: str, path: Path, refused: bool) -> None:
    """One session: the Whole model page, the upload source, ``path`` uploaded and its
    report (or refusal) drawn; then the tab closes."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    try:
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(f"{base}/model")
        wait_idle(page)
        choose_radio(page, "m_source", "Upload a .safetensors or .gguf model")
        wait_idle(page)
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
        if refused:
            alert = page.locator('[data-testid="stAlertContentError"]')
            alert.filter(has_text="Upload refused:").first.wait_for()
            assert "over the 100,000,000-byte limit" in alert.first.inner_text()
            assert not page.locator('[data-testid="stException"]').count()  # no traceback
        else:
            page.get_by_text(f"{path.name} · 1 linear layer ·", exact=False).first.wait_for()
        wait_idle(page)
    finally:
        context.close()


def fresh_connection(browser, base: str) -> None:
    """A new session: Streamlit drops expired closed sessions when one connects."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{base}/?src=example&ex=course_3x3")
        wait_idle(page)
    finally:
        context.close()


def test_closed_sessions_release_their_uploads_and_files(browser, tmp_path: Path) -> None:
    tmp = tmp_path / "server-tmp"
    tmp.mkdir()
    files = [model_file(tmp_path / f"model-{i}.safetensors", i) for i in range(SESSIONS + 1)]
    bad = tmp_path / "refused.safetensors"
    bad.write_bytes(b"\xff" * UPLOAD_BYTES)  # its header length is far past its end
    env = {
        "TMPDIR": str(tmp),
        # torch's compiled kernels where they are without TMPDIR (not compiled again)
        "TORCHINDUCTOR_CACHE_DIR": str(Path(tempfile.gettempdir()) / f"torchinductor_{getuser()}"),
        "STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": str(TTL_S),
        "MALLOC_MMAP_THRESHOLD_": str(2**20),  # the module docstring
    }
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / "session-end.log"
    with launched_app(log, env) as (base, proc):
        # The server freezes its long-lived heap out of garbage collection once its kernels
        # are warm (dashboard.served): sessions alive at that moment would keep their cycles
        # for good, so the sessions measured here come after it, as on a server up a while.
        until(
            lambda: "heap frozen" in log.read_text(errors="replace"),
            300,
            "the kernel warm-up and the heap freeze",
        )
        # A first session pays for the imports, the model page's caches and the report, and
        # a first fresh connection once it has expired for the example page's (the
        # connections that poll below): the memory after them is the baseline.
        upload_on_model_page(browser, base, files[0], refused=False)
        until(lambda: not session_files(tmp), 30, "the first session's files removed")
        time.sleep(TTL_S + 1)
        fresh_connection(browser, base)
        before = rss_bytes(proc.pid)
        for i in range(SESSIONS):
            last = i == SESSIONS - 1
            upload_on_model_page(browser, base, bad if last else files[i + 1], refused=last)
        # Each tab's files went when it closed: nothing waits for the sessions' expiry.
        until(lambda: not session_files(tmp), 30, f"files left: {session_files(tmp)}")
        held = now = rss_bytes(proc.pid)

        def back() -> bool:
            """Whether, after one more connection (Streamlit drops expired sessions when
            one connects), the server holds at most one upload more than before the
            sessions (measured: 13 MiB less to 4 MiB more than before; with the page changed to
            keep every upload it got for good, 52 MiB more, and the test failed)."""
            nonlocal now
            fresh_connection(browser, base)
            now = rss_bytes(proc.pid)
            return now <= before + UPLOAD_BYTES

        until(
            back,
            60,
            lambda: f"the server's memory back after {SESSIONS} closed sessions: "
            f"{now / 2**20:.0f} MiB, {before / 2**20:.0f} MiB before them (at most one"
            f" {UPLOAD_BYTES / 2**20:.0f} MiB upload more)",
        )
        print(
            f"memory: {before / 2**20:.0f} MiB before, {held / 2**20:.0f} MiB with the closed"
            f" sessions kept, {now / 2**20:.0f} MiB after",
            flush=True,
        )
    assert not list(tmp.glob("qlab-sessions-*")), "the sessions' folder outlives the server"


def test_the_app_drops_closed_sessions_within_half_a_minute() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["disconnectedSessionTTL"] <= 30
    assert not os.environ.get("STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL")
