"""What the browser draws itself from a small JSON payload (``st.components.v2``, mounted
in the page, no iframe): the explorer's zoom window (four canvases, per-cell hover), the
block histogram (one canvas, hover, drag to zoom) and the worked table (a static HTML
table). The payloads are built and tested in the services; this module only mounts them.

Why: measured in headless Chromium (``benchmarks/browser.py``, MiniLM 1536x384, one
bit-width change), the page settled 755 ms after the key press with the zoom and the
histogram as plotly charts and the worked table as ``st.dataframe``; leaving the zoom out
took 200 ms off, the histogram 60 ms more, and ``st.dataframe`` 230 ms more."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import streamlit as st
from streamlit.components.v2.types import ComponentRenderer

from dashboard.services.display.table import table_payload
from dashboard.services.explorer.histogram import HistogramView, histogram_payload
from dashboard.services.explorer.zoom import ZoomView, zoom_payload

__all__ = ["histogram_chart", "static_table", "zoom_chart"]

_ASSETS = Path(__file__).with_name("assets")


@cache
def _asset(name: str) -> str:
    return (_ASSETS / name).read_text(encoding="utf-8")


@cache
def _component(name: str, script: str) -> ComponentRenderer:
    # Mounted in the page (isolate_styles=False): its CSS is scoped by class, and tools
    # watching the page's DOM (the browser tests, benchmarks/browser.py) see it redraw.
    return st.components.v2.component(
        f"qlab_{name}",
        css=_asset("charts.css"),
        js=_asset("common.js") + "\n" + _asset(script),
        isolate_styles=False,
    )


def zoom_chart(view: ZoomView, key: str) -> None:
    """Draw ``view`` (four panels, colour bars, per-cell hover) in the current container."""
    _component("zoom", "zoom.js")(key=key, data=zoom_payload(view), height="content")


def histogram_chart(view: HistogramView, key: str) -> None:
    """Draw ``view`` (bars, level lines, clipped ranges shaded) in the current container."""
    _component("histogram", "histogram.js")(key=key, data=histogram_payload(view), height="content")


def static_table(frame: pd.DataFrame, key: str) -> None:
    """``frame`` as a plain table, every row shown (``table_payload``'s text)."""
    _component("table", "table.js")(key=key, data=table_payload(frame), height="content")
