"""Bits per value as the pages write them: exactly where the number is a short binary
fraction, as every shipped format's is (Q6_K ``6 + 0.5 + 0.0625 = 6.5625``, Q3_K
``3.4375``, IQ2_XXS ``2.0625``), else at four significant digits (``4 + 20/128 + 32/512``
is ``4.281``). Four significant digits alone wrote Q6_K's 6.5625 as ``6.562`` beside its
parts ``6 + 0.5 + 0.0625``, and Q3_K's 3.4375 as ``3.438``."""

from __future__ import annotations

import math
import numbers

__all__ = ["bits_text"]

_EXACT_DECIMALS = 4


def bits_text(bits: float) -> str:
    """``6.5625`` -> ``"6.5625"``, ``4.5`` -> ``"4.5"``, ``8.0`` -> ``"8"``, ``4.28125`` ->
    ``"4.281"`` (more than four decimals: four significant digits); ``NaN``/``inf`` by
    name. ``TypeError`` for a non-number (a bool included)."""
    if isinstance(bits, bool) or not isinstance(bits, numbers.Real):
        raise TypeError(f"bits must be a real number, got {bits!r}")
    value = float(bits)
    if not math.isfinite(value):
        return f"{value:g}"
    exact = f"{value:.{_EXACT_DECIMALS}f}".rstrip("0").rstrip(".")
    return exact if float(exact) == value else f"{value:.4g}"
