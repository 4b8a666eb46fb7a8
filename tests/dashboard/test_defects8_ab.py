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


def _layer(out: int = 8, features: int = 32, tokens: int = 4):
    from dashboard.services.activations.layer import LayerInputs

    g = torch.Generator().manual_seed(0)
    return LayerInputs(
        name="toy",
        weight=torch.randn(out, features, generator=g),
        bias=None,
        x_calib=torch.randn(tokens, features, generator=g),
        x_eval=torch.randn(16, features, generator=g),
    )


def test_an_algorithm_s_warnings_reach_the_a_b_result_and_the_sweep() -> None:
    """GPTQ calibrated on fewer tokens than the layer has input features (three sentences
    of one's own on MiniLM: 23 tokens for 384 features) warns that only the dampening makes
    its Hessian invertible. The explorer shows that warning; A/B and the sweep dropped it
    (it reached the server's log only)."""
    import warnings

    from dashboard.services.compare.sweep import run_sweep
    from dashboard.services.compare.weights import WeightScheme
    from quant_core import Algorithm, AlgorithmWarning

    layer = _layer()
    cfg = QuantConfig(4, Mode.SYMMETRIC, PerGroup(16))
    gptq = WeightScheme(cfg, Algorithm.GPTQ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AlgorithmWarning)
        ab = compare_ab(layer.weight, cfg, gptq, layer_a=layer, layer_b=layer)
        swept = run_sweep(layer.weight, [cfg, gptq], inputs=layer)
    assert ab.warnings_a == ()
    assert any("calibration tokens" in w for w in ab.warnings_b), ab.warnings_b
    by_algo = {r.scheme.algorithm: r.warnings for r in swept.results}
    assert by_algo[Algorithm.RTN] == ()
    assert any("calibration tokens" in w for w in by_algo[Algorithm.GPTQ])


def test_the_a_b_page_shows_gptq_s_warning_on_three_own_sentences() -> None:
    from quant_core import Algorithm

    at = open_page("ab.py", src="model", tensor="encoder.layer.0.attention.self.query.weight")
    at.selectbox(key="b_a_algo").set_value(Algorithm.GPTQ).run()
    at.checkbox(key="b_a_custom").check().run()
    at.text_area(key="b_a_text").set_value("The cat sat.\nA second one here.\nA third.").run()
    assert not at.exception, [e.value for e in at.exception]
    warned = [plain(w.value) for w in at.warning]
    assert any(
        w.startswith("Scheme B (GPTQ): GPTQ:") and "calibration tokens for 384 input features" in w
        for w in warned
    ), warned
    note = next(plain(c.value) for c in at.caption if "held-out sentences" in plain(c.value))
    assert "over 3 sentences" in note, note
