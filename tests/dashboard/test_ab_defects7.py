"""AppTest: defects a demanding user hit on the A/B page with the shipped formats (issue 25),
each with the run that showed it."""

from __future__ import annotations

import re

from markdown_text import plain
from page_runs import open_page


def test_blocks_won_counts_have_thousands_separators() -> None:
    """Q4_K against MXFP4 on a 64x512 tensor: "Blocks won (lower MSE per block): A 1015,
    B 9, ties 0 of 1024", where every other count on the page reads 1,024."""
    at = open_page(
        "ab.py", src="synthetic", rows="64", cols="512", **{"a.preset": "Q4_K", "b.preset": "MXFP4"}
    )
    assert not at.exception, [e.value for e in at.exception]
    won = next(plain(m.value) for m in at.markdown if "Blocks won" in plain(m.value))
    assert won.endswith("of 1,024."), won
    counts = re.search(r"A ([\d,]+), B ([\d,]+), ties ([\d,]+) of ([\d,]+)\.$", won)
    assert counts is not None, won
    a, b, ties, total = (int(c.replace(",", "")) for c in counts.groups())
    assert a + b + ties == total == 1024 and a >= 1000, won
