"""View options (overview reduction, boundaries, zoom window), the four overview maps and
the block chooser."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from dashboard.components import persist, url
from dashboard.components.charts import image_maps
from dashboard.components.persist import PERSIST
from dashboard.services.display.reduce import Reduction
from dashboard.services.explorer.heatmaps import MapImage, OverviewFigures, ViewOptions
from dashboard.services.state.view import ZOOM_SIZES, ViewState, view_from_query
from quant_core import PerChannel, QuantConfig


@dataclass(frozen=True)
class ZoomWindow:
    row: int
    col: int
    size: int


_LINK_VIEW = "_link_view"


def _link_view(field: str) -> int | None:
    """The link's value of ``ViewState.field`` (``zoom_row``, ``zoom_col`` or ``block``)
    once: each is popped when asked for, so the next run does not warn again; ``None``
    without a link's view."""
    asked = st.session_state.get(_LINK_VIEW)
    if not isinstance(asked, dict):
        return None
    value = asked.pop(field, None)
    if not asked:
        st.session_state.pop(_LINK_VIEW, None)
    return value


def _warn_beyond(key: str, asked: int | None, limit: int, what: str, unit: str) -> None:
    """Warn when a link's ``key`` (``asked``) lies beyond ``limit`` ``what`` (shown: the last)."""
    if asked is not None and asked > limit - 1:
        st.warning(
            f"Link: {key}={asked} is beyond this {what}'s {limit:,} {unit}"
            f"{'' if limit == 1 else 's'}; showing "
            f"{unit} {limit - 1}.",
            icon="⚠️",
        )


def seed_from_url() -> None:
    """On a session's first run, put the URL's view settings into the widgets (or warn)."""
    try:
        view = view_from_query(url.query_snapshot())
    except ValueError as exc:
        url.add_warning(f"Ignored the link's view settings ({exc}); using the defaults.")
        return
    # what the link asked of the zoom window and the block, to name where it is moved
    st.session_state[_LINK_VIEW] = {
        "zoom_row": view.zoom_row,
        "zoom_col": view.zoom_col,
        "block": view.block,
    }
    persist.set_values(
        {
            "v_red": view.reduction,
            "v_bounds": view.boundaries,
            "v_zrow": view.zoom_row,
            "v_zcol": view.zoom_col,
            "v_zsize": view.zoom_size,
            "v_block": view.block,
        }
    )


def current_view() -> ViewState:
    """The view widgets' values (after they were drawn in this run), for the URL."""
    ss = st.session_state
    return ViewState(
        reduction=ss.get("v_red", Reduction.MEAN),
        boundaries=bool(ss.get("v_bounds", True)),
        zoom_row=int(ss.get("v_zrow", 0)),
        zoom_col=int(ss.get("v_zcol", 0)),
        zoom_size=int(ss.get("v_zsize", 32)),
        block=int(ss.get("v_block", 0)),
    )


def view_options(reduced: bool = True) -> ViewOptions:
    """Beside the maps (not in a collapsed panel): what each overview cell shows, and the
    channel/group boundaries. ``reduced``: whether the tensor is drawn as an overview of
    blocks; when not (every cell drawn as it is), the reduction choice would change nothing
    and is not shown: its kept value (a link's, another tensor's) is returned unchanged."""
    persist.defaults({"v_red": Reduction.MEAN, "v_bounds": True})
    if reduced:
        c1, c2 = st.columns([3, 1])
        reduction = c1.radio(
            "Overview: each cell is the",
            list(Reduction),
            format_func=lambda r: r.label + " of its block",
            key="v_red",
            horizontal=True,
            persist_state=PERSIST,
            help="Large tensors are drawn as blocks of cells: the mean shows the typical "
            "value, max |value| keeps the extremes (outliers, the largest errors) visible.",
        )
        bounds = c2.checkbox("Channel/group boundaries", key="v_bounds", persist_state=PERSIST)
    else:
        reduction = st.session_state["v_red"]
        bounds = st.checkbox("Channel/group boundaries", key="v_bounds", persist_state=PERSIST)
    return ViewOptions(reduction=reduction, show_boundaries=bool(bounds))


def zoom_window(rows: int, cols: int) -> ZoomWindow:
    """Row and column offsets and size of the full-resolution zoom window."""
    c1, c2, c3 = st.columns(3)
    persist.defaults({"v_zsize": 32, "v_zrow": 0, "v_zcol": 0})
    for key, limit in (("v_zrow", rows), ("v_zcol", cols)):
        st.session_state[key] = min(int(st.session_state[key]), max(0, limit - 1))
    _warn_beyond("zr", _link_view("zoom_row"), rows, "tensor", "row")
    _warn_beyond("zc", _link_view("zoom_col"), cols, "tensor", "column")
    row = c1.number_input(
        "Zoom: first row",
        min_value=0,
        max_value=max(0, rows - 1),
        key="v_zrow",
        persist_state=PERSIST,
    )
    col = c2.number_input(
        "Zoom: first column",
        min_value=0,
        max_value=max(0, cols - 1),
        key="v_zcol",
        persist_state=PERSIST,
    )
    size = c3.selectbox("Window", ZOOM_SIZES, key="v_zsize", persist_state=PERSIST)
    return ZoomWindow(int(row), int(col), int(size))


def block_chooser(cfg: QuantConfig, n_blocks: int, key: str = "v_block") -> int:
    """Which channel or group the histogram and the teaching panel show."""
    if key == "v_block":
        _warn_beyond("blk", _link_view("block"), n_blocks, "scheme", "block")
    if n_blocks == 1:
        return 0
    persist.defaults({key: 0})
    st.session_state[key] = min(int(st.session_state[key]), n_blocks - 1)
    what = "channel" if isinstance(cfg.granularity, PerChannel) else "group"
    block = int(
        st.number_input(
            f"Show {what} (0–{n_blocks - 1})",
            min_value=0,
            max_value=n_blocks - 1,
            key=key,
            persist_state=PERSIST,
        )
    )
    return block


def overview_maps(figs: OverviewFigures) -> None:
    """The four overview maps, two by two: a larger tensor's as images in one browser-drawn
    grid (``charts.image_maps``, key ``overview_maps``; each map's box has the class
    ``qlab-map-<name>``), a small tensor's as plotly heatmaps with every cell's values on
    hover (keys ``heat_<name>``). The plotly maps go into one container drawn only once all
    four figures exist, so they appear together (a map missing while the others are drawn
    read as "no codes")."""
    named = figs.named()
    images = {name: m for name, m in named.items() if isinstance(m, MapImage)}
    if len(images) == len(named):
        image_maps(images, key="overview_maps")
        return
    with st.container(key="overview_maps"):
        top = st.columns(2)
        bottom = st.columns(2)
        for col, (name, fig) in zip((*top, *bottom), named.items(), strict=True):
            col.plotly_chart(fig, key=f"heat_{name}", config={"displaylogo": False})
