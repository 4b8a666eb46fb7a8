"""A/B's headline on two shipped formats whose bits differ by a hair (issue 25)."""

from __future__ import annotations

import pytest
import torch

from dashboard.services.compare.ab import compare_ab
from dashboard.services.compare.ab_summary import bits_phrase, cost_headline
from quant_core import QuantConfig


def test_nvfp4_against_llama_cpps_nvfp4_does_not_read_as_the_same_bits() -> None:
    """NVFP4 (4.5 bits + one fp32 per tensor: 4.500977 on 64x512) against llama.cpp's
    NVFP4 (4.5): the headline said "B costs 100% of the bits and has 0.2% less error:
    better on both", a saving that read as none."""
    x = torch.randn(64, 512, generator=torch.Generator().manual_seed(0))
    ab = compare_ab(x, QuantConfig.from_name("NVFP4"), QuantConfig.from_name("NVFP4_GGUF"))
    ratio = ab.storage_b.bits_per_element / ab.storage_a.bits_per_element
    assert ratio == pytest.approx(4.5 / (4.5 + 32 / (64 * 512)))
    text = cost_headline(ab)
    assert "100% of the bits" not in text, text
    assert f"costs {(1 - ratio) * 100:.2g}% fewer bits" in text, text


@pytest.mark.parametrize(
    ("ratio", "words"),
    [(0.9949, "99% of the bits"), (0.995, "0.5% fewer bits"), (0.99978, "0.022% fewer bits")],
)
def test_a_ratio_near_one_reads_as_the_saving(ratio: float, words: str) -> None:
    assert bits_phrase(ratio) == words
