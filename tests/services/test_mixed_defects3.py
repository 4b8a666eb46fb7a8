"""Defects of the mixed-precision allocation found by a user's hunt (defects3): a budget
typed at exactly a size the candidates reach, and the reachable range a refused budget
names."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest
import torch

from dashboard.services.mixed.figures import allocation_table
from dashboard.services.mixed.runner import Placement, TaskFailed, Where, run_tasks
from dashboard.services.mixed.state import mixed_to_query, parse_budget
from quant_core.mixed import (
    STORED,
    Budget,
    BudgetOutOfRange,
    BudgetUnit,
    SensitivityRow,
    allocate,
    build_problem,
    candidate_named,
    measure_tensor,
)


def test_a_budget_is_the_decimal_typed_not_its_float_product() -> None:
    """``math.floor(1.001 * 1000)`` is 1000: the budget lost a bit (and 2.01 MB lost one
    of its 16,080,000 bits), so a budget typed at exactly a reachable size was refused."""
    assert Budget(1.001).total_bits(1000) == 1001
    assert Budget(2.01, BudgetUnit.MEGABYTES).total_bits(5) == 16_080_000
    assert Budget(1.2, BudgetUnit.GIGABYTES).total_bits(5) == 9_600_000_000
    for k in range(1000, 9000):
        assert Budget(k / 1000).total_bits(4000) == 4 * k, k
    # still the floor: a budget between two whole bits gives the smaller
    assert Budget(4.2815).total_bits(1000) == 4281


def _cell(tensor: str, scheme: str, bits: int, err: float, n: int) -> SensitivityRow:
    return SensitivityRow(tensor, scheme, (n // 64, 64), 16 * n, bits, bits / n, 0.0, 0.0,
                          err, 100.0, True, None, None, 0.0)  # fmt: skip


@pytest.mark.parametrize(("n", "low_bpw", "high_bpw"), [(4096, 4.28125, 8.5 + 3 / 4096),
                                                         (64, 4.5, 4.5 + 1 / 64)])  # fmt: skip
def test_the_reachable_range_a_refused_budget_names_can_be_typed_back(
    n: int, low_bpw: float, high_bpw: float
) -> None:
    """The range was rounded to the nearest: "reachable are 4.281 to 8.501 bits per weight"
    with both ends refused (4.281 below the cheapest 4.28125, 8.501 above 8.50073), and a
    small table's MB range read "0.00 to 0.00 MB"."""
    rows = [_cell("a", "int4", round(low_bpw * n), 1.0, n),
            _cell("a", "int8", round(high_bpw * n), 0.1, n)]  # fmt: skip
    problem = build_problem(rows)
    with pytest.raises(BudgetOutOfRange) as caught:
        allocate(problem, Budget(1.0))
    message = str(caught.value)
    assert message[0].isupper() and message.endswith("."), message
    m = re.search(r"reachable are ([0-9.]+) to ([0-9.]+) bits per weight \(([0-9.]+) to "
                  r"([0-9.]+) MB\)", message)  # fmt: skip
    assert m is not None, message
    lo, hi, lo_mb, hi_mb = (float(g) for g in m.groups())
    assert lo_mb > 0 and lo <= hi and lo_mb <= hi_mb, message
    # every end, typed back, is allocated
    assert allocate(problem, Budget(lo)).total_bits >= problem.low_bits
    assert allocate(problem, Budget(hi)).total_bits <= problem.high_bits
    for mb in (lo_mb, hi_mb):
        allocate(problem, Budget(mb, BudgetUnit.MEGABYTES))


def test_a_failed_task_names_its_tensor_once() -> None:
    """``measure_tensor``'s messages start with the tensor's name, and ``TaskFailed`` put it
    before them again: "The table stopped: a.weight: a.weight: the weight holds NaN"."""
    task = SimpleNamespace(tensor="a.weight")

    def fails(_task: object) -> None:
        raise ValueError("a.weight: the weight must be 2-D and not empty, got (0, 4)")

    with pytest.raises(TaskFailed) as caught:
        list(run_tasks([task], Placement(Where.IN_PROCESS), fails))  # type: ignore[list-item]
    assert str(caught.value) == "a.weight: the weight must be 2-D and not empty, got (0, 4)"
    assert caught.value.tensor == "a.weight"
    # a message without the name gets it
    assert str(TaskFailed("b.weight", "worker died")) == "b.weight: worker died"


def test_a_tensor_kept_as_stored_keeps_its_shape_in_the_allocation_table() -> None:
    """The allocation's table left the shape of a tensor kept as stored blank (its choice,
    "stored", has no cell of the table)."""
    w = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    bad = w.clone()
    bad[0, 0] = math.inf
    cands = [candidate_named("int8_pc"), candidate_named("Q4_0")]
    rows = measure_tensor("a.weight", bad, cands) + measure_tensor("b.weight", w, cands)
    problem = build_problem(rows)
    alloc = allocate(problem, problem.high_bits)
    table = allocation_table(rows, alloc).set_index("tensor")
    assert table.loc["a.weight", "scheme"] == STORED
    assert table.loc["a.weight", "shape"] == table.loc["b.weight", "shape"] == "8×64"


@pytest.mark.parametrize("value", [4.2812345, 1234.5678, 12345.67, 0.01215, 4.5, 20.0])
def test_a_links_budget_and_the_pages_caption_keep_every_digit(value: float) -> None:
    """``:g`` kept six significant digits: a link to 1234.5678 MB reopened 1234.57 MB, and
    the caption and the recipe's file name said 1234.57 while the page allocated for
    1234.5678."""
    for unit in BudgetUnit:
        budget = Budget(value, unit)
        text = mixed_to_query(budget, ["Q4_0"], None)["mx.budget"]
        assert parse_budget(text) == budget, text
        assert "e" not in text.removesuffix(unit.value)
        assert float(budget.describe().split()[0]) == value
    assert Budget(20.0).describe() == "20 bpw" and Budget(4.5).describe() == "4.5 bpw"
