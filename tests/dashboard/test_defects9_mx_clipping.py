"""Defect: MXFP4 weights gave MiniLM's output.dense about 250x Q4_K's output error on the
Layer outputs page with no reason shown. OCP MX's E8M0 scale is ``2^(floor(log2 amax) -
2)`` (torchao's ScaleCalculationMode.FLOOR, llama.cpp's quantize_row_mxfp4_ref), so a
block's largest values above ``6 * 2^e`` clip; the page now says how many and what they
cost, computed."""

from __future__ import annotations

import pytest
import torch
from markdown_text import plain
from page_runs import open_page

from dashboard.services.activations.mx_clip import mx_clipping
from quant_core import QuantConfig

LAYER = "encoder.layer.0.output.dense"


def test_a_block_above_six_times_its_scale_clips() -> None:
    """One block of 32: amax 7 gives e = floor(log2 7) - 2 = 0, so 7 is stored as 6 and
    is the only clipped value; 3 is a level. x = e_0 gives the output error of w[0] alone."""
    w = torch.zeros(1, 32)
    w[0, 0], w[0, 1] = 7.0, 3.0
    x = torch.zeros(1, 32)
    x[0, 0] = 1.0
    c = mx_clipping(w, x, QuantConfig.from_name("MXFP4"))
    assert c is not None
    assert (c.clipped, c.total, c.blocks, c.n_blocks, c.level, c.emax) == (1, 32, 1, 1, 6.0, 2)
    assert c.clipped_mse == c.output_mse == 1.0  # (7 - 6)^2 on the one output
    assert "8·2^e" in c.describe("MXFP4")


def test_no_note_where_nothing_clips_or_the_format_is_not_mx() -> None:
    w = torch.zeros(1, 32)
    w[0, 0], w[0, 1] = 4.0, 3.0  # 4 = 1.0 * 2^2: the block fits
    x = torch.ones(1, 32)
    assert mx_clipping(w, x, QuantConfig.from_name("MXFP4")) is None
    assert (
        mx_clipping(
            torch.randn(4, 256), x.expand(1, 32).repeat(1, 8), QuantConfig.from_name("Q4_K")
        )
        is None
    )


@pytest.mark.slow
def test_the_layer_page_says_mxfp4_clips_and_what_it_costs() -> None:
    at = open_page("layer.py", **{"l.layer": LAYER, "l.scheme": "custom", "l.w.preset": "MXFP4"})
    assert not at.exception, [e.value for e in at.exception]
    notes = [plain(i.value) for i in at.info if "clips weights" in i.value]
    assert len(notes) == 1, [i.value for i in at.info]
    assert "lie above their block's largest level 6·2^e" in notes[0], notes
    assert "floor(log2(block max |w|)) − 2" in notes[0], notes
    # the note's weight-only output MSE is the page's Weight-only metric's
    (metric,) = [m for m in at.metric if m.label == "Weight-only SQNR"]
    mse = metric.proto.help.split("MSE ")[1].split(",")[0]
    assert f"weight-only output MSE, {mse})" in notes[0], (mse, notes)


@pytest.mark.slow
def test_the_layer_page_has_no_clipping_note_for_q4_k() -> None:
    at = open_page("layer.py", **{"l.layer": LAYER, "l.scheme": "custom", "l.w.preset": "NVFP4"})
    assert not at.exception, [e.value for e in at.exception]
    assert not [i for i in at.info if "clips weights" in i.value]
