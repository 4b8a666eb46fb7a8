"""The served process's settings: one core left to the browser unless QLAB_THREADS says,
huge pages for torch's large buffers unless the environment says, the long-lived heap
frozen once the warm-up is done; none of them outside ``streamlit run``."""

from __future__ import annotations

import gc
import os
import sys
import threading

import pytest
import torch

from dashboard import served


@pytest.mark.parametrize(
    ("cpus", "setting", "want"),
    [
        (2, None, 1),  # this project's machine: one core for the browser
        (8, None, 7),
        (1, None, 1),
        (None, None, 1),  # unknown count: one thread
        (2, "", 1),
        (2, "2", 2),
        (16, " 4 ", 4),
    ],
)
def test_served_threads(cpus: int | None, setting: str | None, want: int) -> None:
    assert served.served_threads(cpus, setting) == want


@pytest.mark.parametrize("setting", ["0", "-1", "two", "1.5"])
def test_a_bad_setting_is_named(setting: str) -> None:
    with pytest.raises(ValueError, match=f"QLAB_THREADS={setting!r}"):
        served.served_threads(2, setting)


def test_only_a_served_app_changes_torchs_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setattr(served, "_threads_set", False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert served.apply_served_threads() is None  # AppTest, pytest: torch's default kept
    assert torch.get_num_threads() == before
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)  # as under streamlit run
    monkeypatch.setenv("QLAB_THREADS", "nonsense")  # logged; the default is used
    try:
        assert served.apply_served_threads() == served.served_threads(os.cpu_count(), None)
        assert torch.get_num_threads() == served.served_threads(os.cpu_count(), None)
        assert served.apply_served_threads() is None  # once per process
    finally:
        torch.set_num_threads(before)


def test_huge_pages_only_when_served_and_not_over_a_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(served.HUGE_PAGES_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert not served.apply_served_huge_pages()  # AppTest, pytest: nothing set
    assert served.HUGE_PAGES_ENV not in os.environ
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)  # as under streamlit run
    assert served.apply_served_huge_pages()
    assert os.environ[served.HUGE_PAGES_ENV] == "1"
    monkeypatch.setenv(served.HUGE_PAGES_ENV, "0")  # the user's setting is kept
    assert not served.apply_served_huge_pages()
    assert os.environ[served.HUGE_PAGES_ENV] == "0"


def test_the_heap_is_frozen_once_warm_and_only_when_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(served, "_frozen", False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert served.freeze_after_warm_up(None) is None  # AppTest, pytest: nothing frozen
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)
    release = threading.Event()
    warming = threading.Thread(target=release.wait, daemon=True)
    warming.start()
    try:
        freezer = served.freeze_after_warm_up(warming)  # returns at once: the run goes on
        assert freezer is not None and freezer.is_alive()
        freezer.join(timeout=0.2)
        assert freezer.is_alive() and gc.get_freeze_count() == 0  # the warm-up still compiling
        assert served.freeze_after_warm_up(warming) is None  # once per process
        release.set()
        freezer.join(timeout=30)
        assert not freezer.is_alive()
        assert gc.get_freeze_count() > 0
    finally:
        release.set()
        gc.unfreeze()
