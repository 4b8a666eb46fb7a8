"""Permanent labels for a scatter's points that do not overlap: each point gets the first of
a few places around it where its text fits, beside it or further out with a leader line
(a plotly annotation's arrow), or no permanent label (its name stays in the hover) when no
place is free.

Plotly places a point's text but never moves it out of another's way: the uniform schemes of
the mixed page sit in a cluster at 4.1 to 4.5 bits per weight (MXFP4, NF4, Q4_0, IQ4_XS, ...),
where six labels drawn "top center" were one smudge. The layout here works in pixels of a
plot area of ``PlotBox`` size, set no larger than the narrowest the page draws (half the page
in a column), so the labels it keeps stay apart on any wider screen too: widening the plot
moves points apart horizontally, and the height is fixed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "AxisRange",
    "LabelBox",
    "Placed",
    "PlotBox",
    "label_annotation",
    "place_labels",
]

_DIRECTIONS = (90, 270, 45, 135, 315, 225, 0, 180)
"""Leader lines' directions in degrees (0 right, 90 up), in the order tried."""
_LEADER = (34.0, 52.0, 70.0)
"""Leader lines' lengths in pixels, shortest first."""


@dataclass(frozen=True)
class PlotBox:
    """The plot area's size in pixels (``width x height``) and the label font's size in
    pixels; a character is taken as ``0.62 font`` wide (plotly's Open Sans, capitals and
    digits, with room to spare) and a line as ``1.25 font`` high."""

    width: float = 340.0
    height: float = 220.0
    font: float = 11.0
    marker: float = 12.0
    """The largest marker's diameter: a label starts this far from its point's centre."""

    @property
    def char_width(self) -> float:
        return 0.62 * self.font

    @property
    def line_height(self) -> float:
        return 1.25 * self.font


@dataclass(frozen=True)
class AxisRange:
    """A linear axis from ``lo`` to ``hi`` in its own units (log10 of the value on a log
    axis, as plotly's ``range`` is)."""

    lo: float
    hi: float

    def fraction(self, v: float) -> float:
        span = self.hi - self.lo
        return 0.5 if span <= 0 else (v - self.lo) / span


@dataclass(frozen=True)
class LabelBox:
    """A label's box in pixels, ``x`` right and ``y`` up from the plot's lower left."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: LabelBox) -> bool:
        return (
            self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1
        )

    def inside(self, plot: PlotBox) -> bool:
        return self.x0 >= 0 and self.y0 >= 0 and self.x1 <= plot.width and self.y1 <= plot.height


def _pixel(x: float, y: float, xr: AxisRange, yr: AxisRange, plot: PlotBox) -> tuple[float, float]:
    return xr.fraction(x) * plot.width, yr.fraction(y) * plot.height


@dataclass(frozen=True)
class Placed:
    """Point ``index``'s label, its centre ``(dx, dy)`` pixels from the point (``dy`` up);
    ``leader``: drawn with a line to the point (it stands off, past other points)."""

    index: int
    text: str
    dx: float
    dy: float
    leader: bool

    def box(self, px: float, py: float, plot: PlotBox) -> LabelBox:
        """Its box for the point at pixel ``(px, py)``."""
        w, h = len(self.text) * plot.char_width, plot.line_height
        cx, cy = px + self.dx, py + self.dy
        return LabelBox(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)


def _candidates(index: int, text: str, plot: PlotBox) -> list[Placed]:
    """Beside the point (above, below, right, left: no line), then at each leader length in
    each direction, the box's near edge that far out."""
    w, h, gap = len(text) * plot.char_width, plot.line_height, plot.marker / 2 + 2
    out = [
        Placed(index, text, 0.0, gap + h / 2, False),
        Placed(index, text, 0.0, -gap - h / 2, False),
        Placed(index, text, gap + w / 2, 0.0, False),
        Placed(index, text, -gap - w / 2, 0.0, False),
    ]
    for length in _LEADER:
        for deg in _DIRECTIONS:
            c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
            dx = length * c + (w / 2) * (1 if c > 1e-9 else -1 if c < -1e-9 else 0)
            dy = length * s + (h / 2) * (1 if s > 1e-9 else -1 if s < -1e-9 else 0)
            out.append(Placed(index, text, round(dx, 1), round(dy, 1), True))
    return out


