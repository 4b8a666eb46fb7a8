"""Defects a demanding user hit on the Sweep page (defect pass 8), each with the run that
showed it."""

from __future__ import annotations

from markdown_text import plain
from page_runs import open_page

from dashboard.services.state.compare import sweep_from_query

SOURCE = {"src": "synthetic", "rows": "16", "cols": "64"}


def test_a_link_whose_shipped_formats_are_all_refused_keeps_the_page_formats() -> None:
    """``sw.fmt=`` beside ``sw.presets`` holding only a name the registry does not know (a
    typo, a renamed format): the presets were ignored but the empty format list was taken
    as "none", so the grid was empty and the page said "No scheme of this grid can run on
    this tensor (see why above)" with nothing above saying why."""
    q = sweep_from_query({"sw.fmt": "", "sw.gran": "", "sw.presets": "Q4_KM"})
    assert q.presets is None and q.formats is None and q.kinds is None
    assert [p.split(" ")[0] for p in q.problems] == ["sw.presets", "sw.gran", "sw.fmt"]

    at = open_page("sweep.py", **SOURCE, **{"sw.fmt": "", "sw.gran": "", "sw.presets": "Q4_KM"})
    assert not at.exception, [e.value for e in at.exception]
    warned = [plain(w.value) for w in at.warning]
    assert any("sw.presets holds 'Q4_KM'" in w for w in warned), warned
    assert not any("No scheme of this grid" in w for w in warned), warned
    assert at.multiselect(key="sw_formats").value  # the page's formats stand
    # nothing usable was left of the link's grid: the form waits for a run
    assert [plain(i.value) for i in at.info] == ["Pick the schemes to compare and press Run sweep."]


def test_the_frontier_difference_keeps_labels_with_commas_apart() -> None:
    """Scheme labels hold commas ("int4 sym g32, fp16 scales · GPTQ"), and the sentence
    joined them with commas: "Only on the output MSE (held-out) frontier: int4 sym g32,
    fp16 scales · GPTQ, int4 sym g128, fp16 scales · GPTQ, NF4_DQ · AWQ." did not say
    where one scheme ended and the next began."""
    from dashboard.services.compare.frontier import ErrorAxis, FrontierDifference

    diff = FrontierDifference(
        ErrorAxis.MSE,
        ErrorAxis.OUTPUT_MSE,
        first_only=("int4 sym g128, fp16 scales · HQQ",),
        second_only=("int4 sym g32, fp16 scales · GPTQ", "NF4_DQ · AWQ"),
        both=(),
    )
    text = plain(diff.describe())
    assert (
        "Only on the output MSE (held-out) frontier: int4 sym g32, fp16 scales · GPTQ; "
        "NF4_DQ · AWQ." in text
    ), text
    assert "Only on the weight MSE frontier: int4 sym g128, fp16 scales · HQQ." in text


def test_the_time_column_is_not_headed_s() -> None:
    """The sweep table headed the algorithm's wall time "s", the letter every other page
    (and this page's formulas, s = max|r| / q_max) gives the scale: a learner read the
    column as each scheme's scale."""
    import json

    at = open_page(
        "sweep.py",
        **SOURCE,
        **{"sw.bits": "4", "sw.fmt": "int", "sw.gran": "tensor", "sw.modes": "symmetric"},
    )
    assert not at.exception, [e.value for e in at.exception]
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["seconds"]["label"] == "time (s)", columns["seconds"]
    assert "s" not in {c.get("label") for c in columns.values()}


def test_the_code_width_column_is_not_read_as_bits_per_element() -> None:
    """The sweep table headed the codes' width "bits" beside "bits/elem": TQ1_0's row read
    bits 2 and bits/elem 1.6875, and a user took the first for what the layout spends."""
    import json

    link = {"sw.bits": "4", "sw.fmt": "int", "sw.gran": "tensor", "sw.modes": "symmetric"}
    at = open_page("sweep.py", **{**SOURCE, "cols": "256"}, **link, **{"sw.presets": "TQ1_0"})
    assert not at.exception, [e.value for e in at.exception]
    columns = json.loads(at.dataframe[0].proto.columns)
    assert columns["bits"]["label"] == "code bits", columns["bits"]
    assert columns["bits_per_element"]["label"] == "bits/elem"
    tq1 = at.dataframe[0].value.set_index("scheme").loc["TQ1_0"]
    assert (tq1["bits"], tq1["bits_per_element"]) == (2, 1.6875)
