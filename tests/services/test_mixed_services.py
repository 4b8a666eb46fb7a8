"""dashboard.services.mixed: URL state, pins, escaping, the figures and notes (plain pytest)."""

from __future__ import annotations

import math

import pytest

from dashboard.services.mixed.figures import (
    HeatMetric,
    allocation_table,
    cell_notes,
    curve_figure,
    heatmap_figure,
    mix_figure,
    weighted_sqnr,
)
from dashboard.services.mixed.state import (
    mixed_from_query,
    mixed_to_query,
    parse_budget,
    parse_pins,
)
from quant_core.mixed import (
    SHIPPED,
    Budget,
    BudgetUnit,
    Objective,
    SensitivityRow,
    allocate,
    allocation_curve,
    build_problem,
    uniform_points,
)

NAN = float("nan")


def cell(tensor: str, scheme: str, bits: int, err: float, out: float | None = None,
         skipped: str | None = None, stored_as: str | None = None) -> SensitivityRow:  # fmt: skip
    ok = skipped is None
    return SensitivityRow(tensor, scheme, (10, 10), 1600, bits if ok else 0,
                          bits / 100 if ok else NAN, 0.0, 0.0, err if ok else NAN, 100.0, True,
                          out, skipped, 0.0, stored_as, None)  # fmt: skip


ROWS = [
    cell("a.weight", "Q4_0", 450, 1.0, out=1e-3),
    cell("a.weight", "Q8_0", 850, 0.01, out=1e-5),
    cell("b.weight", "Q4_0", 450, 10.0),
    cell("b.weight", "Q8_0", 850, 0.0),
]


def test_budget_text_round_trips() -> None:
    for text, budget in (("4.5bpw", Budget(4.5)), ("350MB", Budget(350, BudgetUnit.MEGABYTES)),
                         ("1.2GB", Budget(1.2, BudgetUnit.GIGABYTES))):  # fmt: skip
        assert parse_budget(text) == budget
        assert mixed_to_query(budget, ["Q4_0"], None)["mx.budget"] == text
    for bad in ("", "4.5", "bpw", "-1bpw", "4.5 bpw", "1e3MB", "4.5kB"):
        with pytest.raises(ValueError, match="not a number and a unit"):
            parse_budget(bad)
    with pytest.raises(ValueError, match="positive"):
        parse_budget("0bpw")


def test_query_defaults_and_problems() -> None:
    q = mixed_from_query({})
    assert q.budget == Budget(4.5) and q.candidates == (*SHIPPED, "int4_g128", "int8_pc")
    assert q.floor is None and not q.problems
    q = mixed_from_query({"mx.budget": "9GB", "mx.cands": "Q8_0,Q4_0,nope", "mx.floor": "Q8_0"})
    assert q.budget == Budget(9, BudgetUnit.GIGABYTES)
    assert q.candidates == ("Q4_0", "Q8_0")  # the registry's order
    assert q.floor == "Q8_0"
    assert q.problems == ("mx.cands: unknown scheme(s) 'nope' left out",)
    q = mixed_from_query({"mx.cands": ",,", "mx.floor": "TQ1_0"})
    assert q.candidates == mixed_from_query({}).candidates
    assert len(q.problems) == 2 and q.floor is None


def test_pins_parse_or_name_the_line() -> None:
    pins = parse_pins("# comment\n\nlayers\\.0\\. = Q8_0\nlm_head=Q4_0\n", ["Q4_0", "Q8_0"])
    assert [(p.pattern, p.scheme) for p in pins] == [(r"layers\.0\.", "Q8_0"), ("lm_head", "Q4_0")]
    with pytest.raises(ValueError, match="pin line 2: write PATTERN = scheme"):
        parse_pins("a = Q4_0\njust text", ["Q4_0"])
    with pytest.raises(ValueError, match="pin line 1: 'Q9' is not a chosen scheme"):
        parse_pins("a = Q9", ["Q4_0"])
    with pytest.raises(ValueError, match=r"pin line 1: .*not a valid regular expression"):
        parse_pins("( = Q4_0", ["Q4_0"])


