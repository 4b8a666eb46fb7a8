"""Defect: a link asking for a shipped format on the activation side (``l.a.preset=MXFP4``),
which the activation picker does not offer (they are weight formats), showed eleven
warnings such as "Link: bits=(none) is not available here; using 4" (keys the link never
held) and ran a per-tensor FP4 activation with one E8M0 scale, which is not MXFP4. Now: one
warning naming the link's key, and the activations keep their default."""

from __future__ import annotations

import pytest
from markdown_text import plain
from page_runs import open_page

LAYER = "encoder.layer.0.output.dense"


def _warnings(at) -> list[str]:
    return [plain(w.value) for w in at.warning]


@pytest.mark.slow
def test_the_layer_page_says_once_that_activations_take_no_shipped_format() -> None:
    at = open_page(
        "layer.py",
        **{"l.layer": LAYER, "l.scheme": "custom", "l.w.preset": "Q8_0", "l.a.preset": "MXFP4"},
    )
    assert not at.exception, [e.value for e in at.exception]
    warnings = _warnings(at)
    assert not [w for w in warnings if "(none)" in w], warnings
    named = [w for w in warnings if "l.a.preset=MXFP4" in w]
    assert len(named) == 1, warnings
    assert not [c for c in at.caption if "A fp4_e2m1 per-tensor" in c.value]
