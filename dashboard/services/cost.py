"""What a page's work costs before it runs: a rough time and memory estimate from the
tensor's size and the number of schemes, and the limits above which a configuration that a
link restored waits for the visitor's click instead of running on load (issue 29: a shared
link could start minutes of CPU or gigabytes of memory).

The estimate is linear in ``elements × schemes``:

    seconds ≈ schemes × (SECONDS_PER_SCHEME + elements × SECONDS_PER_ELEMENT)
    bytes   ≈ elements × BYTES_PER_ELEMENT        (one scheme's tensors are alive at a time)

E.g. the explorer on an 8000 × 8000 synthetic tensor: 64,000,000 elements × 96 B ≈ 6.1 GB
(measured: 5.8 GiB with ``group=1``); a sweep of 576 schemes on the default 128 × 256
tensor: 576 × (0.02 + 32,768 × 2e-6) ≈ 49 s (measured: over a minute on two cores).
The constants are rounded measurements on this project's CPU machines, meant to tell "a
moment" from "minutes", not to predict to the second.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sources.synthetic import MAX_SYNTHETIC_ELEMENTS, SIDE_RANGE

__all__ = [
    "BYTES_PER_ELEMENT",
    "LIMITS",
    "SECONDS_PER_ELEMENT",
    "SECONDS_PER_SCHEME",
    "SessionLimits",
    "WorkCost",
    "estimate",
]

SECONDS_PER_ELEMENT = 2e-6
"""One element under one scheme: quantize, dequantize, measure (a rounded measurement)."""
SECONDS_PER_SCHEME = 0.02
"""A scheme's fixed cost whatever the tensor's size (set-up, metrics, bookkeeping)."""
BYTES_PER_ELEMENT = 96
"""Peak memory per element of the explorer's exploration: the original, the dequantized
values, the error, the codes, the per-element scales with ``group=1``, the figures' arrays
(5.8 GiB measured for 64 M elements with ``group=1``: 97 B per element)."""


@dataclass(frozen=True)
class WorkCost:
    """An estimate for quantizing ``elements`` values under ``schemes`` schemes (both at
    least 1): ``seconds`` and ``bytes`` as the module docstring's formulas give them."""

    elements: int
    schemes: int = 1

    def __post_init__(self) -> None:
        for name, value in (("elements", self.elements), ("schemes", self.schemes)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")

    @property
    def seconds(self) -> float:
        return self.schemes * (SECONDS_PER_SCHEME + self.elements * SECONDS_PER_ELEMENT)

    @property
    def bytes(self) -> int:
        return self.elements * BYTES_PER_ELEMENT

    def label(self) -> str:
        """E.g. ``"~49 s, ~3 MB"`` (at least 1 s and 1 MB: an estimate, not a timing)."""
        return f"~{max(self.seconds, 1):,.0f} s, ~{max(self.bytes / 1e6, 1):,.0f} MB"


@dataclass(frozen=True)
class SessionLimits:
    """What one session may ask for, and what a link may start without a click.

    ``max_side`` and ``max_synthetic_elements``: the largest synthetic tensor (the same
    bounds the URL parser and the widgets use). A configuration restored from a link runs
    on load only while its estimate stays within ``link_seconds`` and ``link_bytes``;
    above either it waits for the visitor's click (``heavy``). Work the visitor starts
    with the widgets is never held back."""

    max_side: int = SIDE_RANGE[1]
    max_synthetic_elements: int = MAX_SYNTHETIC_ELEMENTS
    link_seconds: float = 10.0
    link_bytes: int = 1_000_000_000

    def heavy(self, cost: WorkCost) -> bool:
        """Whether a link's ``cost`` is above what a link starts on load."""
        if not isinstance(cost, WorkCost):
            raise TypeError(f"cost must be a WorkCost, got {type(cost).__name__}")
        return cost.seconds > self.link_seconds or cost.bytes > self.link_bytes

    def describe(self) -> str:
        """The limits in one sentence, for the page."""
        work = self.link_seconds / SECONDS_PER_ELEMENT
        return (
            f"Limits of a session: tensors up to {self.max_side:,} × {self.max_side:,} "
            f"({self.max_synthetic_elements:,} elements synthetic). A link starts its work "
            f"on load only up to about {work:,.0f} elements × schemes (~"
            f"{self.link_seconds:.0f} s) and ~{self.link_bytes / 1e9:.0f} GB of memory; "
            "above that it waits for your click."
        )


LIMITS = SessionLimits()


def estimate(elements: int, schemes: int = 1) -> WorkCost:
    """The cost of ``schemes`` schemes on ``elements`` values (``WorkCost``)."""
    return WorkCost(int(elements), int(schemes))
