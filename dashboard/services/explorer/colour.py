"""The explorer maps' colour scales: one diverging convention, robust limits, colour bars.

Every diverging map is red = positive, blue = negative, white = 0, said in its colour bar.
Limits sit at the 99.5th percentile of ``|x|`` of the shown values, so one extreme value
among thousands does not wash a map out; the values beyond are counted in the colour bar
(and ringed on the overview maps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from quant_core import Format

from ..display.image import palette
from .explore import Exploration

__all__ = [
    "CONSTANT_SPREAD",
    "DIVERGING",
    "LIMIT_PERCENTILE",
    "SIGN_NOTE",
    "ColourLimits",
    "code_limits",
    "colorbar",
    "colourbar_payload",
    "constant_range",
    "error_limits",
    "robust_limit",
    "tick_values",
    "value_limits",
    "with_count",
]

DIVERGING = "RdBu_r"
"""Every diverging map: red = positive, blue = negative, white = 0 (said in its colour bar)."""
SIGN_NOTE = "red = positive, blue = negative"
LIMIT_PERCENTILE = 99.5
CONSTANT_SPREAD = 0.5
"""A constant map's colour range reaches this fraction of ``|value|`` either side of it."""


@dataclass(frozen=True)
class ColourLimits:
    """A map's colour range ``[lo, hi]`` and how it was chosen (``note``, for the colour
    bar). ``colorscale``: ``DIVERGING`` (``lo = -hi``), ``"Viridis"`` (one-signed data) or
    ``"Cividis"`` (codes). ``integer``: the values are whole numbers (codes), so the colour
    bar's ticks are too (``tick_values``)."""

    colorscale: str
    lo: float
    hi: float
    note: str
    integer: bool = False


def robust_limit(shown: np.ndarray | torch.Tensor) -> float:
    """The 99.5th percentile of ``|x|`` over the finite shown values, taken as an actual
    data value (``method="higher"``), so a tensor of up to 200 values keeps its maximum
    and one extreme value among thousands no longer washes the map out. 1 for all-zero."""
    a = np.abs(np.asarray(shown, dtype=np.float32))
    a = a[np.isfinite(a)]
    if a.size == 0:
        return 1.0
    lim = float(np.percentile(a, LIMIT_PERCENTILE, method="higher"))
    return lim if lim > 0 else (float(a.max()) or 1.0)


def _beyond(shown: np.ndarray | torch.Tensor, lo: float, hi: float) -> int:
    v = np.asarray(shown, dtype=np.float32)
    return int(np.count_nonzero((v > hi) | (v < lo)))


def _limits_note(lim: float, n_beyond: int) -> str:
    return (
        f"{SIGN_NOTE}<br>±{lim:.3g} ({LIMIT_PERCENTILE:g}th pct of |x|; "
        f"{n_beyond:,} values beyond, saturated)"
    )


def value_limits(exp: Exploration, shown: np.ndarray | torch.Tensor) -> ColourLimits:
    """One colour scale for original and dequantized: diverging around 0 (``DIVERGING``)
    at ``±`` the 99.5th percentile of ``|x|`` of the shown original values when the data has
    both signs; sequential over the 0.5th-99.5th percentile range otherwise (the finite
    minimum and maximum where those percentiles meet), and ``constant_range`` around the
    value where every shown value is the same."""
    if exp.value_min < 0 < exp.value_max:
        lim = robust_limit(shown)
        return ColourLimits(DIVERGING, -lim, lim, _limits_note(lim, _beyond(shown, -lim, lim)))
    v = np.asarray(shown, dtype=np.float32)
    v = v[np.isfinite(v)]
    lo = float(np.percentile(v, 100 - LIMIT_PERCENTILE, method="lower")) if v.size else 0.0
    hi = float(np.percentile(v, LIMIT_PERCENTILE, method="higher")) if v.size else 0.0
    if hi <= lo and v.size:  # the percentiles met (nearly all one value): the data's ends
        lo, hi = float(v.min()), float(v.max())
    if hi <= lo:
        return _constant_limits(lo, shown)
    n = _beyond(shown, lo, hi)
    return ColourLimits(
        "Viridis",
        lo,
        hi,
        f"{lo:.3g} to {hi:.3g} ({100 - LIMIT_PERCENTILE:g}th–{LIMIT_PERCENTILE:g}th pct; "
        f"{n:,} values beyond, saturated)",
    )


def constant_range(value: float) -> tuple[float, float]:
    """A colour range for a map whose every value is ``value``: centred on it, reaching
    ``CONSTANT_SPREAD`` of ``|value|`` either side (1 for all-ones: ``0.5 .. 1.5``; -2:
    ``-3 .. -1``), and ``-1 .. 1`` for 0, so the value sits mid-scale and the colour bar
    names nothing the data is not near (``lo + 1`` gave ones a range of 1 to 2)."""
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"a constant map's value must be finite, got {v}")
    if v == 0.0:
        return -1.0, 1.0
    half = abs(v) * CONSTANT_SPREAD
    lo, hi = v - half, v + half
    big = float(np.finfo(np.float64).max)
    return max(lo, -big), min(hi, big)


