"""dashboard.services.mixed: URL state, pins, escaping, the figures and notes (plain pytest)."""

from __future__ import annotations

import math
from types import SimpleNamespace

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
from dashboard.services.mixed.point_labels import AxisRange, LabelBox, PlotBox, place_labels
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
    CurvePoint,
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
    assert q.problems == ("mx.cands (unknown scheme 'nope', left out)",)
    q = mixed_from_query({"mx.cands": ",,", "mx.floor": "TQ1_0"})
    assert q.candidates == mixed_from_query({}).candidates
    assert len(q.problems) == 2 and q.floor is None


def test_pins_and_the_importance_toggle_round_trip_through_the_link() -> None:
    """A shared link carried neither: the page it opened allocated without the pins and
    with errors weighed, whatever the sharer saw."""
    pins = "attention\\.self\\.query = int8_pc\n# a comment"
    out = mixed_to_query(Budget(4.5), ["int8_pc"], None, pins, weigh=False)
    assert out["mx.pins"] == pins and out["mx.imp"] == "off"
    q = mixed_from_query(out)
    assert (q.pins, q.weigh, q.problems) == (pins, False, ())
    # the defaults keep a link's old form
    plain_link = mixed_to_query(Budget(4.5), ["int8_pc"], None)
    assert set(plain_link) == {"mx.budget", "mx.cands", "mx.floor"}
    # a link that does not say leaves the page's own (None)
    assert (mixed_from_query({}).pins, mixed_from_query({}).weigh) == (None, None)
    assert mixed_from_query({"mx.imp": "on"}).weigh is True
    q = mixed_from_query({"mx.imp": "maybe", "mx.pins": "x" * 5000})
    assert q.weigh is None and q.pins is None
    assert q.problems == (
        "mx.pins (5,000 characters; at most 4,000); no pins",
        "mx.imp (mx.imp='maybe' is not on or off); weighed",
    )


def test_pins_parse_or_name_the_line() -> None:
    pins = parse_pins("# comment\n\nlayers\\.0\\. = Q8_0\nlm_head=Q4_0\n", ["Q4_0", "Q8_0"])
    assert [(p.pattern, p.scheme) for p in pins] == [(r"layers\.0\.", "Q8_0"), ("lm_head", "Q4_0")]
    with pytest.raises(ValueError, match="pin line 2: write PATTERN = scheme"):
        parse_pins("a = Q4_0\njust text", ["Q4_0"])
    with pytest.raises(ValueError, match="pin line 1: 'Q9' is not a chosen scheme"):
        parse_pins("a = Q9", ["Q4_0"])
    with pytest.raises(ValueError, match=r"pin line 1: .*not a valid regular expression"):
        parse_pins("( = Q4_0", ["Q4_0"])


def test_heatmap_keeps_its_title_clear_of_the_tilted_scheme_names() -> None:
    """In a narrow column (a 1100 px window) plotly tilts the scheme names on the top axis;
    with the title in the plot's margin they ran up into it. The title sits in the
    container with automargin and the top axis has automargin, so plotly moves the plot
    down instead (checked in Chromium at 640 px)."""
    layout = heatmap_figure(ROWS).layout
    assert layout.title.text.startswith("Sensitivity: ")
    assert layout.title.yref == "container" and layout.title.automargin is True
    assert layout.xaxis.side == "top" and layout.xaxis.automargin is True


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
    # drawn at the width its labels were laid out for, whatever the page's width
    assert curve.layout.width == PlotBox().width + 160
    assert (curve.layout.margin.l, curve.layout.margin.r) == (80, 80)
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
    assert list(table["bits per weight"]) == [5.5, 4.5]


