"""The cost estimate that holds a heavy link's work back (issue 29, item 11)."""

from __future__ import annotations

import pytest

from dashboard.services.cost import (
    BYTES_PER_ELEMENT,
    LIMITS,
    SECONDS_PER_ELEMENT,
    SECONDS_PER_SCHEME,
    SessionLimits,
    WorkCost,
    estimate,
)


def test_the_formulas() -> None:
    cost = estimate(1000, 3)
    assert cost.seconds == pytest.approx(3 * (SECONDS_PER_SCHEME + 1000 * SECONDS_PER_ELEMENT))
    assert cost.bytes == 1000 * BYTES_PER_ELEMENT


def test_the_issues_links_are_heavy_and_everyday_work_is_not() -> None:
    # rows=8000&cols=8000 (5.8 GiB measured) and a 576-scheme sweep of the default tensor
    assert LIMITS.heavy(estimate(8000 * 8000))
    assert LIMITS.heavy(estimate(128 * 256, 576))
    # the default sweep (66 schemes) and the bundled model's largest weight
    assert not LIMITS.heavy(estimate(128 * 256, 66))
    assert not LIMITS.heavy(estimate(1536 * 384))


def test_the_label_and_limits_read_as_numbers() -> None:
    assert estimate(8000 * 8000).label() == "~128 s, ~6,144 MB"
    assert estimate(1).label() == "~1 s, ~1 MB"
    text = LIMITS.describe()
    assert "16,384 × 16,384" in text and "5,000,000 elements × schemes" in text
    assert "~10 s" in text and "~1 GB" in text


@pytest.mark.parametrize(("elements", "schemes"), [(0, 1), (1, 0), (-5, 2)])
def test_counts_must_be_positive(elements: int, schemes: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        WorkCost(elements, schemes)


def test_types_are_checked() -> None:
    with pytest.raises(TypeError, match="elements"):
        WorkCost(1.5, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cost"):
        SessionLimits().heavy(3)  # type: ignore[arg-type]
