"""AppTest: every sidebar select box's options fit the sidebar (``OPTION_CHARS``); a long
tensor or layer name is shortened with a visible ellipsis, and the picked one's whole line
(name, type, shape) is the caption under its box. Streamlit cut longer options off with no
ellipsis (``token_embd.weight  F32 [64, 512`` read as whole)."""

from __future__ import annotations

import pytest
from markdown_text import plain
from page_runs import open_page
from streamlit.testing.v1 import AppTest

from dashboard.services.display.options import ELLIPSIS, OPTION_CHARS

NOT_OURS: set[str] = set()
"""Select boxes left out of the check (none: the source kind picker fits since the
seventh stop)."""


def _too_long(at: AppTest) -> dict[str, list[str]]:
    out = {}
    for box in at.sidebar.selectbox:
        if box.key in NOT_OURS:
            continue
        long = [o for o in box.options if len(o) > OPTION_CHARS]
        if long:
            out[box.key] = long
    return out


@pytest.mark.parametrize(
    ("page", "query"),
    [
        # the bundled model's tensors, a custom scheme with groups (scale storage offered)
        ("explorer.py", {"src": "model", "gran": "group", "group": "64", "sdtype": "fp16"}),
        ("explorer.py", {"src": "act", "gran": "group", "group": "64"}),
        ("layer.py", {"l.scheme": "custom", "l.w.gran": "group", "l.w.group": "64"}),
        ("model.py", {}),
    ],
    ids=["explorer-model", "explorer-act", "layer", "model"],
)
def test_sidebar_options_fit(page: str, query: dict[str, str]) -> None:
    at = open_page(page, **query)
    assert not at.exception, [e.value for e in at.exception]
    assert _too_long(at) == {}


def test_a_long_layer_name_is_shortened_and_said_whole_under_the_box() -> None:
    at = open_page("layer.py", **{"l.layer": "encoder.layer.0.attention.self.query"})
    assert not at.exception, [e.value for e in at.exception]
    box = at.sidebar.selectbox(key="l_layer")
    assert box.value == "encoder.layer.0.attention.self.query"
    shown = box.options[box.index]
    assert len(shown) <= OPTION_CHARS and ELLIPSIS in shown and shown.endswith("self.query")
    assert len(set(box.options)) == len(box.options)  # every layer still tells apart
    captions = [plain(c.value) for c in at.sidebar.caption]
    assert "encoder.layer.0.attention.self.query · 384 → 384 features" in captions, captions


def test_scale_storage_options_are_short_and_the_picked_one_is_said_whole() -> None:
    at = open_page("explorer.py", src="model", gran="group", group="64", sdtype="fp16")
    at.sidebar.selectbox(key="q_sstore").set_value("fp8").run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [plain(c.value) for c in at.sidebar.caption]
    assert "FP8 E4M3 per block + fp32 per tensor (NVFP4)" in captions, captions