def test_figures_and_table() -> None:
    problem = build_problem(ROWS, objective=Objective.ABSOLUTE)
    alloc = allocate(problem, 1300)
    assert alloc.recipe() == {"a.weight": "Q4_0", "b.weight": "Q8_0"}
    heat = heatmap_figure(ROWS, alloc.recipe())
    z = heat.data[0].z
    assert list(heat.data[0].y) == ["a.weight", "b.weight"]
    assert z[0][0] == pytest.approx(10 * math.log10(100 / 1.0))  # energy 100, error 1
    assert math.isnan(z[1][1])  # exact: infinite SQNR is not drawn
    assert list(zip(heat.data[1].x, heat.data[1].y, strict=True)) == [
        ("Q4_0", "a.weight"),
        ("Q8_0", "b.weight"),
    ]
    out = heatmap_figure(ROWS, None, HeatMetric.OUTPUT_ERROR).data[0].z
    assert out[0][0] == pytest.approx(30.0) and math.isnan(out[1][0])  # b has no inputs
    assert list(mix_figure(alloc).data[0].y) == [107 / 1e6, 57 / 1e6]  # whole bytes per tensor
    curve = curve_figure(allocation_curve(problem, 4), uniform_points(problem), alloc)
    names = ["mixed (allocated)", "uniform schemes", "this allocation"]
    assert [t.name for t in curve.data] == names
    table = allocation_table(ROWS, alloc)
    assert list(table["scheme"]) == ["Q4_0", "Q8_0"]
    assert table["weighted SQNR (dB)"][0] == pytest.approx(20.0)
    assert weighted_sqnr(cell("c", "Q4_0", 0, 0, skipped="no")) != weighted_sqnr(ROWS[0])


def test_allocation_table_says_what_a_fallback_tensor_is_stored_as() -> None:
    """Q4_K on rows its super-blocks do not divide is Q5_0 at 5.5 bits: the row said only
    "Q4_K" beside 5.5 bits per weight."""
    rows = [cell("a", "Q4_K", 550, 1.0, stored_as="Q5_0"), cell("b", "Q4_K", 450, 1.0)]
    alloc = allocate(build_problem(rows, objective=Objective.ABSOLUTE), Budget(5.0))
    table = allocation_table(rows, alloc)
    assert list(table["scheme"]) == ["Q4_K", "Q4_K"]
    assert list(table["stored as"]) == ["Q5_0", ""]
    assert list(table["bits_per_weight"]) == [5.5, 4.5]


def test_cell_notes_name_fallbacks_and_refusals() -> None:
    rows = [
        cell("a", "Q4_K", 550, 1.0, stored_as="Q5_0"),
        cell("b", "Q4_K", 550, 1.0, stored_as="Q5_0"),
        cell("c", "IQ4_XS", 0, 0, skipped="llama.cpp's IQ4_NL quantizer is not ported yet"),
    ]
    assert cell_notes(rows) == (
        "Q4_K is stored as Q5_0 on 2 tensor(s) (llama-quantize's fallback: its blocks do not "
        "divide their rows).",
        "IQ4_XS cannot take 1 tensor(s), e.g.: llama.cpp's IQ4_NL quantizer is not ported yet.",
    )


def test_ray_and_streamlit_stay_out_until_asked_for() -> None:
    """Ray is optional for the app: the runner imports it only when a Ray address is set;
    quant_core.mixed never loads Streamlit, plotly or Ray."""
    import subprocess
    import sys

    code = (
        "import sys, quant_core.mixed, quant_core.mixed.causal, quant_core.mixed.exports; "
        "core = sorted(m for m in sys.modules if m.split('.')[0] in ('streamlit', 'plotly', "
        "'ray')); "
        "import dashboard.services.mixed.runner, dashboard.services.mixed.tasks; "
        "from dashboard.services.mixed.runner import choose_placement; "
        "choose_placement(None, 2); "
        "print(core, 'ray' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == "[] False"
