"""AppTest: defects a demanding user hit on the Whole model page (bundled MiniLM) with the
shipped formats (issue 25), each with the run that showed it."""

from __future__ import annotations

import pytest
from page_runs import open_page

pytestmark = pytest.mark.slow


def test_each_layer_says_which_type_it_is_stored_in() -> None:
    """Q4_K on MiniLM: 31 layers (rows of 384) fall back to Q5_0 and the 6 ``output.dense``
    layers (rows of 1,536) take Q4_K. One line above said so, but the per-layer table
    showed only 5.5 and 4.5 bits per element, with no column naming the type (the Mixed
    page's table has "stored as")."""
    at = open_page("model.py", **{"m.preset": "Q4_K"})
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[-1].value
    assert len(table) == 37
    stored = dict(zip(table["name"], table["stored_as"], strict=True))
    wide = {n for n in stored if n.endswith("output.dense") and "attention" not in n}
    assert len(wide) == 6
    assert {stored[n] for n in wide} == {"Q4_K"}
    assert {v for n, v in stored.items() if n not in wide} == {"Q5_0"}
    bits = dict(zip(table["stored_as"], table["bits_per_element"], strict=False))
    assert bits == {"Q4_K": 4.5, "Q5_0": 5.5}
