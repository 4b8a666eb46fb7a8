"""What every URL parser here shares: an enum member from a query value, or a
``ValueError`` that names the key, the value and every allowed one."""

from __future__ import annotations

import enum
from typing import TypeVar

__all__ = ["member"]

_E = TypeVar("_E", bound=enum.Enum)


def member(key: str, raw: str, kind: type[_E]) -> _E:
    """The member of ``kind`` whose value is ``raw``; ``ValueError``
    ``"key='raw' is not one of: a, b, c"`` otherwise."""
    for m in kind:
        if m.value == raw:
            return m
    allowed = ", ".join(str(m.value) for m in kind)
    raise ValueError(f"{key}={raw!r} is not one of: {allowed}")
