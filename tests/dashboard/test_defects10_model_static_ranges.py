"""Defect: the Whole model page, opened with ``m.act=w8a8&m.ranges=static`` (W8A8's
activations are per token), warned "static ranges must be per-tensor or per-feature, not
per-token (one scale per row): ... Using dynamic ranges.": no word of the link's key. The
warning now names ``m.ranges=static`` and what the page uses instead."""

from __future__ import annotations

import pytest
from markdown_text import plain
from page_runs import open_page


@pytest.mark.slow
def test_static_ranges_on_per_token_activations_name_the_key() -> None:
    at = open_page("model.py", **{"m.act": "w8a8", "m.ranges": "static"})
    assert not at.exception, [e.value for e in at.exception]
    warnings = [plain(w.value) for w in at.warning]
    named = [w for w in warnings if "m.ranges=static" in w]
    assert len(named) == 1, warnings
    assert "dynamic ranges" in named[0] and "per-token" in named[0], named
