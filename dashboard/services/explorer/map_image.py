"""A larger tensor's overview map as a plain image: colours, boundary lines and rings drawn
here; the browser lays the four out with their colour bars (``maps_payload``).

Measured in headless Chromium (``benchmarks/browser.py``, MiniLM 1536x384): three maps
drawn as plotly charts (a PNG under an image trace) kept the browser busy about 450 ms per
bit-width change; as ``<img>`` elements they cost almost nothing to redraw, and the page
settled in 0.87 s instead of 1.32 s. These maps showed colours only anyway (exact values
are in the zoom window), so nothing a user reads is lost.

The colours are ``display.image``'s (plotly's interpolation of the scale), so the image and
the zoom window (coloured in the browser from the same palette and levels) agree. Each
reduced cell is at least one pixel, repeated by an integer factor along a side (nearest
neighbour, so cells stay sharp) to bring the image near ``ASPECT`` and ``MIN_SIDE_PX``; the
browser scales it to the column's width.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

from ..display.image import (
    LEVELS,
    NAN_INDEX,
    colour_levels,
    palette,
    png_bytes,
)
from ..display.reduce import Reduced
from .colour import ColourLimits, colourbar_payload
from .maps import MAX_MARKED, BoundaryLines, MapSpec, outlier_cells

__all__ = [
    "ASPECT",
    "MIN_SIDE_PX",
    "MapImage",
    "map_image",
    "maps_payload",
    "marked_note",
    "spread_out",
]

MIN_SIDE_PX = 256
"""The shorter side of an image, at least (cells are repeated by an integer factor)."""
ASPECT = 0.75
"""Height / width an image is stretched towards: 509 x 55 cells (a 30522 x 384 embedding)
become 509 x 660 pixels, not a sliver a column wide and thousands of pixels tall."""
MAX_REPEAT = 64
_LINE_INDEX = NAN_INDEX - 2
_RING_INDEX = NAN_INDEX - 1
_LINE_RGB = (60, 60, 60)
_RING_RGB = (0, 0, 0)
_MAGENTA = (255, 0, 255)
_TICKS = 5


@dataclass(frozen=True, eq=False)
class MapImage:
    """One overview map as an image.

    ``title``: what the map shows (``"Quantized codes"``); ``subtitle``: how it was reduced
    (empty when every cell is a pixel); ``png``: palette PNG, row 0 on top, ``scale``
    pixels per reduced cell along (rows, columns); ``limits``: its colour range and how it
    was chosen; ``n_marked``: saturated cells ringed, of the ``n_candidates`` (at most
    ``MAX_MARKED``) most extreme: one ring a neighbourhood (``spread_out``)."""

    title: str
    subtitle: str
    png: bytes
    scale: tuple[int, int]
    limits: ColourLimits
    n_marked: int
    n_candidates: int = 0

    @property
    def colourbar(self) -> dict:
        """The colour bar the browser draws (``colour.colourbar_payload``)."""
        return colourbar_payload(self.limits, _TICKS)

    @property
    def size(self) -> tuple[int, int]:
        """The PNG's ``(width, height)`` in pixels, from its header."""
        width, height = struct.unpack(">II", self.png[16:24])
        return width, height


def _plain(title: str) -> tuple[str, str]:
    """A figure title ``"Name<br><sup>how</sup>"`` as plain ``(name, how)``."""
    head, _, rest = title.partition("<br>")
    return head, re.sub(r"<[^>]+>", "", rest).strip()


def _factors(rows: int, cols: int) -> tuple[int, int]:
    """Integer repeats ``(fy, fx)`` of a ``rows x cols`` map so the image is about
    ``ASPECT`` (height / width) and its shorter side at least ``MIN_SIDE_PX``; a long thin
    tensor is stretched across, as plotly stretched its image trace into a fixed box."""
    fy = fx = 1
    if rows > ASPECT * cols:
        fx = max(1, round(rows / (ASPECT * cols)))
    else:
        fy = max(1, round(ASPECT * cols / rows))
    k = max(1, math.ceil(MIN_SIDE_PX / min(rows * fy, cols * fx)))
    return min(fy * k, MAX_REPEAT), min(fx * k, MAX_REPEAT)


