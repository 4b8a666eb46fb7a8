"""The mixed-precision page's URL state: the budget, the candidate schemes, the floor, the pins
and whether errors are weighed by input importance.

==============  ==============================================  ====================
key             value                                           meaning
==============  ==============================================  ====================
``mx.budget``   a number and a unit: ``4.5bpw``, ``350MB``,       ``Budget``
                ``1.2GB``
``mx.cands``    candidate names joined by ``,``                  the candidates
``mx.floor``    a candidate name or ``none``                     embeddings/head floor
``mx.pins``     the pins' text, ``PATTERN = scheme`` per line;   the pins
                absent: none (checked by ``parse_pins`` on the
                page, which names a bad line)
``mx.imp``      ``off``: errors not weighed by input             the importance toggle
                importance; absent or ``on``: weighed
==============  ==============================================  ====================

``mixed_from_query`` parses each key on its own: a bad value falls back to its default
with a sentence in ``problems``, the others are kept. Nothing is evaluated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from quant_core.mixed import (
    ALL_CANDIDATES,
    DEFAULT_CANDIDATES,
    Budget,
    BudgetUnit,
    Candidate,
    Pin,
)

__all__ = [
    "BPW_STEP",
    "BUDGET_KEY",
    "CANDIDATES_KEY",
    "DEFAULT_BUDGET",
    "DEFAULT_FLOOR",
    "FLOOR_KEY",
    "IMPORTANCE_KEY",
    "MAX_PINS",
    "MAX_PINS_TEXT",
    "PINS_KEY",
    "MixedQuery",
    "budget_step",
    "budget_text",
    "mixed_from_query",
    "mixed_to_query",
    "parse_budget",
    "parse_pins",
]

BUDGET_KEY = "mx.budget"
CANDIDATES_KEY = "mx.cands"
FLOOR_KEY = "mx.floor"
PINS_KEY = "mx.pins"
IMPORTANCE_KEY = "mx.imp"
MAX_PINS_TEXT = 4000
"""The longest pins text a link may carry (50 pins of some 80 characters)."""
DEFAULT_BUDGET = Budget(4.5, BudgetUnit.BITS_PER_WEIGHT)
DEFAULT_FLOOR: str | None = None
_BUDGET_RE = re.compile(r"([0-9]{1,9}(?:\.[0-9]{1,9})?)(bpw|MB|GB)")
_MAX_TEXT = 400


def parse_budget(text: str) -> Budget:
    """``"4.5bpw"`` → ``Budget(4.5, BITS_PER_WEIGHT)``; ``ValueError`` naming the text."""
    m = _BUDGET_RE.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError(
            f"{BUDGET_KEY}={str(text)[:40]!r} is not a number and a unit (4.5bpw, 350MB, 1.2GB)"
        )
    return Budget(float(m[1]), BudgetUnit(m[2]))


def budget_text(budget: Budget) -> str:
    """``Budget(4.5)`` -> ``"4.5bpw"``: the value's shortest decimal that reads back as the
    same float, without an exponent (``parse_budget`` reads it back). ``:g`` kept six
    significant digits: a link to 1234.5678 MB reopened 1234.57 MB."""
    text = np.format_float_positional(float(budget.value), trim="-")
    return f"{text}{budget.unit.value}"


BPW_STEP = 0.25
"""The budget box's step in bits per weight; in MB or GB the step is the size this many bits
per weight make (``budget_step``)."""
_BYTES_PER = {BudgetUnit.MEGABYTES: 1e6, BudgetUnit.GIGABYTES: 1e9}


def budget_step(unit: BudgetUnit, n_weights: int | None) -> float:
    """The budget box's +/- step in ``unit``: 0.25 bits per weight, and in MB or GB the
    size of 0.25 bits per weight of ``n_weights`` rounded down to 1, 2 or 5 times a power
    of ten: MiniLM's 22.7M weights step by 0.5 MB or 0.0005 GB, a 7B model's by 200 MB or
    0.2 GB. One step of 0.25 in every unit moved MiniLM's 0.0128 GB budget to 0.26 GB (20
    times the size) and a 7B model's 3,900 MB by 0.002 %. ``n_weights`` ``None`` (not known
    yet): 1 MB, 0.01 GB."""
    if not isinstance(unit, BudgetUnit):
        raise TypeError(f"unit must be a BudgetUnit, got {unit!r}")
    if unit is BudgetUnit.BITS_PER_WEIGHT:
        return BPW_STEP
    if n_weights is None or isinstance(n_weights, bool) or n_weights <= 0:
        return 1.0 if unit is BudgetUnit.MEGABYTES else 0.01
    size = BPW_STEP * n_weights / 8 / _BYTES_PER[unit]
    power = 10.0 ** math.floor(math.log10(size))
    mantissa = max(m for m in (1, 2, 5) if m * power <= size * (1 + 1e-12))
    # the decimal of the step itself ("0.0005", not 0.0005000000000000001)
    return float(f"{mantissa * power:.1g}")


@dataclass(frozen=True)
class MixedQuery:
    """What the URL held: ``budget``, ``candidates`` (names, in the known order),
    ``floor`` (a candidate name or ``None``), ``pins`` (the pins' text, unparsed: the page
    parses it against the chosen schemes), ``weigh`` (errors weighed by input importance;
    ``pins`` and ``weigh`` are ``None`` where the link does not say, so the page keeps what
    it has) and ``problems`` (one sentence per bad key)."""

    budget: Budget = DEFAULT_BUDGET
    candidates: tuple[str, ...] = tuple(c.name for c in DEFAULT_CANDIDATES)
    floor: str | None = DEFAULT_FLOOR
    pins: str | None = None
    weigh: bool | None = None
    problems: tuple[str, ...] = ()


def mixed_from_query(
    params: Mapping[str, str], known: Sequence[Candidate] = ALL_CANDIDATES
) -> MixedQuery:
    """Parse the page's keys of ``params`` (module docstring). Each problem names its key
    first, the reason in brackets: the page writes "Ignored the link's {problem}."."""
    names = [c.name for c in known]
    problems: list[str] = []
    budget = DEFAULT_BUDGET
    if BUDGET_KEY in params:
        try:
            budget = parse_budget(params[BUDGET_KEY])
        except ValueError as exc:
            problems.append(f"{BUDGET_KEY} ({exc}); using {budget_text(DEFAULT_BUDGET)}")
    cands = MixedQuery().candidates
    raw = params.get(CANDIDATES_KEY)
    if raw is not None:
        parts = [p for p in str(raw)[:_MAX_TEXT].split(",") if p]
        unknown = [p for p in parts if p not in names]
        chosen = tuple(n for n in names if n in parts)
        if unknown:
            shown = ", ".join(repr(u[:40]) for u in unknown[:3])
            noun = "scheme" if len(unknown) == 1 else "schemes"
            problems.append(f"{CANDIDATES_KEY} (unknown {noun} {shown}, left out)")
        if chosen:
            cands = chosen
        else:
            problems.append(f"{CANDIDATES_KEY} (it names no known scheme); using the defaults")
    floor = DEFAULT_FLOOR
    raw = params.get(FLOOR_KEY)
    if raw is not None and raw != "none":
        if raw in cands:
            floor = raw
        else:
            problems.append(
                f"{FLOOR_KEY} ({FLOOR_KEY}={str(raw)[:40]!r} is not a chosen scheme); no floor"
            )
    pins = None
    raw = params.get(PINS_KEY)
    if raw is not None:
        if len(str(raw)) > MAX_PINS_TEXT:
            problems.append(
                f"{PINS_KEY} ({len(str(raw)):,} characters; at most {MAX_PINS_TEXT:,}); no pins"
            )
        else:
            pins = str(raw)
    weigh = None
    raw = params.get(IMPORTANCE_KEY)
    if raw is not None:
        if raw in ("on", "off"):
            weigh = raw == "on"
        else:
            problems.append(
                f"{IMPORTANCE_KEY} ({IMPORTANCE_KEY}={str(raw)[:40]!r} is not on or off); weighed"
            )
    return MixedQuery(budget, cands, floor, pins, weigh, tuple(problems))


def mixed_to_query(
    budget: Budget,
    candidates: Sequence[str],
    floor: str | None,
    pins: str = "",
    weigh: bool = True,
) -> dict[str, str]:
    """The page's keys; ``mx.pins`` only when there are pins and ``mx.imp`` only when off,
    so a link of the defaults keeps its old form."""
    out = {
        BUDGET_KEY: budget_text(budget),
        CANDIDATES_KEY: ",".join(candidates),
        FLOOR_KEY: floor or "none",
    }
    if pins.strip():
        out[PINS_KEY] = pins
    if not weigh:
        out[IMPORTANCE_KEY] = "off"
    return out


MAX_PINS = 50


def parse_pins(text: str, schemes: Sequence[str]) -> tuple[Pin, ...]:
    """``PATTERN = scheme`` per line (blank lines and ``#`` comments skipped), the pattern a
    regular expression searched in tensor names, the scheme one of ``schemes``;
    ``ValueError`` naming the line for anything else."""
    if not isinstance(text, str):
        raise TypeError(f"pins must be text, got {type(text).__name__}")
    pins = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, scheme = line.rpartition("=")
        pattern, scheme = pattern.strip(), scheme.strip()
        if not sep or not pattern:
            raise ValueError(f"pin line {number}: write PATTERN = scheme, got {line[:60]!r}")
        if scheme not in schemes:
            raise ValueError(
                f"pin line {number}: {scheme[:40]!r} is not a chosen scheme ({', '.join(schemes)})"
            )
        try:
            pins.append(Pin(pattern, scheme))
        except ValueError as exc:
            raise ValueError(f"pin line {number}: {exc}") from None
        if len(pins) > MAX_PINS:
            raise ValueError(f"at most {MAX_PINS} pins")
    return tuple(pins)
