"""The zoom window: a full-resolution part of all four maps, every cell's hover exact.

The browser draws it (``dashboard.components.charts``: one canvas per panel, coloured
from the palette sent here, the hover read from the cells' float32 values). As four
plotly heatmaps with colour bars it cost about 250 ms of the browser's main thread per
redraw, measured in isolation, and ~200 ms of every settled bit-width change at 1536x384
(``benchmarks/browser.py``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from .cells import HoverField, hover_fields, rich_customdata
from .colour import (
    ColourLimits,
    code_limits,
    colourbar_payload,
    error_limits,
    value_limits,
    with_count,
)
from .explore import Exploration

__all__ = ["MAGENTA", "ZoomPanel", "ZoomView", "zoom_payload", "zoom_view"]

MAGENTA = (255, 0, 255)
"""The colour of a NaN cell when the tensor had NaN/Inf (white otherwise), as on the maps."""
_BAR_TICKS = 4


@dataclass(frozen=True)
class ZoomPanel:
    """One of the four panels: its ``title``, the ``field`` of ``ZoomView.cells`` it
    colours, and its colour range (``limits``)."""

    title: str
    field: int
    limits: ColourLimits


@dataclass(frozen=True, eq=False)
class ZoomView:
    """The window ``rows`` x ``cols`` (matrix indices) of an exploration.

    ``cells``: ``[len(rows), len(cols), k]`` float32, ``rich_customdata`` (original, code,
    dequantized, error, scale, and zero point or offset), described by ``fields``;
    ``panels``: original, codes, dequantized and error; ``nonfinite``: the tensor had
    NaN/Inf, whose cells show magenta (white otherwise: a NaN cell is no value)."""

    rows: range
    cols: range
    cells: np.ndarray
    fields: tuple[HoverField, ...]
    panels: tuple[ZoomPanel, ...]
    nonfinite: bool

    @property
    def title(self) -> str:
        return (
            f"Zoom: rows {self.rows.start}–{self.rows.stop - 1}, cols {self.cols.start}–"
            f"{self.cols.stop - 1} (full resolution)"
        )

    def values(self, panel: int) -> np.ndarray:
        """``[len(rows), len(cols)]`` float32: what panel ``panel`` colours."""
        return self.cells[..., self.panels[panel].field]


def zoom_view(exp: Exploration, row0: int, col0: int, size: int) -> ZoomView:
    """Full-resolution ``size`` x ``size`` window at ``(row0, col0)`` (clipped to the
    matrix) of all four panels. Original and dequantized share one colour range (the
    window's 99.5th percentile of ``|x|``, ``value_limits``), the error has its own, the
    codes span every code of the format."""
    n_rows, n_cols = exp.original.shape
    row0 = max(0, min(row0, n_rows - 1))
    col0 = max(0, min(col0, n_cols - 1))
    rows = range(row0, min(n_rows, row0 + size))
    cols = range(col0, min(n_cols, col0 + size))
    cells = rich_customdata(exp, slice(rows.start, rows.stop), slice(cols.start, cols.stop))
    values = value_limits(exp, cells[..., 0])
    panels = (
        ZoomPanel("Original", 0, values),
        ZoomPanel("Codes", 1, code_limits(exp, "code")),
        ZoomPanel("Dequantized", 2, with_count(values, cells[..., 2])),
        ZoomPanel("Error", 3, error_limits(cells[..., 3])),
    )
    return ZoomView(rows, cols, cells, hover_fields(exp), panels, exp.finite is not None)


def zoom_payload(view: ZoomView) -> dict:
    """What the browser's zoom component gets (JSON): the cells as base64 little-endian
    float32 (row-major ``[row, col, field]``: exact, 4 bytes a number), the hover fields,
    and per panel its palette (``display.image.palette``, the overview images' colours:
    level ``round((v - lo) / (hi - lo) * (n - 1))``, clamped), limits, colour-bar ticks
    and the colour-bar note on three lines (sign convention, limits, values beyond)."""
    cells = np.ascontiguousarray(view.cells, dtype="<f4")
    return {
        "title": view.title,
        "row0": view.rows.start,
        "col0": view.cols.start,
        "nrows": len(view.rows),
        "ncols": len(view.cols),
        "cells": base64.b64encode(cells.tobytes()).decode("ascii"),
        "fields": [
            {"label": f.label, "digits": f.digits, "style": f.style.value} for f in view.fields
        ],
        "nan": list(MAGENTA) if view.nonfinite else [255, 255, 255],
        "panels": [
            {
                "title": p.title,
                "field": p.field,
                "lo": p.limits.lo,
                "hi": p.limits.hi,
                **colourbar_payload(p.limits, _BAR_TICKS),
            }
            for p in view.panels
        ],
    }