def map_image(spec: MapSpec, lines: BoundaryLines | None, has_nonfinite: bool) -> MapImage:
    """``spec`` drawn as an image: reduced cells coloured by ``spec.limits``, NaN cells
    magenta (``has_nonfinite``: the matrix holds NaN/Inf), ``lines`` between channels or
    groups, and, when ``spec.mark_outliers``, a ring round each of the (at most
    ``MAX_MARKED``) most extreme cells beyond the colour range."""
    reduced, limits = spec.reduced, spec.limits
    rows, cols = reduced.values.shape
    fy, fx = _factors(rows, cols)
    levels = colour_levels(reduced.values, limits.lo, limits.hi)
    pixels = np.repeat(np.repeat(levels, fy, axis=0), fx, axis=1)
    if lines is not None:
        _draw_lines(pixels, reduced, lines, fy, fx)
    image = Image.frombytes("P", (pixels.shape[1], pixels.shape[0]), pixels.tobytes())
    n_marked = n_candidates = 0
    if spec.mark_outliers:
        r, c = outlier_cells(reduced, limits)
        n_candidates = int(r.size)
        radius = max(3.0, 0.75 * max(fy, fx))
        ys, xs = (r + 0.5) * fy, (c + 0.5) * fx
        far = np.abs(reduced.values[r, c] - (limits.hi + limits.lo) / 2)
        kept = spread_out(ys, xs, far, 2 * radius)
        n_marked = int(kept.size)
        draw = ImageDraw.Draw(image)
        for y, x in zip(ys[kept], xs[kept], strict=True):
            box = (x - radius, y - radius, x + radius, y + radius)
            draw.ellipse(box, outline=_RING_INDEX, width=1)
    table = np.zeros((256, 3), dtype=np.uint8)
    table[:LEVELS] = palette(limits.colorscale)
    table[_LINE_INDEX] = _LINE_RGB
    table[_RING_INDEX] = _RING_RGB
    table[NAN_INDEX] = _MAGENTA if has_nonfinite else (255, 255, 255)
    image.putpalette(table.tobytes())
    title, subtitle = _plain(spec.title)
    return MapImage(title, subtitle, png_bytes(image), (fy, fx), limits, n_marked, n_candidates)


def spread_out(ys: np.ndarray, xs: np.ndarray, far: np.ndarray, gap: float) -> np.ndarray:
    """Indices (ascending) of the points ``(ys, xs)`` (pixels) to ring so that no two rings
    overlap: the most extreme first (largest ``far``; ties in the given order), then each
    next one at least ``gap`` (a ring's diameter) from every ring kept. Outliers come in
    clusters (an outlier channel's extreme rows): 200 rings piled on a few cells drew
    black blobs; one ring per neighbourhood still points at each of them."""
    order = np.argsort(-far, kind="stable")
    kept: list[int] = []
    for i in order:
        d2 = (ys[kept] - ys[i]) ** 2 + (xs[kept] - xs[i]) ** 2
        if not kept or d2.min() >= gap * gap:
            kept.append(int(i))
    return np.sort(np.array(kept, dtype=np.intp))


def _draw_lines(
    pixels: np.ndarray, reduced: Reduced, lines: BoundaryLines, fy: int, fx: int
) -> None:
    """Dark one-pixel lines where a boundary between matrix cells ``p - 0.5 | p`` falls
    (rounded to the nearest pixel edge of the reduced, repeated grid)."""
    height, width = pixels.shape
    for p in lines.rows:
        y = min(height - 1, round((p + 0.5) / reduced.row_step * fy))
        pixels[y, :] = _LINE_INDEX
    for p in lines.cols:
        x = min(width - 1, round((p + 0.5) / reduced.col_step * fx))
        pixels[:, x] = _LINE_INDEX


def marked_note(n_marked: int, n_candidates: int = 0) -> str:
    """What the rings mean, for the caption under a map with rings: ``n_marked`` rings
    for ``n_candidates`` cells (``MAX_MARKED`` at most: the most extreme) beyond the
    colour range, one ring a neighbourhood."""
    if n_marked == 0:
        return ""
    n_candidates = max(n_candidates, n_marked)
    which = f"the {MAX_MARKED} most extreme" if n_candidates >= MAX_MARKED else ""
    if n_marked == n_candidates:
        return f"rings: cells beyond the colour range{f' ({which})' if which else ''}"
    return (
        f"rings: cells beyond the colour range ({n_marked} rings for "
        f"{which or n_candidates} cells, one a neighbourhood)"
    )


def maps_payload(maps: Mapping[str, MapImage], srcs: Mapping[str, str]) -> dict:
    """What the browser's maps component gets (JSON): per map, in ``maps``' order, its
    ``name`` (the key in ``maps``), title and subtitle, the address of its PNG (``srcs``,
    by name), the PNG's size in pixels (so the page reserves its box before the image
    arrives), its colour bar (``colourbar_payload``) and the rings' note (``""`` when none
    is drawn)."""
    missing = set(maps) - set(srcs)
    if missing:
        raise ValueError(f"no image address for the maps {sorted(missing)}")
    out = []
    for name, m in maps.items():
        width, height = m.size
        out.append(
            {
                "name": name,
                "title": m.title,
                "subtitle": m.subtitle,
                "src": srcs[name],
                "width": width,
                "height": height,
                "bar": m.colourbar,
                "marked": marked_note(m.n_marked, m.n_candidates),
            }
        )
    return {"maps": out}
