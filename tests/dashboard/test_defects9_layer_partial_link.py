"""Defect: a Layer outputs link with a side's scheme but no ``l.scheme=custom``
(``l.w.preset=NVFP4`` alone, a link trimmed by hand) ran the default W8A8 and said nothing:
the user read W int8 numbers as NVFP4's. Now the sides' keys pick the custom scheme; beside
a preset that fixes both sides they are ignored with a warning."""

from __future__ import annotations

import pytest
from markdown_text import plain
from page_runs import open_page

LAYER = "encoder.layer.0.output.dense"


def _scheme_captions(at) -> list[str]:
    return [plain(c.value) for c in at.caption if " · A " in c.value]


@pytest.mark.slow
def test_a_side_without_l_scheme_picks_the_custom_scheme() -> None:
    at = open_page("layer.py", **{"l.layer": LAYER, "l.w.preset": "NVFP4"})
    assert not at.exception, [e.value for e in at.exception]
    captions = _scheme_captions(at)
    assert captions and all(c.startswith("W NVFP4") or "· W NVFP4" in c for c in captions), captions


@pytest.mark.slow
def test_a_side_beside_a_preset_is_ignored_with_a_warning() -> None:
    at = open_page("layer.py", **{"l.layer": LAYER, "l.scheme": "w8a8", "l.w.preset": "NVFP4"})
    assert not at.exception, [e.value for e in at.exception]
    warnings = [plain(w.value) for w in at.warning]
    assert any("l.w" in w and "w8a8" in w.lower() for w in warnings), warnings
