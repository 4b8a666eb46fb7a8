"""Service tests: review mends and defects of the Mixed precision page (defects6)."""

from __future__ import annotations

import math

import pytest

from quant_core.mixed import BudgetOutOfRange, SensitivityRow, allocate, build_problem


def _row(tensor: str, scheme: str, bits: int, n: int, *, stored_bits: int) -> SensitivityRow:
    ok = bits > 0
    nan = math.nan
    return SensitivityRow(tensor, scheme, (n // 64, 64), stored_bits, bits,
                          bits / n if ok else nan, 0.0 if ok else nan, 0.0 if ok else nan,
                          1.0 / bits if ok else nan, 100.0 if ok else nan, True, None,
                          None if ok else "the weight holds 1 NaN and 0 Inf values of 4,096",
                          0.0)  # fmt: skip


def test_the_note_and_the_refusal_say_the_kept_tensors_in_one_sentence() -> None:
    """Two tensors kept as stored (16 and 32 bits per weight): the problem's note and the
    budget's refusal wrote two variants of one sentence ("2 tensors no candidate can take,
    kept as stored: ..." and "2 tensors kept as stored (no candidate can take them) take
    ..."); now one, with its thousands separated as ``_tensors`` writes them."""
    n = 4096
    rows = [
        _row("a.weight", "int4", 0, n, stored_bits=16 * n),
        _row("a.weight", "int8", 0, n, stored_bits=16 * n),
        _row("c.weight", "int4", 0, n, stored_bits=32 * n),
        _row("c.weight", "int8", 0, n, stored_bits=32 * n),
        _row("b.weight", "int4", 4 * n, n, stored_bits=32 * n),
        _row("b.weight", "int8", 8 * n, n, stored_bits=32 * n),
    ]
    problem = build_problem(rows)
    sentence = "2 tensors no candidate can take, kept as stored: 24 bits per weight, 24,576 bytes"
    assert problem.notes == (f"{sentence}, counted in the budget and the size",)
    with pytest.raises(BudgetOutOfRange) as caught:
        allocate(problem, 8 * n)
    assert str(caught.value).endswith(f"; {sentence}, counted in that.")
