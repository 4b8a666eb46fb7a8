"""Defect: the Layer page, opened with ``l.scheme=custom&l.a.gran=group&l.a.group=32``
(activations take no groups), warned "Link: gran=group is not available here; using
tensor." and "Link: group=32 is not available here; using (none).": the bare keys (the
link holds ``l.a.gran``) and "(none)". Each line now names the link's key, and a value the
picker drops says so in words."""

from __future__ import annotations

import pytest
from markdown_text import plain
from page_runs import open_page

from dashboard.services.state.link_fixes import link_fixes
from quant_core import PerGroup, PerTensor, QuantConfig


def test_a_dropped_value_is_said_in_words() -> None:
    wanted = QuantConfig(bits=8, granularity=PerGroup(32))
    got = QuantConfig(bits=8, granularity=PerTensor())
    fixes = link_fixes(wanted, got, 64, "l.a.")
    assert "l.a.gran=group is not available here; using tensor" in fixes, fixes
    assert not [f for f in fixes if "(none)" in f], fixes
    assert [f for f in fixes if f.startswith("l.a.group=32")], fixes


@pytest.mark.slow
def test_the_layer_page_names_the_activation_keys() -> None:
    at = open_page(
        "layer.py", **{"l.scheme": "custom", "l.a.gran": "group", "l.a.group": "32"}
    )
    assert not at.exception, [e.value for e in at.exception]
    warnings = [plain(w.value) for w in at.warning]
    assert any("l.a.gran=group" in w for w in warnings), warnings
    assert any("l.a.group=32" in w for w in warnings), warnings
    assert not [w for w in warnings if "(none)" in w], warnings
