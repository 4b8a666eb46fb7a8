"""What a link asked for that the page changed, said one value at a time: the scheme
pickers warn with these lines (issue 13: a link's silent fixes)."""

from __future__ import annotations

from quant_core import PerChannel, PerGroup, QuantConfig

from .scheme import QUERY_KEYS, config_to_query

__all__ = ["link_fixes"]

_UNWRITTEN = {"sfmt": "float", "recipe": "lab"}


def link_fixes(
    wanted: QuantConfig, got: QuantConfig, cols: int, key_prefix: str = ""
) -> tuple[str, ...]:
    """One warning per value a link asked for (``wanted``) that the page changed (``got``,
    the scheme the picker drew for a matrix of ``cols`` columns); empty when they agree.

    E.g. ``group=100`` on 256 columns becomes 128: "group=100 does not fit 256 columns;
    using 128". The query key and both values are named; a field without a specific
    message is reported by its query key and both query values. ``key_prefix``: the page's
    prefix of those keys in the link (``"m."``, ``"a."``), so that each line names the key
    the link holds (``m.group=-1``).
    """
    if not isinstance(wanted, QuantConfig) or not isinstance(got, QuantConfig):
        raise TypeError("wanted and got must be QuantConfig")
    if wanted == got:
        return ()
    fixes: list[str] = []
    handled: set[str] = set()
    wg, gg = wanted.granularity, got.granularity
    if isinstance(wg, PerGroup) and isinstance(gg, PerGroup) and wg != gg:
        group = f"{key_prefix}group={wg.group_size}"
        fixes.append(f"{group} does not fit {cols} columns; using {gg.group_size}")
        handled.add("group")
    elif isinstance(wg, PerChannel) and isinstance(gg, PerChannel) and wg != gg:
        # the picker offers axes 0 and 1: -2/-1 name the same axes, others do not exist
        same = wg.axis in (-2, -1) and wg.axis % 2 == gg.axis
        what = f"is axis {gg.axis}" if same else "is not an axis"
        fixes.append(f"{key_prefix}axis={wg.axis} {what} of a 2-D matrix; using {gg.axis}")
        handled.add("axis")
    a, b = config_to_query(wanted), config_to_query(got)
    for key in QUERY_KEYS:
        if key in handled or a.get(key) == b.get(key):
            continue
        # config_to_query leaves these out at their defaults; the others, where the
        # scheme has no such part (a group size when per-tensor)
        before, after = a.get(key, _UNWRITTEN.get(key)), b.get(key, _UNWRITTEN.get(key))
        if after is None:  # the drawn scheme has no such part (a group size when per-tensor)
            fixes.append(f"{key_prefix}{key}={before} does not apply here; left out")
        elif before is None:
            fixes.append(f"{key_prefix}{key} (not in the link) is {after} here")
        else:
            fixes.append(f"{key_prefix}{key}={before} is not available here; using {after}")
    return tuple(fixes)
