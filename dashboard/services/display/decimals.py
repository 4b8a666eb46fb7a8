"""A value written to a fixed number of decimals where that shows it, as the course's
notebooks print (``0.041719``, ``0.5423``), else to four significant digits: six decimals
wrote a scale of 2.4e-7 (pasted weights near 1e-5) as ``0.000000``, and one of 1.6e28 with
29 digits before the point."""

from __future__ import annotations

import math
import numbers

__all__ = ["fixed_decimals"]

_SIGNIFICANT = 4
_LARGEST_FIXED = 1e6


def fixed_decimals(value: float, places: int) -> str:
    """``value`` with ``places`` decimals when those hold at least three significant
    digits and it is below ``1e6`` in magnitude (``0.041719``; 0 as ``0.000000``), else to
    four significant digits (``2.362e-07``, ``1.575e+28``); NaN/inf by name. ``TypeError``
    for a non-number (a bool included), ``ValueError`` for ``places`` outside 0..12."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"value must be a real number, got {value!r}")
    if isinstance(places, bool) or not isinstance(places, int) or not 0 <= places <= 12:
        raise ValueError(f"places must be an int in 0..12, got {places!r}")
    v = float(value)
    if not math.isfinite(v):
        return f"{v:g}"
    if v == 0 or 10.0 ** (2 - places) <= abs(v) < _LARGEST_FIXED:
        return f"{v:.{places}f}"
    return f"{v:.{_SIGNIFICANT}g}"
