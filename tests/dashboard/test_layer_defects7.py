"""AppTest: defects a demanding user hit on the Layer outputs page with the shipped formats
(issue 25), each with the run that showed it."""

from __future__ import annotations

import pytest
from markdown_text import plain
from page_runs import open_page

from dashboard.services.display.labels import scheme_text
from quant_core import LayerScheme, QuantConfig, SchemePreset

QUERY = "encoder.layer.0.attention.self.query"


@pytest.mark.parametrize("name", ["Q4_K", "MXFP4", "NVFP4", "NF4_DQ", "BITNET"])
def test_a_shipped_weight_format_is_named_by_its_name(name: str) -> None:
    cfg = QuantConfig.from_name(name)
    text = scheme_text(LayerScheme(weight=cfg, activation=SchemePreset.W8A8.scheme.activation))
    assert text.startswith(f"W {name} · A int8 sym"), text
    assert cfg.describe() not in text


def test_a_plain_scheme_reads_as_before() -> None:
    scheme = SchemePreset.W8A8.scheme
    assert scheme_text(scheme) == scheme.describe()
    assert scheme_text(LayerScheme(weight=None, activation=None)) == "W float · A float"


@pytest.mark.slow
def test_the_page_names_mxfp4_weights_as_the_other_pages_do() -> None:
    """MXFP4 weights picked on the Layer outputs page were described as
    "W fp4_e2m1 g32 s:e8m0 · A int8 ..." in the sidebar and above the metrics, where the
    sweep, A/B and whole-model pages (and the picker itself) say "MXFP4"."""
    at = open_page(
        "layer.py", **{"l.layer": QUERY, "l.scheme": "custom", "l.w.preset": "MXFP4"}
    )
    assert not at.exception, [e.value for e in at.exception]
    captions = [plain(c.value) for c in at.caption]
    described = [c for c in captions if " · A int8" in c]
    assert len(described) == 2, captions  # the sidebar's and the page's
    assert all("W MXFP4 · A int8 sym" in c for c in described), described
    assert not any("fp4_e2m1 g32" in c for c in captions), captions
