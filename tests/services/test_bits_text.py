"""Bits per value as the pages write them (``display.bits.bits_text``): exact for the
shipped formats' short binary fractions, which four significant digits rounded (Q6_K's
6.5625 read 6.562 beside its parts 6 + 0.5 + 0.0625)."""

from __future__ import annotations

import pytest
import torch

from dashboard.services.display.bits import bits_text
from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.metric_cards import exploration_cards
from dashboard.services.explorer.stored import layout_text
from quant_core import QuantConfig, storage_cost


@pytest.mark.parametrize(
    ("bits", "text"),
    [
        (6.5625, "6.5625"),
        (3.4375, "3.4375"),
        (2.0625, "2.0625"),
        (4.5, "4.5"),
        (8.0, "8"),
        (4.25, "4.25"),
        (4 + 20 / 128 + 32 / 512, "4.219"),  # 4.21875: five decimals, four digits
        (4.28125, "4.281"),
        (1 / 3, "0.3333"),
        (float("nan"), "nan"),
    ],
)
def test_bits_text(bits: float, text: str) -> None:
    assert bits_text(bits) == text


def test_bits_text_refuses_what_is_not_a_number() -> None:
    with pytest.raises(TypeError):
        bits_text(True)


@pytest.mark.parametrize(("name", "bits"), [("Q6_K", "6.5625"), ("Q3_K", "3.4375")])
def test_a_k_quant_is_written_exactly_with_the_parts_that_sum_to_it(name: str, bits: str) -> None:
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(0))
    exp = explore(x, QuantConfig.from_name(name))
    assert str(storage_cost(x.shape, exp.config).bits_per_element) == bits
    text = layout_text(exp)
    assert text.startswith(f"**{name}**: {bits} bits per value ="), text
    _, storage = exploration_cards(exp)
    assert {c.label: c.value for c in storage}["Bits per element"] == bits


def test_the_layout_names_a_shipped_format_as_the_picker_does() -> None:
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(0))
    text = layout_text(explore(x, QuantConfig.from_name("NF4_DQ")))
    assert text.startswith("**NF4 + double quant**: "), text
