"""quant_core.mixed.allocation: one scheme per tensor for a budget.

References: the docstring's hand-worked example, exhaustive search over every assignment of
small problems, and the relaxation's own guarantee (Hypothesis): the result fits the
budget and has no more error than any Lagrangian solution ``argmin_s e + λ b`` (for any
``λ``) or any uniform scheme that fits it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quant_core.mixed import (
    STORED,
    AllocationRules,
    Budget,
    BudgetOutOfRange,
    BudgetUnit,
    Floor,
    Objective,
    Pin,
    SensitivityRow,
    allocate,
    allocation_curve,
    build_problem,
    uniform_allocation,
    uniform_points,
)

NAN = float("nan")


def row(tensor: str, scheme: str, n: int, bits: int, err: float, ok: bool = True,
        energy: float = 1.0) -> SensitivityRow:  # fmt: skip
    return SensitivityRow(
        tensor=tensor,
        scheme=scheme,
        shape=(1, n),
        stored_bits=16 * n,
        total_bits=bits if ok else 0,
        bits_per_element=bits / n if ok else NAN,
        mse=0.0,
        sqnr_db=0.0,
        weighted_error=err if ok else NAN,
        energy=energy,
        weighted=False,
        output_mse=None,
        skipped=None if ok else "does not fit",
        seconds=0.0,
    )


def docstring_example() -> list[SensitivityRow]:
    return [
        row("a", "4", 100, 400, 10.0),
        row("a", "8", 100, 800, 0.0),
        row("b", "4", 100, 400, 1.0),
        row("b", "8", 100, 800, 0.0),
    ]


def test_the_docstring_example() -> None:
    problem = build_problem(docstring_example(), objective=Objective.ABSOLUTE)
    alloc = allocate(problem, 1200)
    assert alloc.recipe() == {"a": "8", "b": "4"}
    assert alloc.total_bits == 1200 and alloc.total_error == 1.0
    # 4 + 4 bits at 100 elements each is 800 bits; 1200 bits is 6 bits per weight
    assert allocate(problem, Budget(6.0)).recipe() == {"a": "8", "b": "4"}
    assert allocate(problem, Budget(4.0)).recipe() == {"a": "4", "b": "4"}
    assert allocate(problem, Budget(8.0)).recipe() == {"a": "8", "b": "8"}


def test_a_uniform_scheme_with_the_cheapest_option_elsewhere_wins_when_it_fits() -> None:
    # Hypothesis' counterexample, by hand: the relaxation buys t0's 6-bit step (slope 1/6)
    # and then t2's 12-bit step no longer fits (error 2); s3 on t2 with the cheapest option
    # elsewhere is 1 + 1 + 13 = 15 bits at error 1, as uniform_allocation counts it.
    rows = [
        row("t0", "s0", 1, 7, 0.0),
        row("t0", "s2", 1, 1, 1.0),
        row("t0", "s3", 1, 0, NAN, ok=False),
        row("t1", "s0", 1, 1, 0.0),
        row("t1", "s2", 1, 0, NAN, ok=False),
        row("t1", "s3", 1, 0, NAN, ok=False),
        row("t2", "s0", 1, 1, 2.0),
        row("t2", "s2", 1, 0, NAN, ok=False),
        row("t2", "s3", 1, 13, 0.0),
    ]
    problem = build_problem(rows, objective=Objective.ABSOLUTE)
    alloc = allocate(problem, 15)
    assert uniform_allocation(problem, "s3").total_error == 1.0
    assert alloc.total_bits <= 15 and alloc.total_error == 1.0
    assert alloc.uniform == "s3"


def test_budget_units() -> None:
    assert Budget(4.5).total_bits(1000) == 4500
    assert Budget(350, BudgetUnit.MEGABYTES).total_bits(1) == 350 * 8_000_000
    assert Budget(1.5, BudgetUnit.GIGABYTES).total_bits(1) == 12_000_000_000
    for bad in (0, -1, math.inf, math.nan):
        with pytest.raises(ValueError, match="positive finite"):
            Budget(bad)
    with pytest.raises(TypeError):
        Budget("4.5")  # type: ignore[arg-type]


def test_a_budget_out_of_reach_says_what_is_reachable() -> None:
    problem = build_problem(docstring_example())
    with pytest.raises(BudgetOutOfRange, match=r"below the cheapest.*4\.000 to 8\.000") as low:
        allocate(problem, Budget(3.0))
    assert (low.value.low_bits, low.value.high_bits) == (800, 1600)
    with pytest.raises(BudgetOutOfRange, match=r"above the largest.*4\.000 to 8\.000"):
        allocate(problem, Budget(9.0))


def test_relative_objective_divides_by_energy() -> None:
    # a: large error but larger energy; b: small error, tiny energy: relatively b is worse
    rows = [
        row("a", "4", 100, 400, 10.0, energy=1000.0),
        row("a", "8", 100, 800, 0.0, energy=1000.0),
        row("b", "4", 100, 400, 1.0, energy=1.0),
        row("b", "8", 100, 800, 0.0, energy=1.0),
    ]
    assert allocate(build_problem(rows), 1200).recipe() == {"a": "4", "b": "8"}
    assert allocate(build_problem(rows, objective=Objective.ABSOLUTE), 1200).recipe() == {
        "a": "8",
        "b": "4",
    }


def test_pins_and_floors() -> None:
    rows = [
        row("model.embed_tokens.weight", "4", 100, 400, 5.0),
        row("model.embed_tokens.weight", "8", 100, 800, 0.0),
        row("model.layers.0.q.weight", "4", 100, 400, 9.0),
        row("model.layers.0.q.weight", "8", 100, 800, 0.0),
    ]
    floor = AllocationRules(floor=Floor("8"))
    alloc = allocate(build_problem(rows, floor), 1200)
    assert alloc.recipe()["model.embed_tokens.weight"] == "8"
    assert alloc.recipe()["model.layers.0.q.weight"] == "4"  # all the budget allows
    pinned = AllocationRules(floor=Floor("8"), pins=(Pin(r"layers\.0\.", "4"),))
    problem = build_problem(rows, pinned)
    assert problem.low_bits == problem.high_bits == 1200
    assert "1 tensor pinned by a pattern" in problem.notes
    with pytest.raises(ValueError, match="not a candidate"):
        build_problem(rows, AllocationRules(pins=(Pin("q", "16"),)))
    with pytest.raises(ValueError, match="not a valid regular expression"):
        Pin("(", "4")


def test_a_pin_to_a_scheme_that_cannot_take_the_tensor_is_refused() -> None:
    rows = [row("t", "4", 100, 400, 1.0), row("t", "g128", 100, 0, NAN, ok=False)]
    with pytest.raises(ValueError, match="cannot take it: does not fit"):
        build_problem(rows, AllocationRules(pins=(Pin("t", "g128"),)))


def test_a_tensor_no_scheme_fits_is_kept_as_stored() -> None:
    rows = [
        row("odd", "g64", 100, 0, NAN, ok=False),
        row("even", "g64", 128, 512, 1.0),
    ]
    problem = build_problem(rows)
    assert problem.kept == ("odd",) and problem.kept_bits == 1600
    alloc = allocate(problem, 512 + 1600)
    assert alloc.recipe() == {"even": "g64", "odd": STORED}
    assert alloc.total_bits == 2112


def test_a_table_with_holes_or_doubles_is_refused() -> None:
    rows = docstring_example()
    with pytest.raises(ValueError, match="no row for 'b' under '8'"):
        build_problem(rows[:3])
    with pytest.raises(ValueError, match="twice"):
        build_problem([*rows, rows[0]])


def test_curve_and_uniform_points() -> None:
    problem = build_problem(docstring_example(), objective=Objective.ABSOLUTE)
    curve = allocation_curve(problem, points=5)  # budgets 800, 1000, ..., 1600 bits
    assert [p.bits for p in curve] == [800, 800, 1200, 1200, 1600]
    assert [p.error for p in curve] == [11.0, 11.0, 1.0, 1.0, 0.0]
    uni = {p.label: (p.bits, p.error) for p in uniform_points(problem)}
    assert uni == {"4": (800, 11.0), "8": (1600, 0.0)}
    assert uniform_allocation(problem, "8").recipe() == {"a": "8", "b": "8"}


# ---------------------------------------------------------------------------------------
# Against exhaustive search and the relaxation's guarantee


@st.composite
def problems(draw: st.DrawFn) -> list[SensitivityRow]:
    n_t = draw(st.integers(1, 4))
    n_s = draw(st.integers(1, 4))
    rows = []
    for t in range(n_t):
        n = draw(st.integers(1, 50))
        for s in range(n_s):
            ok = draw(st.booleans()) if s else True  # every tensor can take scheme 0
            bits = draw(st.integers(1, 400))
            err = draw(st.floats(0, 100, allow_nan=False))
            rows.append(row(f"t{t}", f"s{s}", n, bits, err, ok=ok))
    return rows


def brute(problem, budget_bits: int) -> float:
    """The least total error of any assignment within ``budget_bits`` (inf if none)."""
    options = [np.flatnonzero(problem.allowed[t]) for t in range(len(problem.tensors))]
    best = math.inf
    for pick in itertools.product(*options):
        bits = sum(int(problem.bits[t, s]) for t, s in enumerate(pick)) + problem.kept_bits
        if bits <= budget_bits:
            best = min(best, sum(float(problem.errors[t, s]) for t, s in enumerate(pick)))
    return best


def lagrangian(problem, lam: float) -> tuple[int, float]:
    """``argmin_s e + λ b`` per tensor (ties: fewer bits): its total bits and error."""
    bits = err = 0
    for t in range(len(problem.tensors)):
        opts = np.flatnonzero(problem.allowed[t])
        s = min(opts, key=lambda j: (problem.errors[t, j] + lam * problem.bits[t, j],
                                     problem.bits[t, j]))  # fmt: skip
        bits += int(problem.bits[t, s])
        err += float(problem.errors[t, s])
    return bits + problem.kept_bits, err


@settings(max_examples=200, deadline=None)
@given(problems(), st.floats(0, 1))
def test_never_worse_than_any_lagrangian_solution_or_uniform_scheme(rows, where) -> None:
    problem = build_problem(rows, objective=Objective.ABSOLUTE)
    budget = problem.low_bits + round(where * (problem.high_bits - problem.low_bits))
    alloc = allocate(problem, budget)
    assert alloc.total_bits <= budget
    tol = 1e-9 * max(1.0, alloc.total_error)
    assert alloc.total_error >= brute(problem, budget) - tol
    # every λ at which some tensor's choice changes, and the ends
    slopes = {0.0, math.inf}
    for t in range(len(problem.tensors)):
        for i, j in itertools.combinations(np.flatnonzero(problem.allowed[t]), 2):
            db = abs(int(problem.bits[t, i]) - int(problem.bits[t, j]))
            if db:
                slopes.add(abs(problem.errors[t, i] - problem.errors[t, j]) / db)
    for lam in slopes:
        for eps in (0.0, 1e-9):
            bits, err = lagrangian(problem, lam * (1 + eps) if lam != math.inf else 1e300)
            if bits <= budget:
                assert alloc.total_error <= err + tol
    for scheme in problem.schemes:
        uni = uniform_allocation(problem, scheme)
        if uni.total_bits <= budget:
            assert alloc.total_error <= uni.total_error + tol


@settings(max_examples=100, deadline=None)
@given(problems())
def test_exact_at_the_relaxations_own_budgets(rows) -> None:
    """Where the budget is a Lagrangian solution's total, no assignment does better."""
    problem = build_problem(rows, objective=Objective.ABSOLUTE)
    for lam in (0.0, 1e-3, 1e-2, 0.1, 1.0, 1e300):
        bits, _ = lagrangian(problem, lam)
        alloc = allocate(problem, bits)
        assert alloc.total_error == pytest.approx(brute(problem, bits), rel=1e-9, abs=1e-12)
