"""The A/B page's headline: what each scheme costs in bits per element against what it
loses, in words.

    cost_headline(ab)
    # "**B**: 4.25 bits/el, MSE 1.2e-04 vs **A**: 8.5 bits/el, MSE 3e-06 —
    #  B costs half the bits for 40× the error."
    output_headline(ab)   # the same on the layer's held-out outputs, None without a layer

The cheaper scheme (fewer bits per element, scales and zero points counted) is named
first; with equal bits, the more accurate one.
"""

from __future__ import annotations

from quant_core import PerChannel, PerGroup

from ..display.bits import bits_text
from ..display.errors import error_text
from .ab import ABResult

__all__ = ["bits_phrase", "block_unit", "cost_headline", "error_phrase", "output_headline"]

# Bits per element are sums of a few binary fractions (4 + 16/32): equal costs are
# equal to within float rounding of such sums.
_SAME_BITS = 1e-9


def bits_phrase(ratio: float) -> str:
    """How ``ratio`` (cheaper bits / dearer bits, in (0, 1)) reads: ``"half the bits"``,
    ``"a quarter of the bits"``, else a percentage (``"53% of the bits"``); a ratio that
    would round to 100% reads as the saving (NVFP4's 4.5 against 4.500977 bits: ``"0.022%
    fewer bits"``, not "100% of the bits", which read as no saving beside "better on
    both")."""
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"ratio={ratio} must be in (0, 1)")
    for value, words in ((0.5, "half the bits"), (0.25, "a quarter of the bits")):
        if abs(ratio - value) < 0.005:
            return words
    if ratio >= 0.995:
        return f"{(1.0 - ratio) * 100:.2g}% fewer bits"
    return f"{ratio:.0%} of the bits"


def _times(q: float) -> str:
    return f"{q:,.0f}×" if q >= 100 else f"{q:.3g}×"


def error_phrase(mine: float, other: float, noun: str = "error") -> str:
    """``mine`` against ``other`` (both > 0): ``"40× the error"``, ``"3.2× less error"``;
    within 10% of each other as a percentage (``"2.5% more error"``, ``"0.04% less
    error"``); ``"the same error"``."""
    if not (mine > 0 and other > 0):
        raise ValueError(f"errors must be > 0, got {mine} and {other}")
    if mine == other:
        return f"the same {noun}"
    big, small = max(mine, other), min(mine, other)
    more = mine > other
    if big / small < 1.1:
        return f"{100 * (big / small - 1):.2g}% {'more' if more else 'less'} {noun}"
    return f"{_times(big / small)} the {noun}" if more else f"{_times(big / small)} less {noun}"


def _number(value: float) -> str:
    """Three significant digits, as the tables beside the headline write errors
    (``display.errors.error_text``: ``4.73e-05``, ``0.0123``)."""
    return error_text(value)


def _side(name: str, bits: float, err: float, what: str) -> str:
    return f"**{name}**: {bits_text(bits)} bits/el, {what} {_number(err)}"


def _verdict(first: str, second: str, errors: dict[str, float], cost: str | None, noun: str) -> str:
    """The words after the dash; ``cost`` is ``None`` when both cost the same."""
    e1, e2 = errors[first], errors[second]
    if cost is None:
        if e1 == e2:
            return f"the same cost for the same {noun}."
        if e1 == 0:
            return f"the same cost; {first} is exact."
        return f"the same cost; {first} has {error_phrase(e1, e2, noun)}."
    if e1 == e2:
        return f"{first} costs {cost} for the same {noun}."
    if e1 < e2:
        gain = "is exact" if e1 == 0 else f"has {error_phrase(e1, e2, noun)}"
        return f"{first} costs {cost} and {gain}: better on both."
    if e2 == 0:
        return f"{first} costs {cost}; {second} is exact."
    return f"{first} costs {cost} for {error_phrase(e1, e2, noun)}."


def _headline(bits: dict[str, float], errors: dict[str, float], what: str, noun: str) -> str:
    a, b = "A", "B"
    same_bits = abs(bits[a] - bits[b]) <= _SAME_BITS * max(bits[a], bits[b])
    # the cheaper first; at equal cost, the more accurate
    key = errors if same_bits else bits
    first = a if key[a] <= key[b] else b
    second = b if first == a else a
    cost = None if same_bits else bits_phrase(bits[first] / bits[second])
    return (
        f"{_side(first, bits[first], errors[first], what)} vs "
        f"{_side(second, bits[second], errors[second], what)} — "
        + _verdict(first, second, errors, cost, noun)
    )


def cost_headline(ab: ABResult) -> str:
    """Bits per element weighed against weight MSE (Markdown, one line)."""
    bits = {"A": ab.storage_a.bits_per_element, "B": ab.storage_b.bits_per_element}
    errors = {"A": ab.metrics_a.mse, "B": ab.metrics_b.mse}
    return _headline(bits, errors, "MSE", "error")


def output_headline(ab: ABResult) -> str | None:
    """Bits per element weighed against the layer's output MSE on held-out sentences;
    ``None`` when the A/B had no layer."""
    if ab.output_a is None or ab.output_b is None:
        return None
    bits = {"A": ab.storage_a.bits_per_element, "B": ab.storage_b.bits_per_element}
    errors = {"A": ab.output_a.mse, "B": ab.output_b.mse}
    return "Layer output on held-out sentences: " + _headline(
        bits, errors, "output MSE", "output error"
    )


def block_unit(ab: ABResult) -> str:
    """What one block of the winner count is (``ab.block_granularity`` on the compared
    matrix), for "lower MSE in each ...": ``"group of 32 values, scheme B's groups"``,
    ``"group of 32 values, both schemes' groups"``, ``"row of 384 values"``, ``"column of
    64 values"``; ``"the whole tensor"`` for one block. Without it "A 7, B 505, ties 0 of
    512" counted blocks the page never described."""
    gran = ab.block_granularity
    rows, cols = ab.error_a.shape
    if isinstance(gran, PerGroup):
        owners = [
            side
            for side, cfg in (("A", ab.config_a), ("B", ab.config_b))
            if cfg.granularity == gran
        ]
        whose = (
            "both schemes' groups"
            if len(owners) == 2
            else f"scheme {owners[0]}'s groups"
            if owners
            else "groups"
        )
        return f"group of {gran.group_size:,} values, {whose}"
    if isinstance(gran, PerChannel):
        if gran.axis % 2 == 0:
            return f"row of {cols:,} values"
        return f"column of {rows:,} values"
    return "the whole tensor"
