"""The launcher, ``python -m dashboard``: its command line, the modules it imports before
the server starts, and a served app from it."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from dashboard import launch

ROOT = Path(__file__).resolve().parents[2]


def test_streamlit_args_serve_the_entrypoint() -> None:
    assert launch.APP == ROOT / "dashboard" / "app.py"
    assert launch.APP.is_file()
    assert launch.streamlit_args([]) == ["run", str(launch.APP)]
    assert launch.streamlit_args(("--server.port", "8502")) == [
        "run",
        str(launch.APP),
        "--server.port",
        "8502",
    ]


def test_page_modules_by_hand(tmp_path: Path) -> None:
    a = tmp_path / "a.py"
    a.write_text(
        "from __future__ import annotations\n"
        "import os, json as j\n"
        "from dashboard.components import url\n"
        "from . import sibling\n"
        "from .pkg import thing\n"
        "def f():\n"
        "    import csv\n"
        "    from os import path\n"
    )
    b = tmp_path / "b.py"
    b.write_text("import json\nimport quant_core.kernels\n")
    got = launch.page_modules([a, b])
    assert sorted(got) == sorted(
        ["os", "json", "dashboard.components", "csv", "quant_core.kernels"]
    )
    assert len(got) == len(set(got))


def test_page_modules_of_a_broken_script(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import (\n")
    with pytest.raises(SyntaxError):
        launch.page_modules([bad])


def test_the_pages_modules_are_found() -> None:
    names = launch.page_modules(launch._scripts())
    # Modules that only the pages import (not app.py): the pages were read.
    assert {"dashboard.components.explorer_details", "dashboard.components.sweep_grid"} <= set(
        names
    )
    assert "quant_core" in names and "streamlit" in names
    assert [n for n in names if importlib.util.find_spec(n) is None] == []


def test_prepare_imports_what_it_can_and_names_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    page = tmp_path / "page.py"
    page.write_text("import json\nimport qlab_no_such_module\nfrom os import path\n")
    monkeypatch.setattr(launch, "_scripts", lambda: [page])
    with caplog.at_level("ERROR", logger="dashboard.launch"):
        line = launch.prepare()
    assert line.startswith("Quantization Lab: 2 of the pages' 3 modules imported in ")
    assert "importing qlab_no_such_module failed" in caplog.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_python_m_dashboard_serves_the_app(tmp_path: Path) -> None:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "launch.log"
    cmd = [sys.executable, "-m", "dashboard", "--server.port", str(port)]
    cmd += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        text = ""
        while "kernel warm-up" not in text:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
            text = log.read_text()
        with urllib.request.urlopen(f"{base}/_stcore/health", timeout=10) as r:
            assert r.status == 200
        with urllib.request.urlopen(f"{base}/", timeout=10) as r:
            assert r.status == 200
            page = r.read().decode()
        assert '<div id="root">' in page
        # The page preloads the code Streamlit loads lazily, and the server has it.
        preloaded = re.findall(r'rel="modulepreload" crossorigin href="\./(static/js/[^"]+)"', page)
        assert any("/BidiComponent." in p for p in preloaded), preloaded
        for path in preloaded:
            with urllib.request.urlopen(f"{base}/{path}", timeout=10) as r:
                assert r.status == 200
        text = log.read_text()
        # Every module the pages import came in before the server started, and its listener
        # got TCP_NODELAY.
        n = len(launch.page_modules(launch._scripts()))
        assert f"{n} of the pages' {n} modules imported" in text
        assert "TCP_NODELAY on 1 server socket(s)" in text
        assert re.search(r"the page preloads \d+ modules and 5 fonts", text), text
        # Started by the launcher, no page having asked; off only where nothing compiles.
        assert "kernel warm-up started" in text or "kernel warm-up off" in text
        assert "Traceback" not in text
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
