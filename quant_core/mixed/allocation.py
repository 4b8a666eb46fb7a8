"""One scheme per tensor for a size budget, minimising the total error.

The problem: tensors ``t`` with options ``s`` (the candidate schemes a tensor can take and
the rules allow), each of exact size ``b[t, s]`` bits and error ``e[t, s]`` (from the
table's ``weighted_error``, relative to the tensor's output by default: ``Objective``);
choose ``s_t`` to minimise ``Σ_t e[t, s_t]`` subject to ``Σ_t b[t, s_t] <= B``. Solved in two steps:

1. Lagrangian relaxation. For a multiplier ``λ >= 0`` each tensor independently takes
   ``argmin_s e[t, s] + λ b[t, s]``; only the lower convex hull of each tensor's
   ``(bits, error)`` points can win, and moving along a hull from the cheapest point, step
   ``k`` buys an error drop ``Δe_k`` for ``Δb_k`` bits at slope ``Δe_k / Δb_k``, slopes
   decreasing. Lowering ``λ`` takes every step whose slope exceeds it, so sorting all
   tensors' steps by slope and taking them in that order until the next does not fit
   gives the relaxation's solution at the largest budget ``B_λ <= B`` it reaches; it is
   optimal for ``B_λ`` (no assignment of at most ``B_λ`` bits has less error).
2. Exact fix-up. The bits left, ``B - B_λ``, are spent by single-tensor moves to any
   allowed option (hull or not) that fits in what is left, the largest error drop first,
   until none fits; then any uniform assignment (one scheme everywhere it is allowed,
   the relaxation's choice or the cheapest option elsewhere) that fits ``B`` and has
   less error replaces it, so
   the result is never worse than a uniform scheme of at most the budget's size.

Rules (``AllocationRules``): ``pins`` (regex → scheme, first match wins) leave a tensor one
option; ``floor`` keeps tensors whose name matches its pattern (embeddings and the output
head by default) at no fewer bits per element than its scheme. A tensor with no option
left (no candidate fits its shape) is kept as stored, at its stored size and no error.

Example: two tensors of 100 elements, options 4 bits (error 10 and 1) and 8 bits (error 0
for both), budget 1,200 bits: starting from 800 bits, the steps have slopes 10/400 and
1/400, so the first tensor gets 8 bits (1,200 bits, error 1).
"""

from __future__ import annotations

import enum
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..config import QuantConfig
from ..regex_risk import regex_risk
from .candidates import Candidate, config_for
from .sensitivity import SensitivityRow

__all__ = [
    "DEFAULT_FLOOR_PATTERN",
    "STORED",
    "Allocation",
    "AllocationProblem",
    "AllocationRules",
    "Budget",
    "BudgetOutOfRange",
    "BudgetUnit",
    "CurvePoint",
    "Floor",
    "Objective",
    "Pin",
    "allocate",
    "allocation_curve",
    "build_problem",
    "configs_of",
    "uniform_allocation",
    "uniform_points",
]

STORED = "stored"
"""The choice of a tensor no candidate can take: kept as stored."""

DEFAULT_FLOOR_PATTERN = r"(^|\.)(embed[^.]*|token_embd|wte|wpe|lm_head|output)(\.|$)"
"""Embedding tables (``embed_tokens``, ``word_embeddings``, GPT-2's ``wte``/``wpe``, GGUF's
``token_embd``) and the output head (``lm_head``, GGUF's ``output``)."""


class Objective(enum.Enum):
    """What the allocation minimises, summed over tensors (each row's ``e[t, s]``).

    RELATIVE (the default): ``weighted_error / energy``, each tensor's output noise over
    its output signal (``1 / weighted SQNR``): a residual network carries every layer's
    output at its own scale, so a layer's error counts relative to what it outputs. On the
    bundled MiniLM at 4.5 and 5.5 bits per weight this mix gave sentence embeddings closer
    to fp32 (mean cosine 0.976 and 0.992) than every uniform scheme of at most that size
    (0.966 for fp4 g32 at 4.5), where ABSOLUTE gave 0.955 and 0.968.
    ABSOLUTE: ``weighted_error`` itself, ``E|D x|²`` summed (the importance module).
    """

    RELATIVE = "relative"
    ABSOLUTE = "absolute"

    def error(self, row: SensitivityRow) -> float:
        if self is Objective.ABSOLUTE or not row.energy > 0:
            return row.weighted_error
        return row.weighted_error / row.energy