def _constant_limits(value: float, shown: np.ndarray | torch.Tensor) -> ColourLimits:
    """``constant_range`` as limits: diverging around 0 (white) for all-zero, Viridis
    otherwise; the note says the map is constant."""
    lo, hi = constant_range(value)
    n = _beyond(shown, lo, hi)
    if value == 0.0:
        note = f"{SIGN_NOTE}<br>±1 (every value is 0; {n:,} values beyond, saturated)"
        return ColourLimits(DIVERGING, lo, hi, note)
    note = f"{lo:.3g} to {hi:.3g} (every value is {value:.4g}; {n:,} values beyond, saturated)"
    return ColourLimits("Viridis", lo, hi, note)


def error_limits(shown: np.ndarray | torch.Tensor) -> ColourLimits:
    """Diverging, centred on 0, at ``±`` the 99.5th percentile of ``|error|`` shown."""
    lim = robust_limit(shown)
    return ColourLimits(DIVERGING, -lim, lim, _limits_note(lim, _beyond(shown, -lim, lim)))


def with_count(limits: ColourLimits, shown: np.ndarray | torch.Tensor) -> ColourLimits:
    """The same range, with the count of ``shown`` values beyond it (another map)."""
    n = _beyond(shown, limits.lo, limits.hi)
    note = re.sub(r"[0-9,]+ values beyond", f"{n:,} values beyond", limits.note)
    return ColourLimits(limits.colorscale, limits.lo, limits.hi, note, limits.integer)


def code_limits(exp: Exploration, note: str | None = None) -> ColourLimits:
    """Cividis over every code the format has: ``qmin .. qmax`` for integers, ``0 ..
    2^bits - 1`` for codebook formats (NF4, FP4, FP8 index a table)."""
    cfg = exp.config
    if cfg.format is Format.INT:
        lo, hi = float(cfg.qmin), float(cfg.qmax)
    else:
        lo, hi = 0.0, float((1 << cfg.bits) - 1)
    note = f"code {lo:.0f} to {hi:.0f}" if note is None else note
    return ColourLimits("Cividis", lo, hi, note, integer=True)


def tick_values(limits: ColourLimits, n_ticks: int) -> list[float]:
    """About ``n_ticks`` evenly spaced values from ``lo`` to ``hi`` (both included), for a
    colour bar whose ticks sit evenly along it. For ``integer`` limits (codes) every tick
    is a whole number: every code when there are at most ``2 * n_ticks`` of them, else the
    count nearest ``n_ticks`` (the larger on a tie) whose step is a whole number of codes
    (``-8 .. 7``, 5 asked: ``-8, -5, -2, 1, 4, 7``; ``0 .. 255``: ``0, 51, ..., 255``);
    two (the ends) at worst. Never ``-4.25, 3.25`` for a code."""
    if n_ticks < 2:
        raise ValueError(f"n_ticks must be at least 2, got {n_ticks}")
    if not limits.integer:
        return np.linspace(limits.lo, limits.hi, n_ticks).tolist()
    lo, span = round(limits.lo), round(limits.hi - limits.lo)
    if span + 1 <= 2 * n_ticks:
        return [float(lo + k) for k in range(span + 1)]
    fits = [n for n in range(2, 2 * n_ticks + 1) if span % (n - 1) == 0]
    n = min(fits, key=lambda n: (abs(n - n_ticks), -n))
    step = span // (n - 1)
    return [float(lo + k * step) for k in range(n)]


def colourbar_payload(limits: ColourLimits, n_ticks: int) -> dict:
    """A colour bar the browser draws (``assets/common.js``: ``colourBar``): ``palette``,
    the scale's colours (``display.image.palette``, flat ``[r, g, b, ...]``, the images'
    and the zoom's own); ``ticks``, ``n_ticks`` evenly spaced values from ``lo`` to ``hi``
    written ``.3g``; ``note``, how the limits were chosen, in short lines that fit a
    quarter of the page: ``"red = positive, blue = negative<br>±0.1 (99.5th pct of |x|; 3
    values beyond, saturated)"`` -> the sign convention, ``±0.1 (99.5th pct of |x|)``,
    ``(3 values beyond, saturated)``."""
    return {
        "palette": palette(limits.colorscale).reshape(-1).tolist(),
        "ticks": [f"{v:.3g}" for v in tick_values(limits, n_ticks)],
        "note": limits.note.replace("; ", ")<br>(", 1).split("<br>"),
    }


def colorbar(title: str, limits: ColourLimits | None = None) -> dict:
    """A horizontal colour bar under the map, its title (convention and limits) on top;
    for ``integer`` ``limits`` (codes) its ticks are whole numbers (``tick_values``)."""
    ticks: dict = {}
    if limits is not None and limits.integer:
        values = tick_values(limits, 6)
        ticks = {"tickmode": "array", "tickvals": values, "ticktext": [f"{v:.0f}" for v in values]}
    return {
        **ticks,
        "orientation": "h",
        "thickness": 10,
        "y": -0.1,
        "yanchor": "top",
        "len": 0.9,
        "nticks": 6,
        "title": {"text": title, "side": "top", "font": {"size": 11}},
    }
