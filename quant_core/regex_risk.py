"""Whether a user's regular expression could make Python's ``re`` backtrack for minutes: one
rule for every pattern a user or a file gives (compressed-tensors' ``re:`` targets, the
Mixed precision page's pins, which can come from a link).

``re`` has no time limit, and ``(.*)*X`` already takes seconds on a 24-character name. The
rule reads the pattern's parse tree from ``re._parser``, the parser ``re.compile`` itself
uses (``sre_parse`` before Python 3.11): a private module, used because no public API
exposes the tree; the tests pin each refusal, so a change in it shows.
"""

from __future__ import annotations

import re
import re._constants as sre_constants  # the parsed regex's node kinds (Python >= 3.11)
import re._parser as sre_parser

__all__ = ["regex_risk"]

_MAX_UNBOUNDED_REPEATS = 3  # ``.*`` runs in one pattern: O(len(name)^3) at worst
_UNBOUNDED = 64  # a repeat allowing more than this many is treated as unbounded


def regex_risk(pattern: str, max_chars: int) -> str | None:
    """Why matching ``pattern`` against names (a file's module names, a model's tensor
    names) could take exponential or long polynomial time, or ``None``. Refused: a pattern
    over ``max_chars``; a repeat holding another repeat or an alternation (star height
    above one, the exponential cases); more than three unbounded repeats in all (names of
    at most 256 characters, ``hf_config.MAX_MATCHED_NAME``: ``O(256^3)`` steps at worst);
    backreferences. A pattern that does not compile is not refused here (the caller
    compiles it and says so)."""
    if len(pattern) > max_chars:
        return f"{len(pattern):,} characters, over the {max_chars:,} allowed"
    try:
        tree = sre_parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    repeats = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT)
    unbounded = 0

    def parts(value: object) -> list[sre_parser.SubPattern]:
        if isinstance(value, sre_parser.SubPattern):
            return [value]
        if isinstance(value, list | tuple):
            return [p for v in value for p in parts(v)]
        return []

    def walk(sub: sre_parser.SubPattern, inside: bool) -> str | None:
        nonlocal unbounded
        for op, value in sub:
            if op in (sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS):
                return "it uses a backreference"
            if op in repeats:
                _, high, body = value
                if inside and high > 1:
                    return "it nests repeats"
                if high > _UNBOUNDED:
                    unbounded += 1
                    if unbounded > _MAX_UNBOUNDED_REPEATS:
                        return f"more than {_MAX_UNBOUNDED_REPEATS} unbounded repeats"
                why = walk(body, inside or high > 1)
            elif op is sre_constants.BRANCH and inside:
                return "it repeats an alternation"
            else:
                why = next((w for p in parts(value) if (w := walk(p, inside))), None)
            if why is not None:
                return why
        return None

    try:
        return walk(tree, False)
    except RecursionError:
        return "it nests too deeply"
