"""Defect: TQ1_0/TQ2_0 refused a 384-wide layer with "group size 256 must divide the last
dimension 384", where the K-quants (whose 256-value blocks are the same llama.cpp QK_K
blocks) say "super-block of 256"; the whole-model fallback note said "blocks" for both."""

from __future__ import annotations

import pytest
from markdown_text import plain
from page_runs import open_page

from dashboard.services.model.fallbacks import fallback_note, shape_refusal
from quant_core import QuantConfig

QUERY = "encoder.layer.0.attention.self.query"


@pytest.mark.parametrize("name", ["TQ1_0", "TQ2_0", "Q4_K"])
def test_the_refusal_names_the_super_block(name: str) -> None:
    text = shape_refusal(QuantConfig.from_name(name), (384, 384))
    assert text is not None
    assert "super-block of 256 values" in text, text
    assert "rows of 384 values" in text, text
    assert "group size" not in text, text


def test_no_refusal_where_the_rows_fit() -> None:
    assert shape_refusal(QuantConfig.from_name("TQ1_0"), (4, 512)) is None


@pytest.mark.parametrize("name", ["TQ1_0", "Q4_K"])
def test_the_fallback_note_says_super_blocks(name: str) -> None:
    note = fallback_note(QuantConfig.from_name(name), [("a", (384, 384))])
    assert note is not None and "super-blocks hold 256 values" in note, note


@pytest.mark.slow
def test_the_layer_page_words_tq1_0_as_the_k_quants() -> None:
    at = open_page("layer.py", **{"l.layer": QUERY, "l.scheme": "custom", "l.w.preset": "TQ1_0"})
    assert not at.exception, [e.value for e in at.exception]
    errors = [plain(e.value) for e in at.error]
    assert len(errors) == 1, errors
    assert "TQ1_0" in errors[0] and "super-block of 256 values" in errors[0], errors
    assert "group size 256" not in errors[0], errors
