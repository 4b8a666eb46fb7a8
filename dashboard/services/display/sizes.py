"""Sizes and counts written short, one rule for every page: ``8.39 MB``, ``1.5 kB``,
``12.3k``.

The unit is picked on the value as it will be written: the smallest unit whose rounded
value stays under 1,000. So 999,950 bytes is "1 MB" (or "1.0 MB" at one decimal), never
"1e+03 kB" or "1000.0 kB"; two copies of this rule on the pages had drifted apart before.
Powers of 1000, as file sizes are shown.
"""

from __future__ import annotations

__all__ = ["compact_bytes", "compact_count"]

_BYTE_UNITS = ((1e3, "kB"), (1e6, "MB"), (1e9, "GB"))
_COUNT_UNITS = ((1e3, "k"), (1e6, "M"), (1e9, "G"))


def _check(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"a size or count must be an int, got {n!r}")
    if n < 0:
        raise ValueError(f"a size or count cannot be negative, got {n:,}")


def _written(n: int, units: tuple[tuple[float, str], ...], sep: str, decimals: int | None) -> str:
    """``n`` in the smallest of ``units`` (ascending) whose written value is under 1,000 (the
    largest unit past that): 3 significant digits, trailing zeros dropped, when ``decimals``
    is ``None``, else exactly ``decimals`` places."""
    for div, unit in units:
        v = n / div
        rounded = float(f"{v:.3g}") if decimals is None else round(v, decimals)
        if rounded < 1000 or unit == units[-1][1]:
            text = f"{rounded:g}" if decimals is None else f"{v:.{decimals}f}"
            return f"{text}{sep}{unit}"
    raise AssertionError("unreachable: the last unit always returns")


def compact_bytes(n: int, decimals: int | None = None) -> str:
    """A size in bytes: exact below 1,000 (``812 B``); above, 3 significant digits
    (``45.1 kB``, ``8.39 MB``, ``1 MB``, ``1.07 GB``) or, with ``decimals``, that many
    places (``decimals=1``: ``1.5 kB``, ``1.0 MB``, ``9.4 MB``, as the file pickers list
    them). ``TypeError``/``ValueError`` for a size that is not a non-negative int."""
    _check(n)
    bad = isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0
    if decimals is not None and bad:
        raise ValueError(f"decimals must be a non-negative int or None, got {decimals!r}")
    if n < 1000:
        return f"{n} B"
    return _written(n, _BYTE_UNITS, " ", decimals)


def compact_count(n: int) -> str:
    """A count: exact with separators below 10,000 (``9,999``), else 3 significant digits
    and ``k``/``M``/``G`` (``12.3k``, ``4.19M``, ``1M`` for 999,999, ``1.07G``)."""
    _check(n)
    if n < 10_000:
        return f"{n:,}"
    return _written(n, _COUNT_UNITS, "", None)
