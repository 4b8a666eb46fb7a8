"""Defect: with one candidate (Q4_K) the Mixed precision page refused 4.5 bpw with "the only
size they reach is 5.343976433941 bits per weight": twelve places (rounded up, so a hair above
the one size), which a link's budget cannot hold (at most nine) and which, typed back, was
still refused. The single size is now written with the fewest places that read back as it."""

from __future__ import annotations

import re

import pytest
from markdown_text import plain
from page_runs import open_page


@pytest.mark.slow
def test_the_single_reachable_size_can_be_typed_back() -> None:
    at = open_page("mixed.py", **{"mx.budget": "4.5bpw", "mx.cands": "Q4_K"})
    assert not at.exception, [e.value for e in at.exception]
    (error,) = [plain(e.value) for e in at.error]
    m = re.search(r"the only size they reach is ([0-9.]+) bits per weight \(([0-9.]+) MB\)", error)
    assert m is not None, error
    bpw, mb = m.groups()
    assert len(bpw.split(".")[1]) <= 9, bpw  # what a link's mx.budget holds
    for budget in (f"{bpw}bpw", f"{mb}MB"):
        again = open_page("mixed.py", **{"mx.budget": budget, "mx.cands": "Q4_K"})
        assert not again.exception
        assert not again.warning and not again.error, (
            budget,
            [plain(w.value) for w in [*again.warning, *again.error]],
        )