def test_cell_notes_name_fallbacks_and_refusals() -> None:
    rows = [
        cell("a", "Q4_K", 550, 1.0, stored_as="Q5_0"),
        cell("b", "Q4_K", 550, 1.0, stored_as="Q5_0"),
        cell("c", "IQ4_XS", 0, 0, skipped="llama.cpp's IQ4_NL quantizer is not ported yet"),
    ]
    assert cell_notes(rows) == (
        "Q4_K is stored as Q5_0 on 2 tensors (llama-quantize's fallback: its super-blocks of 256 "
        "values do not divide their rows).",
        "IQ4_XS cannot take 1 tensor, e.g.: llama.cpp's IQ4_NL quantizer is not ported yet.",
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


def _crowded() -> tuple[list[CurvePoint], list[CurvePoint], SimpleNamespace]:
    """The page's uniform schemes for MiniLM as the exploratory pass saw them: six within
    4.1 to 4.5 bits per weight and 0.25 to 0.45 total error, whose labels were one smudge."""
    points = [
        ("int4_g128", 4.10, 0.35), ("NF4_DQ", 4.13, 0.33), ("MXFP4", 4.25, 0.45),
        ("IQ4_XS", 4.25, 0.25), ("Q4_0", 4.50, 0.30), ("Q4_1", 5.00, 0.20),
        ("Q4_K", 5.35, 0.10), ("Q5_K", 5.90, 0.06), ("int8_pc", 8.05, 0.004),
        ("Q6_K", 8.20, 0.0022), ("Q8_0", 8.50, 0.0014),
    ]  # fmt: skip
    n = 1000
    uniform = [CurvePoint(name, round(b * n), e, b) for name, b, e in points]
    curve = [CurvePoint("", round(b * n), 0.4 * 10 ** (-(b - 4.1)), b) for b in (4.1, 5, 6, 7, 8.5)]
    return curve, uniform, SimpleNamespace(bits_per_weight=4.5, total_error=0.12)


def _label_boxes(fig) -> list[LabelBox]:
    """Each permanent label's box in pixels of the smallest plot the page draws: the
    uniform trace's own text (drawn above its point), or an annotation's, beside its point
    (``xshift``/``yshift``) or at the end of its leader line (``ax``/``ay``, ``ay`` down)."""
    plot = PlotBox()
    xr, yr = AxisRange(*fig.layout.xaxis.range), AxisRange(*fig.layout.yaxis.range)
    w, h, gap = plot.char_width, plot.line_height, plot.marker / 2 + 2
    boxes = []
    trace = next(t for t in fig.data if t.name == "uniform schemes")
    for text, x, y in zip(trace.text or (), trace.x, trace.y, strict=False):
        if text:  # "top center"
            px, py = xr.fraction(x) * plot.width, yr.fraction(math.log10(y)) * plot.height
            boxes.append(
                LabelBox(px - len(text) * w / 2, py + gap, px + len(text) * w / 2, py + gap + h)
            )
    for a in fig.layout.annotations:
        px, py = xr.fraction(a.x) * plot.width, yr.fraction(a.y) * plot.height
        dx, dy = (a.ax, -a.ay) if a.showarrow else (a.xshift or 0, a.yshift or 0)
        cx, cy, half = px + dx, py + dy, len(a.text) * w / 2
        boxes.append(LabelBox(cx - half, cy - h / 2, cx + half, cy + h / 2))
    return boxes


def test_the_curves_point_labels_do_not_overlap() -> None:
    """Uniform schemes' labels were all drawn "top center": the 4-bit ones overlapped. Now
    no two permanent labels' boxes meet, in the smallest plot the page draws, most schemes
    keep one, and every scheme's name is in its hover."""
    curve, uniform, current = _crowded()
    fig = curve_figure(curve, uniform, current)  # type: ignore[arg-type]
    if fig.layout.xaxis.range is None:  # before: plotly's autorange, about the data's extent
        xs = [p.bits_per_weight for p in (*curve, *uniform)] + [current.bits_per_weight]
        ys = [math.log10(p.error) for p in (*curve, *uniform)] + [math.log10(0.12)]
        fig.update_layout(xaxis_range=[min(xs), max(xs)], yaxis_range=[min(ys), max(ys)])
    boxes = _label_boxes(fig)
    assert len(boxes) >= 8, [a.text for a in fig.layout.annotations]
    for i, a in enumerate(boxes):
        assert a.inside(PlotBox()), a
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)
    trace = next(t for t in fig.data if t.name == "uniform schemes")
    assert list(trace.customdata) == [p.label for p in uniform]
    assert "%{customdata}" in trace.hovertemplate
    labelled = {a.text for a in fig.layout.annotations}
    assert labelled <= {p.label for p in uniform}
    if len(labelled) < len(uniform):
        assert "hover a point for its name" in fig.layout.title.text


def test_place_labels_moves_a_label_out_or_leaves_it_to_the_hover() -> None:
    xr, yr = AxisRange(0, 10), AxisRange(0, 10)
    plot = PlotBox(width=200, height=200)
    # two points side by side: the second label goes elsewhere than above
    placed = place_labels([5, 5.2], [5, 5], ["Q4_0", "Q4_1"], xr, yr, plot)
    assert [p.text for p in placed] == ["Q4_0", "Q4_1"]
    assert (placed[0].dx, placed[0].leader) == (0.0, False) and placed[0].dy > 0
    assert (placed[1].dx, placed[1].dy) != (placed[0].dx, placed[0].dy)
    # twenty on one spot: no room for all, the first kept
    names = [f"scheme{i}" for i in range(20)]
    placed = place_labels([5] * 20, [5] * 20, names, xr, yr, plot)
    assert placed[0].text == "scheme0" and len(placed) < 20
    # order says who is placed first
    placed = place_labels([5] * 20, [5] * 20, names, xr, yr, plot, order=range(19, -1, -1))
    assert placed[0].text == "scheme19"
