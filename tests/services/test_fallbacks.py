"""llama-quantize's fallback type in words: the name a page offers for one tensor and the
whole-model report's sentence per fallback type, each block size from the GGUF table."""

from __future__ import annotations

import pytest

from dashboard.services.model.fallbacks import fallback_name, fallback_note
from quant_core import PerGroup, QuantConfig


@pytest.mark.parametrize(
    ("scheme", "shape", "expected"),
    [
        ("Q4_K", (30522, 384), "Q5_0"),  # MiniLM's embeddings: 384 % 256
        ("Q6_K", (32, 384), "Q8_0"),
        ("Q4_K", (384, 1536), None),  # 1536 = 6 x 256: fits
        ("Q4_K", (16, 250), None),  # not even blocks of 32: llama-quantize keeps F16
        ("Q4_0", (16, 250), None),
        ("Q8_0", (16, 384), None),
    ],
)
def test_fallback_name(scheme: str, shape: tuple[int, ...], expected: str | None) -> None:
    assert fallback_name(QuantConfig.from_name(scheme), shape) == expected


def test_fallback_name_of_a_scheme_that_is_no_gguf_type_is_none() -> None:
    assert fallback_name(QuantConfig(bits=4, granularity=PerGroup(128)), (16, 384)) is None
    assert fallback_name("Q4_K", (16, 384)) is None  # not a QuantConfig


def test_fallback_note_names_the_types_block() -> None:
    shapes = [("a", (1536, 384)), ("b", (384, 1536)), ("c", (384, 384)), ("d", (8, 250))]
    assert fallback_note(QuantConfig.from_name("Q4_K"), shapes) == (
        "2 layers (rows of 384 values) are stored as Q5_0: llama-quantize's fallback for "
        "Q4_K, whose super-blocks hold 256 values."
    )
    assert fallback_note(QuantConfig.from_name("Q2_K"), [("a", (4, 1056))]) == (
        "1 layer (rows of 1,056 values) is stored as Q4_0: llama-quantize's fallback for "
        "Q2_K, whose super-blocks hold 256 values."
    )
    assert fallback_note(QuantConfig.from_name("Q4_K"), [("b", (384, 1536))]) is None
