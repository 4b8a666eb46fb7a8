"""The explorer's view settings as URL query parameters (validated, never evaluated).

Keys: ``red`` (``mean`` | ``max_abs``), ``bnd`` (``0`` | ``1``: channel/group boundaries),
``zr``/``zc`` (zoom window's first row and column), ``zs`` (window size), ``blk`` (the
channel or group the histogram and worked example show).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..display.reduce import Reduction

__all__ = ["VIEW_KEYS", "ZOOM_SIZES", "ViewState", "view_from_query", "view_to_query"]

VIEW_KEYS = ("red", "bnd", "zr", "zc", "zs", "blk")
ZOOM_SIZES = (16, 32, 48, 64)
_MAX_INDEX = 1 << 31
_INT_RE = re.compile(r"0|[1-9][0-9]{0,9}")


@dataclass(frozen=True)
class ViewState:
    reduction: Reduction = Reduction.MEAN
    boundaries: bool = True
    zoom_row: int = 0
    zoom_col: int = 0
    zoom_size: int = 32
    block: int = 0


def view_to_query(view: ViewState) -> dict[str, str]:
    """Only the settings that differ from the defaults, to keep links short."""
    default = ViewState()
    out: dict[str, str] = {}
    if view.reduction is not default.reduction:
        out["red"] = view.reduction.value
    if view.boundaries is not default.boundaries:
        out["bnd"] = "1" if view.boundaries else "0"
    for key, value, base in (
        ("zr", view.zoom_row, default.zoom_row),
        ("zc", view.zoom_col, default.zoom_col),
        ("zs", view.zoom_size, default.zoom_size),
        ("blk", view.block, default.block),
    ):
        if value != base:
            out[key] = str(value)
    return out


def _index(params: Mapping[str, str], key: str, default: int) -> int:
    raw = params.get(key)
    if raw is None:
        return default
    if not isinstance(raw, str) or not _INT_RE.fullmatch(raw) or int(raw) >= _MAX_INDEX:
        shown = raw if isinstance(raw, str) and len(raw) <= 32 else f"{str(raw)[:32]}…"
        raise ValueError(f"{key}={shown!r} is not a non-negative integer below {_MAX_INDEX}")
    return int(raw)


def view_from_query(params: Mapping[str, str]) -> ViewState:
    """Parse the view keys of ``params`` (others ignored); ``ValueError`` names a bad one.
    Indices beyond the tensor are clamped by the page, not rejected here."""
    d = ViewState()
    red = params.get("red", d.reduction.value)
    try:
        reduction = Reduction(red)
    except ValueError:
        raise ValueError(f"red={str(red)[:32]!r} is not one of: mean, max_abs") from None
    bnd = params.get("bnd", "1" if d.boundaries else "0")
    if bnd not in ("0", "1"):
        raise ValueError(f"bnd={str(bnd)[:32]!r} must be 0 or 1")
    size = _index(params, "zs", d.zoom_size)
    if size not in ZOOM_SIZES:
        raise ValueError(f"zs={size} is not one of {', '.join(map(str, ZOOM_SIZES))}")
    return ViewState(
        reduction=reduction,
        boundaries=bnd == "1",
        zoom_row=_index(params, "zr", d.zoom_row),
        zoom_col=_index(params, "zc", d.zoom_col),
        zoom_size=size,
        block=_index(params, "blk", d.block),
    )
