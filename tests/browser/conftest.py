"""A real ``streamlit run`` on a free local port, and headless Debian Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
APP_LOG = ARTIFACTS / "streamlit-browser-test.log"
"""What the session's app server (``app_url``) prints."""
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(base: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited early with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"streamlit did not become healthy within {timeout:.0f} s")


@contextmanager
def launched_app(
    log: Path, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """The app as the README starts it, ``python -m dashboard``, on a free local port with
    its output in ``log`` and ``env`` added to the environment: ``(base URL, process)``
    once healthy; stopped (SIGTERM, then SIGKILL after 15 s) when the block ends, unless
    the block has ended it."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    log.parent.mkdir(exist_ok=True)
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                # The launcher (dashboard.launch), which runs `streamlit run
                # dashboard/app.py` with the process prepared first.
                sys.executable,
                "-m",
                "dashboard",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.headless",
                "true",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_healthy(base, proc)
            yield base, proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.fixture(scope="session")
def app_url() -> Iterator[str]:
    with launched_app(APP_LOG) as (base, _):
        yield base


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"chromium not found at {CHROMIUM}: .ci/run installs it with apt-get")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    try:
        yield pg
    finally:
        context.close()
