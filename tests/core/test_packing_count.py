"""``packed_size`` at the public boundary: a count that is no count of codes is refused,
naming the value (a negative count gave 0 bytes, a float a fractional product)."""

from __future__ import annotations

import pytest

from quant_core import packed_size


@pytest.mark.parametrize("count", [-1, -100])
def test_a_negative_count_is_refused(count: int) -> None:
    with pytest.raises(ValueError, match=str(count)):
        packed_size(count, 4)


@pytest.mark.parametrize("count", [2.5, "8", True, None])
def test_a_count_that_is_not_an_int_is_refused(count: object) -> None:
    with pytest.raises(TypeError, match="count"):
        packed_size(count, 4)  # type: ignore[arg-type]


@pytest.mark.parametrize(("count", "bits", "size"), [(0, 4, 0), (1, 4, 1), (3, 3, 2), (9, 16, 18)])
def test_sizes(count: int, bits: int, size: int) -> None:
    assert packed_size(count, bits) == size
