"""Service tests: defects of the Mixed precision page found by a user's hunt (defects4)."""

from __future__ import annotations

import pytest

from dashboard.services.mixed.state import budget_step
from quant_core.mixed import BudgetUnit

MB, GB, BPW = BudgetUnit.MEGABYTES, BudgetUnit.GIGABYTES, BudgetUnit.BITS_PER_WEIGHT


@pytest.mark.parametrize(
    ("unit", "n", "step"),
    [
        (BPW, 22_700_000, 0.25),
        (MB, 22_700_000, 0.5),  # 0.25 * 22.7e6 / 8 bytes = 0.709 MB
        (GB, 22_700_000, 0.0005),
        (MB, 7_000_000_000, 200.0),  # 218.75 MB
        (GB, 7_000_000_000, 0.2),
        (MB, 8_000_000, 0.2),  # 0.25 MB: 2 of 1-2-5 times 0.1
        (MB, 32_000_000, 1.0),  # exactly 1 MB stays 1
        (MB, None, 1.0),
        (GB, None, 0.01),
    ],
)
def test_the_budget_step_is_a_quarter_bit_per_weight_in_every_unit(
    unit: BudgetUnit, n: int | None, step: float
) -> None:
    assert budget_step(unit, n) == step


def test_the_budget_step_names_a_bad_unit() -> None:
    with pytest.raises(TypeError, match="'MB'"):
        budget_step("MB", 10)  # type: ignore[arg-type]
