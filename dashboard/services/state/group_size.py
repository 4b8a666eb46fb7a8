"""The group size a tensor offers nearest to the one a visitor chose.

A group-size slider offers only the divisors of the tensor's columns; the explorer, the
sweep and the lesson labs each move a choice the tensor does not offer to the nearest size
it does, and they must agree on which.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["nearest_size"]


def nearest_size(chosen: int, sizes: Sequence[int]) -> int:
    """``chosen`` when ``sizes`` offers it, else the size nearest to it, the smaller on a
    tie: 96 among (1, 3) gives 3; 6 among (4, 8) gives 4. ``ValueError`` when ``sizes``
    is empty."""
    if not sizes:
        raise ValueError(f"no sizes to fit the group size {chosen} to")
    if chosen in sizes:
        return chosen
    return min(sizes, key=lambda d: (abs(d - chosen), d))
