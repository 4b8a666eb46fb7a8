"""What the browser draws itself from a small JSON payload (``st.components.v2``, mounted
in the page, no iframe): the explorer's overview maps of a larger tensor (four images with
titles and colour bars), its zoom window (four canvases, per-cell hover), the block
histogram (one canvas, hover, drag to zoom), the worked table (a static HTML table) and
the metrics. The payloads are built and tested in the services; this module only mounts
them.

Why: measured in headless Chromium (``benchmarks/browser.py``, MiniLM 1536x384, one
bit-width change), the page settled 755 ms after the key press with the zoom and the
histogram as plotly charts and the worked table as ``st.dataframe``; leaving the zoom out
took 200 ms off, the histogram 60 ms more, and ``st.dataframe`` 230 ms more. The maps and
the metrics were about 60 Streamlit elements (columns, containers, markdown, images,
``st.metric``), each re-rendered by the browser on every rerun (1.3-2 ms apiece)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import pandas as pd
import streamlit as st
from streamlit import runtime
from streamlit.components.v2.types import ComponentRenderer

from dashboard.services.display.table import table_payload
from dashboard.services.explorer.histogram import HistogramView, histogram_payload
from dashboard.services.explorer.map_image import MapImage, maps_payload
from dashboard.services.explorer.metric_cards import MetricCard, metrics_payload
from dashboard.services.explorer.zoom import ZoomView, zoom_payload

__all__ = ["histogram_chart", "image_maps", "metric_cards", "static_table", "zoom_chart"]

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


def _media_url(data: bytes, mimetype: str, coordinates: str) -> str:
    """An address the page can load ``data`` from: Streamlit's media store, as ``st.image``
    uses it (an unchanged file keeps its address, so the browser neither fetches nor
    decodes it again; the store drops it after a full rerun that no longer adds it), or a
    ``data:`` address where no Streamlit runtime runs (bare mode)."""
    if not runtime.exists():
        return f"data:{mimetype};base64,{base64.b64encode(data).decode('ascii')}"
    address = runtime.get_instance().media_file_mgr.add(data, mimetype, coordinates)
    # "/media/<id>.png" made relative to the page, so a server.baseUrlPath prefix is kept.
    return address.lstrip("/")


def image_maps(maps: Mapping[str, MapImage], key: str) -> None:
    """The overview maps of a larger tensor (``maps``: name -> image, in page order) in a
    two-column grid, each with its title, colour bar and rings' note."""
    srcs = {name: _media_url(m.png, "image/png", f"{key}.{name}") for name, m in maps.items()}
    _component("maps", "maps.js")(key=key, data=maps_payload(maps, srcs), height="content")


def metric_cards(rows: tuple[tuple[MetricCard, ...], ...], of: str, key: str) -> None:
    """``rows`` of metric cards (label, value, help on hover of its "?"), each row one line
    of equal columns; ``of``: the scheme they measure."""
    _component("metrics", "metrics.js")(key=key, data=metrics_payload(rows, of), height="content")
