"""A count and its noun as a sentence says them: ``counted(1, "tensor")`` is ``"1
tensor"``, ``counted(2_048, "tensor")`` is ``"2,048 tensors"`` (the pages wrote "1
tensors" and "1 file(s)")."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with thousands separators and ``noun``, or ``plural`` (default ``noun + "s"``)
    unless ``n`` is 1. ``TypeError`` for a count that is not an int."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"a count must be an int, got {n!r}")
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
