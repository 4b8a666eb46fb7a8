"""The progress callback that long service calls (sweeps, model reports) accept."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress"]

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called with ``(0, total)`` first, then after every step."""
