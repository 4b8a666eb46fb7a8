"""Defects a demanding user hit on the A/B page (defect pass 8), each with the run that
showed it."""

from __future__ import annotations

import json

import torch
from markdown_text import plain
from page_runs import open_page

from dashboard.services.compare.ab import compare_ab
from dashboard.services.compare.ab_figures import ab_winner_figure
from dashboard.services.compare.ab_summary import block_unit
from quant_core import Mode, PerChannel, PerGroup, PerTensor, QuantConfig

SOURCE = {"src": "synthetic", "rows": "64", "cols": "256"}


def test_blocks_won_says_what_a_block_is() -> None:
    """Per channel against per group of 32 (the page's defaults): "Blocks won (lower MSE
    per block): A 7, B 505, ties 0 of 512": 512 of what? The blocks are B's groups of 32
    values, and neither the headline nor the winner map said so."""
    at = open_page("ab.py", **SOURCE)
    assert not at.exception, [e.value for e in at.exception]
    won = next(plain(m.value) for m in at.markdown if "Blocks won" in plain(m.value))
    assert won.startswith(
        "Blocks won (lower MSE in each group of 32 values, scheme B's groups): A "
    ), won
    assert won.endswith("of 512."), won
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert any(
        t.startswith("Lower MSE in each group of 32 values, scheme B's groups:") for t in titles
    )


def test_block_unit_names_the_blocks_of_every_pairing() -> None:
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(0))
    sym = QuantConfig(4, Mode.SYMMETRIC, PerTensor())
    both = compare_ab(
        x, QuantConfig(4, granularity=PerGroup(32)), QuantConfig(8, granularity=PerGroup(32))
    )
    assert block_unit(both) == "group of 32 values, both schemes' groups"
    a_only = compare_ab(
        x, QuantConfig(4, granularity=PerGroup(16)), QuantConfig(4, granularity=PerGroup(32))
    )
    assert block_unit(a_only) == "group of 16 values, scheme A's groups"
    rows = compare_ab(x, sym, QuantConfig(4, granularity=PerChannel(0)))
    assert block_unit(rows) == "row of 64 values"
    assert ab_winner_figure(rows).layout.title.text.startswith(
        "Lower MSE in each row of 64 values:"
    )


def test_the_calibration_note_counts_the_sentences_of_the_side_that_calibrates() -> None:
    """Scheme B GPTQ on three sentences of the learner's own, A RTN: the page said "GPTQ
    and AWQ calibrate on its inputs over 36 sentences" (A's bundled sentences, which RTN
    never uses)."""
    from dashboard.services.compare.weights import ab_calibration_note
    from dashboard.services.state.algorithm import AlgorithmChoice
    from quant_core import Algorithm
    from quant_core.calibration import CALIBRATION_SENTENCES

    layer = "encoder.layer.0.attention.self.query"
    rtn = AlgorithmChoice(algorithm=Algorithm.RTN)
    own = ("One.", "Two.", "Three.")
    gptq = AlgorithmChoice(algorithm=Algorithm.GPTQ, calibration=own, custom_calibration=True)
    awq = AlgorithmChoice(algorithm=Algorithm.AWQ)
    n = len(CALIBRATION_SENTENCES)

    note = plain(ab_calibration_note(layer, rtn, gptq, 18))
    assert "calibrate on its inputs over 3 sentences" in note, note
    assert f"over {n} sentences" not in note, note

    note = plain(ab_calibration_note(layer, awq, gptq, 18))
    assert f"scheme A's AWQ over {n} sentences, scheme B's GPTQ over 3" in note, note

    note = plain(ab_calibration_note(layer, rtn, rtn, 18))
    assert f"calibrate on its inputs over {n} sentences" in note, note
    assert "18 held-out sentences" in note, note