class BudgetUnit(enum.Enum):
    """BITS_PER_WEIGHT: ``B = value * Σ n_t`` over the table's tensors. MEGABYTES /
    GIGABYTES: ``B = 8 * value * 1e6`` (``1e9``) bits for those tensors."""

    BITS_PER_WEIGHT = "bpw"
    MEGABYTES = "MB"
    GIGABYTES = "GB"


@dataclass(frozen=True)
class Budget:
    """A size target: ``value`` in ``unit`` (``4.5 bpw``, ``350 MB``)."""

    value: float
    unit: BudgetUnit = BudgetUnit.BITS_PER_WEIGHT

    def __post_init__(self) -> None:
        if not isinstance(self.unit, BudgetUnit):
            raise TypeError(f"budget unit must be a BudgetUnit, got {self.unit!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, int | float):
            raise TypeError(f"budget value must be a number, got {self.value!r}")
        if not math.isfinite(self.value) or self.value <= 0:
            raise ValueError(f"budget must be a positive finite number, got {self.value!r}")

    def total_bits(self, n_elements: int) -> int:
        """The budget in bits for tensors of ``n_elements`` weights in all (floor), from
        the value as written (its shortest decimal, ``repr``): in floats ``1.001 * 1000``
        is ``1000.9999999999999``, and a budget typed at exactly a reachable size lost a
        bit and was refused or given a smaller mix."""
        value = Fraction(repr(float(self.value)))
        if self.unit is BudgetUnit.BITS_PER_WEIGHT:
            return math.floor(value * n_elements)
        scale = 10**6 if self.unit is BudgetUnit.MEGABYTES else 10**9
        return math.floor(value * scale * 8)

    def describe(self) -> str:
        """``"4.5 bpw"``: the value's shortest round-tripping decimal (``:g`` wrote 1234.5678
        MB as "1234.57 MB"), no exponent."""
        return f"{np.format_float_positional(float(self.value), trim='-')} {self.unit.value}"


class BudgetOutOfRange(ValueError):
    """A budget no assignment reaches; ``low_bits``/``high_bits``: the smallest and the
    largest total the options give (with the rules), in bits."""

    def __init__(self, message: str, low_bits: int, high_bits: int) -> None:
        super().__init__(message)
        self.low_bits = low_bits
        self.high_bits = high_bits


@dataclass(frozen=True)
class Pin:
    """Tensors whose name matches ``pattern`` (``re.search``) get ``scheme``."""

    pattern: str
    scheme: str

    def __post_init__(self) -> None:
        _compile(self.pattern)
        if not isinstance(self.scheme, str) or not self.scheme:
            raise ValueError(f"pin {self.pattern!r}: the scheme must be named, got {self.scheme!r}")


@dataclass(frozen=True)
class Floor:
    """Tensors whose name matches ``pattern`` keep at least ``scheme``'s bits per element."""

    scheme: str
    pattern: str = DEFAULT_FLOOR_PATTERN

    def __post_init__(self) -> None:
        _compile(self.pattern)


@dataclass(frozen=True)
class AllocationRules:
    floor: Floor | None = None
    pins: tuple[Pin, ...] = ()

    def __post_init__(self) -> None:
        if self.floor is not None and not isinstance(self.floor, Floor):
            raise TypeError(f"floor must be a Floor or None, got {self.floor!r}")
        if not all(isinstance(p, Pin) for p in self.pins):
            raise TypeError(f"pins must be Pin values, got {self.pins!r}")


def _tensors(n: int) -> str:
    """``"1 tensor"``, ``"2 tensors"``: not "1 tensor(s)"."""
    return f"{n:,} {'tensor' if n == 1 else 'tensors'}"


def _compile(pattern: object) -> re.Pattern[str]:
    """``pattern`` compiled; ``ValueError`` for a bad one, or one that may backtrack for
    minutes on a tensor name (``(.*)*x``, ``(\\w+\\.?)+!``: Python's ``re`` tries every way
    to split a name that does not match, 2^40 for a 40-character name) and hold the server:
    a pin can come from a link."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"a tensor name pattern must be a non-empty str, got {pattern!r}")
    if len(pattern) > 200:
        raise ValueError(f"pattern {pattern[:40]!r}… is longer than 200 characters")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    why = regex_risk(pattern, 200)
    if why is not None:
        raise ValueError(
            f"pattern {pattern!r} could take minutes on a name it does not match ({why}): "
            "write it more simply"
        )
    return compiled


@dataclass(frozen=True, eq=False)
class AllocationProblem:
    """The table as arrays, rules applied: ``tensors`` ``[T]``, ``schemes`` ``[S]``,
    ``bits`` int64 ``[T, S]``, ``errors`` float64 ``[T, S]``, ``allowed`` bool ``[T, S]``,
    ``n_elements`` int64 ``[T]``; ``kept``: tensors with no option, kept as stored (their
    stored bits and elements in ``kept_each_*``); ``notes``: what the rules did, one
    sentence each. The hull steps (``step_*``, slope order) are what ``allocate`` walks."""

    tensors: tuple[str, ...]
    schemes: tuple[str, ...]
    bits: np.ndarray
    errors: np.ndarray
    allowed: np.ndarray
    n_elements: np.ndarray
    kept: tuple[str, ...]
    kept_each_bits: tuple[int, ...]
    kept_each_elements: tuple[int, ...]
    notes: tuple[str, ...]
    start: np.ndarray = field(repr=False)
    step_tensor: np.ndarray = field(repr=False)
    step_to: np.ndarray = field(repr=False)
    step_bits: np.ndarray = field(repr=False)
    step_slope: np.ndarray = field(repr=False)

    @property
    def kept_bits(self) -> int:
        return sum(self.kept_each_bits)

    @property
    def kept_elements(self) -> int:
        return sum(self.kept_each_elements)

    @property
    def total_elements(self) -> int:
        return int(self.n_elements.sum()) + self.kept_elements

    @property
    def low_bits(self) -> int:
        """The smallest total: every tensor at its cheapest allowed option."""
        return int(self.bits[np.arange(len(self.tensors)), self.start].sum()) + self.kept_bits

    @property
    def high_bits(self) -> int:
        """The largest total: every tensor at its largest allowed option."""
        if not self.tensors:
            return self.kept_bits
        big = np.where(self.allowed, self.bits, -1).max(axis=1)
        return int(big.sum()) + self.kept_bits


def build_problem(
    rows: Sequence[SensitivityRow],
    rules: AllocationRules | None = None,
    objective: Objective = Objective.RELATIVE,
) -> AllocationProblem:
    """The allocation problem of a finished table (every tensor with a row per scheme, in
    the same scheme order), minimising ``objective``. ``ValueError`` for a table with
    duplicate or missing cells, a rule naming a scheme not in the table, or a pin whose
    scheme cannot take a tensor it matches."""
    rules = rules or AllocationRules()
    if not isinstance(objective, Objective):
        raise TypeError(f"objective must be an Objective, got {objective!r}")
    if not isinstance(rules, AllocationRules):
        raise TypeError(f"rules must be AllocationRules, got {type(rules).__name__}")
    t_index: dict[str, int] = {}
    s_index: dict[str, int] = {}
    cells: dict[tuple[int, int], SensitivityRow] = {}
    for row in rows:
        if not isinstance(row, SensitivityRow):
            raise TypeError(f"rows must be SensitivityRow values, got {type(row).__name__}")
        t = t_index.setdefault(row.tensor, len(t_index))
        key = (t, s_index.setdefault(row.scheme, len(s_index)))
        if key in cells:
            raise ValueError(f"the table holds {row.tensor!r} under {row.scheme!r} twice")
        cells[key] = row
    tensors, schemes = list(t_index), list(s_index)
    n_t, n_s = len(tensors), len(schemes)
    if len(cells) != n_t * n_s:
        t, s = next((t, s) for t in range(n_t) for s in range(n_s) if (t, s) not in cells)
        raise ValueError(
            f"the table has no row for {tensors[t]!r} under {schemes[s]!r} "
            f"({n_t * n_s - len(cells)} missing)"
        )
    for name in [rules.floor.scheme] if rules.floor else []:
        if name not in s_index:
            raise ValueError(f"the floor scheme {name!r} is not a candidate ({', '.join(schemes)})")
    for pin in rules.pins:
        if pin.scheme not in s_index:
            raise ValueError(
                f"pin {pin.pattern!r} names {pin.scheme!r}, not a candidate ({', '.join(schemes)})"
            )
    ordered = [cells[t, s] for t in range(n_t) for s in range(n_s)]
    ok = np.array([r.ok and math.isfinite(r.weighted_error) for r in ordered], dtype=bool)
    allowed = ok.reshape(n_t, n_s)
    bits = np.array([r.total_bits for r in ordered], dtype=np.int64).reshape(n_t, n_s)
    errors = np.array([objective.error(r) for r in ordered], dtype=np.float64).reshape(n_t, n_s)
    errors[~allowed] = np.inf
    bits[~allowed] = 0
    bpe = np.array([r.bits_per_element for r in ordered], dtype=np.float64).reshape(n_t, n_s)
    first = ordered[::n_s] if n_s else []
    n_el = np.array([r.n_elements for r in first], dtype=np.int64)
    stored = np.array([r.stored_bits for r in first], dtype=np.int64)
    notes: list[str] = []
    pins = [(_compile(p.pattern), p) for p in rules.pins]
    pinned = np.zeros(n_t, dtype=bool)
    for i, t in enumerate(tensors):
        for regex, pin in pins:
            if regex.search(t):
                j = s_index[pin.scheme]
                if not allowed[i, j]:
                    raise ValueError(
                        f"pin {pin.pattern!r} gives {t!r} {pin.scheme!r}, which cannot take it: "
                        f"{cells[i, j].skipped or 'no error measured'}"
                    )
                allowed[i] = False
                allowed[i, j] = True
                pinned[i] = True
                break
    if pinned.any():
        notes.append(f"{_tensors(int(pinned.sum()))} pinned by a pattern")
    if rules.floor is not None:
        regex, j = _compile(rules.floor.pattern), s_index[rules.floor.scheme]
        floored = 0
        for i, t in enumerate(tensors):
            if pinned[i] or not regex.search(t):
                continue
            if not allowed[i, j]:
                notes.append(
                    f"{t}: the floor {rules.floor.scheme} cannot take it; no floor applied"
                )
                continue
            allowed[i] &= ~(bpe[i] < bpe[i, j])
            floored += 1
        if floored:
            notes.append(f"{_tensors(floored)} kept at {rules.floor.scheme} or more")
    has_option = allowed.any(axis=1)
    kept = tuple(t for i, t in enumerate(tensors) if not has_option[i])
    keep = np.flatnonzero(has_option)
    if kept:
        # it is in the model as stored, so in the budget, the size and the bits per weight
        # at its stored size (32 bits per weight for a float32 file): say so, or a budget
        # of 4.5 bits per weight refused as "reachable are 18.07 to 20.25" read as a fault
        k_bits, k_elements = int(stored[~has_option].sum()), int(n_el[~has_option].sum())
        notes.append(
            f"{_kept_sentence(len(kept), k_bits, k_elements)}, counted in the budget and the size"
        )
    bits, errors, allowed = bits[keep], errors[keep], allowed[keep]
    problem_tensors = tuple(tensors[i] for i in keep)
    start, st_t, st_to, st_b, st_sl = _hull_steps(bits, errors, allowed)
    return AllocationProblem(
        tensors=problem_tensors,
        schemes=tuple(schemes),
        bits=bits,
        errors=errors,
        allowed=allowed,
        n_elements=n_el[keep],
        kept=kept,
        kept_each_bits=tuple(int(b) for b in stored[~has_option]),
        kept_each_elements=tuple(int(n) for n in n_el[~has_option]),
        notes=tuple(notes),
        start=start,
        step_tensor=st_t,
        step_to=st_to,
        step_bits=st_b,
        step_slope=st_sl,
    )


def _hull_steps(
    bits: np.ndarray, errors: np.ndarray, allowed: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each tensor's cheapest option (least error among the cheapest) and the steps along
    its lower convex hull, all tensors' steps sorted by slope, largest first (stable)."""
    n_t = bits.shape[0]
    start = np.zeros(n_t, dtype=np.int64)
    st_t: list[int] = []
    st_to: list[int] = []
    st_b: list[int] = []
    st_sl: list[float] = []
    bits_l, err_l, ok_l = bits.tolist(), errors.tolist(), allowed.tolist()
    for i in range(n_t):
        b_i, e_i = bits_l[i], err_l[i]
        order = sorted((b_i[j], e_i[j], j) for j in range(len(b_i)) if ok_l[i][j])
        hull: list[tuple[int, float, int]] = []
        for b, e, j in order:
            if hull and (b == hull[-1][0] or e >= hull[-1][1]):
                continue  # same size and no better, or more bits for no less error
            while len(hull) >= 2:
                (bp, ep, _), (bq, eq, _) = hull[-2], hull[-1]
                # q on or above the chord p -> j never wins for any λ
                if (ep - eq) * (b - bp) <= (ep - e) * (bq - bp):
                    hull.pop()
                else:
                    break
            hull.append((b, e, j))
        start[i] = hull[0][2]
        for (bp, ep, _), (bq, eq, q) in itertools.pairwise(hull):
            st_t.append(i)
            st_to.append(q)
            st_b.append(bq - bp)
            st_sl.append((ep - eq) / (bq - bp))
    slope = np.asarray(st_sl, dtype=np.float64)
    order = np.argsort(-slope, kind="stable")
    return (
        start,
        np.asarray(st_t, dtype=np.int64)[order],
        np.asarray(st_to, dtype=np.int64)[order],
        np.asarray(st_b, dtype=np.int64)[order],
        slope[order],
    )


@dataclass(frozen=True)
class Allocation:
    """One scheme per tensor: ``choice[t]`` (a scheme name, or ``STORED``) for ``tensors``
    (the problem's, then the kept ones), their ``bits`` and ``errors``; ``budget_bits``;
    ``lagrange``: the multiplier ``λ`` at which the relaxation stopped (error per bit;
    0 when every tensor reached its least error); ``fixup_moves``: moves the fix-up made;
    ``uniform``: the uniform scheme that replaced the result (``None`` when none did)."""

    tensors: tuple[str, ...]
    choice: tuple[str, ...]
    bits: tuple[int, ...]
    errors: tuple[float, ...]
    n_elements: tuple[int, ...]
    budget_bits: int
    lagrange: float
    fixup_moves: int
    uniform: str | None = None

    @property
    def total_bits(self) -> int:
        return sum(self.bits)

    @property
    def total_error(self) -> float:
        return float(sum(self.errors))

    @property
    def bits_per_weight(self) -> float:
        return self.total_bits / max(sum(self.n_elements), 1)

    @property
    def total_bytes(self) -> int:
        """``Σ ceil(bits_t / 8)``: each tensor stored in whole bytes."""
        return sum(-(-b // 8) for b in self.bits)

    def recipe(self) -> dict[str, str]:
        """Tensor name → scheme name, in table order."""
        return dict(zip(self.tensors, self.choice, strict=True))

    def mix(self) -> dict[str, int]:
        """Bytes per scheme (``Σ ceil(bits_t / 8)`` of the tensors that got it), largest
        first."""
        out: dict[str, int] = {}
        for c, b in zip(self.choice, self.bits, strict=True):
            out[c] = out.get(c, 0) + -(-b // 8)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _budget_bits(problem: AllocationProblem, budget: Budget | int) -> int:
    if isinstance(budget, Budget):
        return budget.total_bits(problem.total_elements)
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer):
        raise TypeError(f"budget must be a Budget or a number of bits, got {budget!r}")
    return int(budget)


@dataclass(frozen=True)
class _Reachable:
    """The ends of a reachable range written as decimals a user can type back."""

    low: str
    high: str

    def text(self) -> str:
        return f"{self.low} to {self.high}"


def _reachable(low: int, high: int, per: int, decimals: int) -> _Reachable:
    """``low / per`` rounded up and ``high / per`` rounded down, as decimals a user can type
    back as a ``Budget`` (``total_bits`` floors the decimal): ``decimals`` places, more when
    the two would cross (a range narrower than the last place) or the low end shows as 0.
    Rounded to the nearest, 4.28125 bits per weight read "4.281" and that budget was
    refused as below the cheapest."""
    lo, hi = Fraction(low, per), Fraction(high, per)
    for places in range(decimals, 13):
        unit = Fraction(1, 10**places)
        up, down = math.ceil(lo / unit) * unit, math.floor(hi / unit) * unit
        # two equal ends only for a range of one size: "0.02 to 0.02 MB" read as one value.
        # One size (lo == hi): the first decimal that ``total_bits`` floors back to it;
        # waiting for ``up == down`` ran to 12 places, a hair above the size.
        one = lo == hi and math.floor(up * per) == low
        if (up < down or one) and (up > 0 or lo == 0):
            break
    return _Reachable(f"{float(up):.{places}f}", f"{float(down):.{places}f}")


def _megabytes(bits: int) -> str:
    """``bits`` in MB: two places, three significant digits below 1 MB (a small table's
    4.5 bits per weight read "0.00 MB")."""
    mb = bits / 8e6
    if mb >= 1 or mb == 0:
        return f"{mb:.2f}"  # as the range beside it: a number the budget box takes
    return np.format_float_positional(mb, precision=3, fractional=False, trim="-")


def _kept_sentence(n: int, bits: int, elements: int) -> str:
    """What ``n`` tensors kept as stored take, ``bits`` and ``elements`` in all: "1 tensor no
    candidate can take, kept as stored: 32 bits per weight, 16,384 bytes" (bits per weight
    ``bits / elements``, bytes ``ceil(bits / 8)``); the problem's note and the budget's
    refusal both say it so."""
    return (
        f"{_tensors(n)} no candidate can take, kept as stored: "
        f"{bits / max(elements, 1):.4g} bits per weight, {-(-bits // 8):,} bytes"
    )


def allocate(problem: AllocationProblem, budget: Budget | int) -> Allocation:
    """The allocation of ``problem`` under ``budget`` (a ``Budget`` or total bits; module
    docstring). ``BudgetOutOfRange`` naming what is reachable, in bits per weight and MB,
    for a budget below the cheapest assignment or above the largest."""
    if not isinstance(problem, AllocationProblem):
        raise TypeError(f"problem must be an AllocationProblem, got {type(problem).__name__}")
    total_bits = _budget_bits(problem, budget)
    low, high = problem.low_bits, problem.high_bits
    if not low <= total_bits <= high:
        n = max(problem.total_elements, 1)
        where = "below the cheapest" if total_bits < low else "above the largest"
        asked = budget.describe() if isinstance(budget, Budget) else f"{total_bits} bits"
        bpw = _reachable(low, high, n, 3)
        mb = _reachable(low, high, 8 * 10**6, 2)
        kept = _kept_sentence(len(problem.kept), problem.kept_bits, problem.kept_elements)
        raise BudgetOutOfRange(
            f"The budget {asked} ({total_bits / n:.3f} bits per weight, "
            f"{_megabytes(total_bits)} MB) is {where} assignment the candidates give: "
            + (
                f"reachable are {bpw.text()} bits per weight ({mb.text()} MB)"
                if low < high  # one size: "4.500 to 4.500 bits per weight" read as a typo
                else f"the only size they reach is {bpw.low} bits per weight ({mb.low} MB)"
            )
            + (f"; {kept}, counted in that" if problem.kept else "")
            + ".",
            low,
            high,
        )
    n_t = len(problem.tensors)
    rows = np.arange(n_t)
    cur = problem.start.copy()
    left = total_bits - problem.low_bits
    lagrange = 0.0
    # 1. the relaxation: steps in slope order while they fit
    cum = np.cumsum(problem.step_bits)
    taken = int(np.searchsorted(cum, left, side="right"))
    if taken < len(cum):
        lagrange = float(problem.step_slope[taken])
    # the last step taken per tensor is its hull point (steps of a tensor come in order)
    cur[problem.step_tensor[:taken]] = problem.step_to[:taken]
    left -= int(cum[taken - 1]) if taken else 0
    bits, errors, allowed = problem.bits, problem.errors, problem.allowed
    # 2. fix-up: single moves that fit in what is left, the largest error drop first
    moves = 0
    while left > 0 and n_t:
        extra = bits - bits[rows, cur][:, None]
        gain = errors[rows, cur][:, None] - errors
        ok = allowed & (extra <= left) & (gain > 0)
        if not ok.any():
            break
        flat = int(np.argmax(np.where(ok, gain, -np.inf)))
        t, s = divmod(flat, bits.shape[1])
        left -= int(extra[t, s])
        cur[t] = s
        moves += 1
    best_err = float(errors[rows, cur].sum()) if n_t else 0.0
    uniform, best = None, cur
    budget_left = total_bits - problem.kept_bits
    for s in range(bits.shape[1]):
        # where the scheme is not allowed: the allocation's own choice, or (as
        # uniform_allocation does) the cheapest option, which fits budgets the first misses
        for rest in (cur, problem.start):
            trial = np.where(allowed[:, s], s, rest)
            if int(bits[rows, trial].sum()) <= budget_left:
                err = float(errors[rows, trial].sum())
                if err < best_err:
                    best_err, uniform, best = err, problem.schemes[s], trial
    if uniform is not None:
        cur = best
    names = problem.tensors + problem.kept
    choice = tuple(problem.schemes[s] for s in cur) + (STORED,) * len(problem.kept)
    return Allocation(
        tensors=names,
        choice=choice,
        bits=tuple(int(b) for b in bits[rows, cur]) + problem.kept_each_bits,
        errors=tuple(float(e) for e in errors[rows, cur]) + (0.0,) * len(problem.kept),
        n_elements=tuple(int(n) for n in problem.n_elements) + problem.kept_each_elements,
        budget_bits=total_bits,
        lagrange=lagrange,
        fixup_moves=moves,
        uniform=uniform,
    )


@dataclass(frozen=True)
class CurvePoint:
    """An allocation's total ``bits`` and ``error``, or a uniform scheme's (``label``)."""

    label: str
    bits: int
    error: float
    bits_per_weight: float


def allocation_curve(problem: AllocationProblem, points: int = 24) -> tuple[CurvePoint, ...]:
    """Allocations at ``points`` budgets spread evenly from the cheapest to the largest
    total: the error-vs-size curve of the allocation."""
    if isinstance(points, bool) or not isinstance(points, int) or points < 2:
        raise ValueError(f"points must be an int >= 2, got {points!r}")
    n = max(problem.total_elements, 1)
    out = []
    for b in np.linspace(problem.low_bits, problem.high_bits, points):
        a = allocate(problem, int(b))
        out.append(CurvePoint("mixed", a.total_bits, a.total_error, a.total_bits / n))
    return tuple(out)


def uniform_allocation(problem: AllocationProblem, scheme: str) -> Allocation:
    """``scheme`` on every tensor the rules allow it, elsewhere the tensor's cheapest allowed
    option (kept tensors as stored): the uniform baseline an allocation is judged against.
    ``ValueError`` for a scheme not in the problem."""
    if scheme not in problem.schemes:
        raise ValueError(f"{scheme!r} is not a candidate ({', '.join(problem.schemes)})")
    s = problem.schemes.index(scheme)
    rows = np.arange(len(problem.tensors))
    pick = np.where(problem.allowed[:, s], s, problem.start)
    bits = tuple(int(b) for b in problem.bits[rows, pick]) + problem.kept_each_bits
    return Allocation(
        tensors=problem.tensors + problem.kept,
        choice=tuple(problem.schemes[j] for j in pick) + (STORED,) * len(problem.kept),
        bits=bits,
        errors=tuple(float(e) for e in problem.errors[rows, pick]) + (0.0,) * len(problem.kept),
        n_elements=tuple(int(n) for n in problem.n_elements) + problem.kept_each_elements,
        budget_bits=sum(bits),
        lagrange=0.0,
        fixup_moves=0,
        uniform=scheme,
    )


def uniform_points(problem: AllocationProblem) -> tuple[CurvePoint, ...]:
    """``uniform_allocation`` of each scheme: its total bits and error, scheme order."""
    n = max(problem.total_elements, 1)
    out = []
    for name in problem.schemes:
        a = uniform_allocation(problem, name)
        out.append(CurvePoint(name, a.total_bits, a.total_error, a.total_bits / n))
    return tuple(out)


def configs_of(
    allocation: Allocation, candidates: Sequence[Candidate], shapes: dict[str, tuple[int, ...]]
) -> dict[str, QuantConfig]:
    """Tensor name -> the config its weights are stored in under ``allocation`` (the
    candidate's, or llama-quantize's fallback for the tensor's shape: ``config_for``);
    tensors kept as stored are left out. ``shapes``: by tensor name."""
    by_name = {c.name: c for c in candidates}
    out = {}
    for tensor, scheme in allocation.recipe().items():
        if scheme != STORED:
            out[tensor] = config_for(by_name[scheme], shapes[tensor])
    return out
