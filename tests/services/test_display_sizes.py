"""One rule for sizes and counts written short (``display.sizes``): the unit is picked on
the value as written, so the number shown is always under 1,000 (below the largest unit)
and reads back to the exact size within its rounding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard.services.display.sizes import compact_bytes, compact_count

_BYTES = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


@given(st.integers(min_value=0, max_value=10**13), st.sampled_from([None, 0, 1, 2]))
def test_a_size_reads_back_within_its_rounding(n: int, decimals: int | None) -> None:
    text = compact_bytes(n, decimals)
    number, unit = text.split(" ")
    value = float(number)
    if unit != "GB":
        assert value < 1000
    if unit != "B":
        assert value >= 1 or n < 1000
        # 3 significant digits: half a unit in the third digit; fixed places: half the last
        places = decimals if decimals is not None else 2 - int(f"{value:e}".split("e")[1])
        half = 0.5 * 10**-places
        assert abs(n / _BYTES[unit] - value) <= half * (1 + 1e-9)
    else:
        assert value == n


@pytest.mark.parametrize(
    ("n", "decimals", "text"),
    [
        (812, None, "812 B"),
        (999_949, None, "1 MB"),  # 999.949 kB is "1e+03" at 3 digits: written in MB
        (999_949, 1, "999.9 kB"),
        (999_950, 1, "1.0 MB"),
        (1_536, 1, "1.5 kB"),
        (2_500_000_000_000, None, "2500 GB"),
    ],
)
def test_hand_derived_sizes(n: int, decimals: int | None, text: str) -> None:
    assert compact_bytes(n, decimals) == text


def test_counts() -> None:
    assert [compact_count(n) for n in (0, 9_999, 10_000, 999_999, 1_070_000_000)] == [
        "0",
        "9,999",
        "10k",
        "1M",
        "1.07G",
    ]


@pytest.mark.parametrize("bad", [1.5, "12", True, None])
def test_a_size_that_is_not_an_int_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        compact_bytes(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an int"):
        compact_count(bad)  # type: ignore[arg-type]


def test_a_negative_size_or_bad_decimals_is_refused() -> None:
    with pytest.raises(ValueError, match="-5"):
        compact_bytes(-5)
    with pytest.raises(ValueError, match="decimals"):
        compact_bytes(5_000, -1)
