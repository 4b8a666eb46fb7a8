"""A finished explorer run keeps no exploration alive that the cache has let go: the page's
fragments (zoom, histogram, teaching panel, downloads) are kept by the session with their
arguments, and before they took only keys and the source, they held the run's namespace
with its full-size matrices."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

from dashboard.cache import explorer as cache_explorer

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")


def test_a_run_does_not_pin_its_exploration(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[weakref.ref[torch.Tensor]] = []
    explore = cache_explorer.explore

    def recording(*args, **kwargs):
        exp = explore(*args, **kwargs)
        made.append(weakref.ref(exp.dequantized))
        return exp

    monkeypatch.setattr(cache_explorer, "explore", recording)
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in {"src": "synthetic", "rows": "256", "cols": "256", "bits": "3"}.items():
        at.query_params[k] = v
    main = sys.modules["__main__"]
    at.run()
    # Streamlit runs a page as the module "__main__", left in sys.modules until the next
    # run: one namespace a process, not one a session. Put back, so what the session keeps
    # is all that can still hold the run.
    sys.modules["__main__"] = main
    assert not at.exception, [e.value for e in at.exception]
    assert made, "the page explored nothing"
    # The fragments ran, with the exploration: it was reachable then.
    assert "How a value becomes a code" in [h.value for h in at.subheader]
    assert "Downloads" in [h.value for h in at.subheader]
    st.cache_resource.clear()
    gc.collect()
    # The explorer's buffer pool holds every dequantized matrix it handed out, and hands one
    # out again only when nothing else refers to it: the cache let them go, so must the run.
    pool = cache_explorer._DEQUANTIZED
    again = [pool.take((256, 256)) for _ in made]
    reused = [r for r in made if any(r() is t for t in again)]
    assert len(reused) == len(made), (
        f"{len(made) - len(reused)} of {len(made)} dequantized matrices still held after the "
        "cache let them go"
    )
