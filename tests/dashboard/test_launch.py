"""The launcher, ``python -m dashboard``: its command line and the modules it imports
before the server starts (the app it serves: ``tests/browser/test_launcher_browser.py``)."""

from __future__ import annotations

import importlib.util
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


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (3, 3), ("a message", 1), (True, 1)]
)
def test_exit_status_is_the_one_python_would_give(code: object, status: int) -> None:
    assert launch.exit_status(code) == status