def place_labels(
    xs: Sequence[float],
    ys: Sequence[float],
    texts: Sequence[str],
    xr: AxisRange,
    yr: AxisRange,
    plot: PlotBox = PlotBox(),
    order: Sequence[int] | None = None,
    lines: Sequence[tuple[float, float]] = (),
) -> list[Placed]:
    """The labels that fit: points taken in ``order`` (default: as given; put the ones that
    matter most first), each labelled at the first candidate place (``_candidates``) whose
    box lies inside the plot and clear of every label placed so far and of every point's
    marker, of the points of ``lines`` (other traces' points and lines, sampled densely,
    as ``(x, y)`` in axis units) and of the leader lines drawn so far, its own leader line
    crossing no label; a point with no free place (or an empty text) gets none. ``ys`` in
    axis units (log10 on a log axis)."""
    n = len(xs)
    if not len(ys) == len(texts) == n:
        raise ValueError(f"xs, ys and texts must have one length, got {n}, {len(ys)}, {len(texts)}")
    r = plot.marker / 2
    pixels = [
        _pixel(x, y, xr, yr, plot) if math.isfinite(x) and math.isfinite(y) else None
        for x, y in zip(xs, ys, strict=True)
    ]
    taken = [LabelBox(p[0] - r, p[1] - r, p[0] + r, p[1] + r) for p in pixels if p is not None]
    for x, y in lines:
        if math.isfinite(x) and math.isfinite(y):
            px, py = _pixel(x, y, xr, yr, plot)
            taken.append(LabelBox(px - 2, py - 2, px + 2, py + 2))
    labels: list[LabelBox] = []
    placed: list[Placed] = []
    for i in order if order is not None else range(n):
        point = pixels[i]
        if point is None or not texts[i]:
            continue
        for cand in _candidates(i, texts[i], plot):
            box = cand.box(*point, plot)
            if not box.inside(plot) or any(box.overlaps(o) for o in taken):
                continue
            leader = _leader_dots(point, cand) if cand.leader else []
            if any(d.overlaps(o) for d in leader for o in labels):
                continue
            placed.append(cand)
            taken += [box, *leader]
            labels.append(box)
            break
    return placed


def _leader_dots(point: tuple[float, float], p: Placed) -> list[LabelBox]:
    """Small boxes every 3 px along ``p``'s leader line, from past the point's marker to
    the label's centre, for later labels to keep clear of (and it of earlier labels)."""
    length = math.hypot(p.dx, p.dy)
    steps = max(int(length / 3), 1)
    dots = []
    for k in range(steps):
        t = k / steps
        if t * length < 8:  # inside the point's own marker
            continue
        x, y = point[0] + t * p.dx, point[1] + t * p.dy
        dots.append(LabelBox(x - 1, y - 1, x + 1, y + 1))
    return dots


def label_annotation(p: Placed, x: float, y: float, font: float, colour: str) -> dict:
    """``p`` as a plotly annotation at the point ``(x, y)`` in axis units (log10 on a log
    axis, as plotly's annotations take it): shifted beside the point, or with a leader line
    (``ax``/``ay``: the text's offset in pixels, ``ay`` down)."""
    common = {"x": x, "y": y, "text": p.text, "font": {"size": font, "color": colour}}
    if p.leader:
        return {
            **common,
            "showarrow": True,
            "ax": p.dx,
            "ay": -p.dy,
            "arrowhead": 0,
            "arrowwidth": 1,
            "arrowcolor": colour,
            "standoff": 4,
        }
    return {**common, "showarrow": False, "xshift": p.dx, "yshift": p.dy}
