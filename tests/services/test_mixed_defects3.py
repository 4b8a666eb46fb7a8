"""Defects of the mixed-precision allocation found by a user's hunt (defects3): a budget
typed at exactly a size the candidates reach, and the reachable range a refused budget
names."""

from __future__ import annotations

from quant_core.mixed import (
    Budget,
    BudgetUnit,
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
