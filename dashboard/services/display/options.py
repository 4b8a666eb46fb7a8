"""Select box options that fit the sidebar: a long name shortened in its middle with a visible
ellipsis, keeping what tells names apart (the layer's number, the last parts).

A sidebar select box shows about 30 characters of its value and its options; Streamlit cuts
the rest off with no ellipsis, so ``token_embd.weight  F32 [64, 512`` looked whole but was
not, and ``encoder.layer.0.attention.self.query.weight  [384, 384]`` lost its shape. A picker
lists the short form (``option_label``) and says the whole line under the box (a caption).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["ELLIPSIS", "MIN_NAME_CHARS", "OPTION_CHARS", "fit_name", "option_labels"]

OPTION_CHARS = 30
"""The characters a sidebar select box shows at its default width (measured in Chromium:
``token_embd.weight  F32 [64, 512`` was the visible part of a longer line)."""
ELLIPSIS = "…"
MIN_NAME_CHARS = 12
"""The fewest characters a tag leaves the name: a longer tag is not shown in the box."""


def _tail(parts: Sequence[str], room: int) -> list[str]:
    """The most last ``parts`` whose dotted join fits in ``room`` characters."""
    kept: list[str] = []
    for part in reversed(parts):
        if len(".".join([part, *kept])) > room:
            break
        kept.insert(0, part)
    return kept


def fit_name(name: str, limit: int = OPTION_CHARS) -> str:
    """``name`` in at most ``limit`` characters: itself when it fits; else its last dotted
    segments after a ``…``, the head (most often shared by every name: ``model.layers.``)
    left out: ``…10.self_attn.q_proj.weight``; where those cannot keep the last segment with
    a digit (the layer's number), it is kept with its neighbour before a second ``…``:
    ``…layer.0.…LayerNorm.weight``; else characters around one ``…``. Always shows that
    something was left out."""
    if limit < 8:
        raise ValueError(f"limit must be at least 8, got {limit}")
    if len(name) <= limit:
        return name
    parts = name.split(".")
    numbered = [i for i, p in enumerate(parts) if any(c.isdigit() for c in p)]
    room = limit - len(ELLIPSIS)
    kept = _tail(parts, room)
    n = numbered[-1] if numbered else None
    if kept and (n is None or len(parts) - len(kept) <= n):
        return ELLIPSIS + ".".join(kept)
    if n is not None and n < len(parts) - 1:
        number = ".".join(parts[max(n - 1, 0) : n + 1]) + "."
        kept = _tail(parts[n + 1 :], room - len(number) - len(ELLIPSIS))
        if kept:
            skipped = len(parts) - len(kept) > n + 1
            return ELLIPSIS + number + (ELLIPSIS if skipped else "") + ".".join(kept)
    return _cut_middle(name, limit)


def _cut_middle(name: str, limit: int) -> str:
    """Characters of both ends around one ``…``: a little more of the end (the kind of
    tensor) than of the start."""
    room = limit - len(ELLIPSIS)
    front = room * 2 // 5
    return name[:front] + ELLIPSIS + name[len(name) - (room - front) :]


def option_labels(
    names: Sequence[str], tag: Callable[[str], str] | None = None, limit: int = OPTION_CHARS
) -> dict[str, str]:
    """Each of ``names`` -> its option: ``fit_name`` of it, followed by ``tag(name)`` (two
    spaces apart; a stored type such as ``Q4_K``, never cut) within ``limit`` characters in
    all; a tag too long to leave the name ``MIN_NAME_CHARS`` is left out. Where two names
    would read the same, they are cut in the middle by characters instead, and where that
    still clashes, they keep their whole names (the box cuts them, but the list tells them
    apart)."""

    def suffix_of(name: str) -> str:
        # a tag that would leave the name fewer than MIN_NAME_CHARS is left out (the box
        # cut "GPTQ int4 g128 act-order" and "NF4 + double quant" off after the name); the
        # caption under the box has the whole line
        suffix = f"  {tag(name)}" if tag is not None else ""
        return suffix if len(suffix) <= limit - MIN_NAME_CHARS else ""

    out: dict[str, str] = {}
    for name in names:
        suffix = suffix_of(name)
        room = max(limit - len(suffix), 8)
        out[name] = fit_name(name, room) + suffix
    for fallback in (_cut_middle, None):
        seen: dict[str, list[str]] = {}
        for name, label in out.items():
            seen.setdefault(label, []).append(name)
        clashes = [name for same in seen.values() if len(same) > 1 for name in same]
        for name in clashes:
            suffix = suffix_of(name)
            room = max(limit - len(suffix), 8)
            short = name if fallback is None or len(name) <= room else fallback(name, room)
            out[name] = short + suffix
    return out
