"""Errors written at three significant digits (``services.display.errors``)."""

from __future__ import annotations

import math

import pytest

from dashboard.services.display.errors import ERROR_FORMAT, error_text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (4.7e-05, "4.7e-05"),
        (0.012345, "0.0123"),
        (1.23456e-09, "1.23e-09"),
        (123.456, "123"),
        (-0.0, "0"),
        (0, "0"),
        (math.inf, "inf"),
        (math.nan, "NaN"),
    ],
)
def test_error_text_keeps_three_significant_digits(value: float, text: str) -> None:
    assert error_text(value) == text


def test_error_format_is_the_same_digits_as_printf() -> None:
    assert error_text(4.7e-05) == ERROR_FORMAT % 4.7e-05


@pytest.mark.parametrize("bad", [True, "1e-5", None])
def test_error_text_rejects_non_numbers(bad: object) -> None:
    with pytest.raises(TypeError, match="real number"):
        error_text(bad)  # type: ignore[arg-type]
