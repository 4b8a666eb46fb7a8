"""What every URL parser here shares: an enum member from a query value, or a
``ValueError`` that names the key, the value and every allowed one."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from typing import TypeVar

__all__ = ["link_keys", "member"]

_E = TypeVar("_E", bound=enum.Enum)


def member(key: str, raw: str, kind: type[_E]) -> _E:
    """The member of ``kind`` whose value is ``raw``; ``ValueError``
    ``"key='raw' is not one of: a, b, c"`` otherwise."""
    for m in kind:
        if m.value == raw:
            return m
    allowed = ", ".join(str(m.value) for m in kind)
    raise ValueError(f"{key}={raw!r} is not one of: {allowed}")


# Where a parser names its keys bare: "key=value", and the word lists after "query
# parameter(s)" and "combined with" ("query parameters sbits and ssigned need ...").
_LISTED = re.compile(r"(query parameters? |combined with )(\w+(?:(?:, | and )\w+)*)")


def link_keys(message: str, prefix: str, keys: Iterable[str]) -> str:
    """``message`` (a parser's ``ValueError`` text, whose keys are bare: ``bits=99``) with
    each of ``keys`` written as the link holds it (``prefix`` ``"m.a."``: ``m.a.bits=99``),
    and "query parameter(s)" dropped: the page names the part, the key says the rest.

    E.g. ``"query parameter bits=8 contradicts fmt=nf4 (4 bits)"`` with ``"m."`` becomes
    ``"m.bits=8 contradicts m.fmt=nf4 (4 bits)"``: only a key before ``=`` or in a listed
    name is prefixed, so the words "bits" and "range" of the prose stay as they are.
    """
    names = sorted(set(keys), key=len, reverse=True)
    if not names:
        return message
    alternatives = "|".join(map(re.escape, names))
    before_value = re.compile(rf"(?<![\w.])({alternatives})(?==)")
    word = re.compile(rf"(?<![\w.])({alternatives})(?![\w.=])")

    def listed(m: re.Match[str]) -> str:
        return m.group(1) + word.sub(lambda k: prefix + k.group(1), m.group(2))

    text = _LISTED.sub(listed, message)
    text = before_value.sub(lambda m: prefix + m.group(1), text)
    text = text.replace("query parameters do not", "its keys do not")
    return re.sub(r"query parameters? ", "", text)
