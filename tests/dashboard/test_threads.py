"""The served app's thread count: one core left to the browser unless QLAB_THREADS says."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from dashboard import threads


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
    assert threads.served_threads(cpus, setting) == want


@pytest.mark.parametrize("setting", ["0", "-1", "two", "1.5"])
def test_a_bad_setting_is_named(setting: str) -> None:
    with pytest.raises(ValueError, match=f"QLAB_THREADS={setting!r}"):
        threads.served_threads(2, setting)


def test_only_a_served_app_changes_torchs_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_applied", False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert threads.apply_served_threads() is None  # AppTest, pytest: torch's default kept
    assert torch.get_num_threads() == before
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)  # as under streamlit run
    monkeypatch.setenv("QLAB_THREADS", "nonsense")  # logged; the default is used
    try:
        assert threads.apply_served_threads() == threads.served_threads(os.cpu_count(), None)
        assert torch.get_num_threads() == threads.served_threads(os.cpu_count(), None)
        assert threads.apply_served_threads() is None  # once per process
    finally:
        torch.set_num_threads(before)
