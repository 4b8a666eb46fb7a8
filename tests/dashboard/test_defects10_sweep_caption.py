"""Defect: the Sweep table's caption read "Sorted by bits per element, then by output MSE
(held-out) (best first)": two bracketed asides in a row, the second one reading as part of
the metric's name. Now the order comes first, the metric's label last: "then best first by
output MSE (held-out)"."""

from __future__ import annotations

import pytest
from markdown_text import plain
from page_runs import open_page

LAYER = "encoder.layer.0.attention.self.query.weight"
LINK = {
    "sw.bits": "4",
    "sw.modes": "symmetric",
    "sw.gran": "channel",
    "sw.fmt": "int",
    "sw.algo": "rtn",
    "sw.range": "minmax",
    "sw.sdtype": "fp16",
    "sw.y": "output_mse",
}


@pytest.mark.slow
def test_the_table_caption_has_no_two_brackets_in_a_row() -> None:
    at = open_page("sweep.py", src="model", tensor=LAYER, **LINK)
    assert not at.exception, [e.value for e in at.exception]
    captions = [plain(c.value) for c in at.caption]
    sorted_by = [c for c in captions if c.startswith("Sorted by bits per element")]
    assert len(sorted_by) == 1, captions
    (caption,) = sorted_by
    assert ") (" not in caption, caption
    assert "Sorted by bits per element, then best first by output MSE (held-out);" in caption
