"""A file's stored type as the tensor picker's option tag: whole when it fits the room
``display.options`` leaves a tag beside a name, else compacted step by step until it does.

A tag longer than that room was left out of the option (``option_labels``): a GPTQ
act-order tensor's option read as if it were any other (``…up_proj.weight``), while the
caption under the box said ``GPTQ int4 g128 act-order``. The compact form keeps every fact
the type names, in fewer characters: ``GPTQ int4 g128 act-order`` -> ``int4 g128 act``
(the family is the file's own and named in the picker's label), ``NF4 + double quant`` ->
``NF4 + DQ``.
"""

from __future__ import annotations

from dashboard.services.display.options import MIN_NAME_CHARS, OPTION_CHARS

__all__ = ["TAG_ROOM", "option_tag"]

TAG_ROOM = OPTION_CHARS - MIN_NAME_CHARS - 2
"""The most characters of a tag an option shows (the two spaces before it counted out):
16 for the sidebar's 30 with 12 kept for the name."""

_FAMILIES = ("GPTQ ", "AWQ ", "CT ")
"""Leading words naming the method: the picker's label names the file's kind already."""
_STEPS: tuple[tuple[str, str], ...] = (
    (" act-order", " act"),
    (" + double quant", " + DQ"),
    ("per-channel", "per-ch"),
    ("int", "i"),  # the last resort: compressed-tensors' "int4 g128 asym act" is 18
)
"""Replacements tried in order, each kept, until the tag fits."""


def option_tag(type_name: str, room: int = TAG_ROOM) -> str:
    """``type_name`` (a stored type as the pages name it) in at most ``room`` characters
    where the steps above get it there: itself when it fits; else without its method's
    word, then each replacement of ``_STEPS`` in turn. A tag no step brings within
    ``room`` is returned as compact as they make it (the option then leaves it out, as
    before). ``ValueError`` for a ``room`` below 1."""
    if room < 1:
        raise ValueError(f"room must be at least 1 character, got {room}")
    tag = type_name
    if len(tag) <= room:
        return tag
    family = next((f for f in _FAMILIES if tag.startswith(f)), None)
    if family is not None:
        tag = tag[len(family) :]
    for old, new in _STEPS:
        if len(tag) <= room:
            break
        tag = tag.replace(old, new)
    return tag
