"""AppTest: defects a demanding user hit on the Sweep page with the shipped formats
(issue 25), each with the run that showed it."""

from __future__ import annotations

from markdown_text import plain
from page_runs import open_page

SOURCE = {"src": "synthetic", "rows": "16", "cols": "64"}


def _sweep_keys(at) -> dict[str, str]:
    return {k: at.query_params[k] for k in at.query_params if k.startswith("sw.")}


def test_a_grid_of_shipped_formats_only_survives_its_own_link() -> None:
    """The grid's formats and granularities cleared, Q4_0 and MXFP4 picked among the
    shipped formats: the page wrote ``sw.fmt=`` and ``sw.gran=`` (empty) into its address.
    Opened again, that link warned "Ignored the link's sw.fmt (sw.fmt is empty)" and
    "... sw.gran ...", and ran the default int and NF4 grid beside the two formats."""
    at = open_page("sweep.py", **SOURCE)
    at.multiselect(key="sw_formats").set_value([])
    at.multiselect(key="sw_kinds").set_value([])
    at.multiselect(key="sw_presets").set_value(["Q4_0", "MXFP4"])
    at.button(key="sw_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert set(at.dataframe[0].value["scheme"]) == {"Q4_0", "MXFP4"}
    link = _sweep_keys(at)
    assert link["sw.fmt"] == "" and link["sw.presets"] == "Q4_0,MXFP4"

    again = open_page("sweep.py", **SOURCE, **link)
    assert not again.exception, [e.value for e in again.exception]
    warned = [plain(w.value) for w in again.warning]
    assert not any("Ignored" in w for w in warned), warned
    assert again.multiselect(key="sw_formats").value == []
    assert again.multiselect(key="sw_presets").value == ["Q4_0", "MXFP4"]
    assert set(again.dataframe[0].value["scheme"]) == {"Q4_0", "MXFP4"}
    assert _sweep_keys(again) == link


def test_an_empty_format_list_without_shipped_formats_is_still_refused() -> None:
    """``sw.fmt=`` alone names no scheme at all: the link's value is ignored, with the
    warning, and the page's formats stand."""
    at = open_page("sweep.py", **SOURCE, **{"sw.fmt": "", "sw.bits": "4"})
    assert not at.exception, [e.value for e in at.exception]
    warned = [plain(w.value) for w in at.warning]
    assert any("sw.fmt is empty" in w for w in warned), warned
    assert at.multiselect(key="sw_formats").value


HUGE = ", ".join(["1e7", "-3e7", "2e7", "5"] * 8)  # 3e7 / 127 is past fp16's 65504
TYPED = {"src": "example", "ex": "typed", "vals": HUGE, "sw.fmt": "", "sw.gran": ""}


def test_schemes_refused_by_their_scale_dtype_are_said_not_dropped() -> None:
    """Q8_0 and Q4_0 (fp16 block scales) on typed values up to 3e7: the sweep refused both
    while running (the scale overflows fp16) and the page showed "0 schemes", an empty
    table and plot, and no reason; beside MXFP4 they simply were not there ("1 schemes")."""
    at = open_page("sweep.py", **TYPED, **{"sw.presets": "Q8_0,Q4_0"})
    assert not at.exception, [e.value for e in at.exception]
    assert [e.label for e in at.expander] == ["2 schemes could not run on these values"]
    reasons = [plain(c.value) for c in at.caption if "overflowed fp16" in plain(c.value)]
    assert [r.split(":", 1)[0] for r in reasons] == ["Q8_0", "Q4_0"], reasons
    warned = [plain(w.value) for w in at.warning]
    assert "No scheme of this grid could run on these values (see why above)." in warned
    assert not at.dataframe and not at.get("plotly_chart")

    at = open_page("sweep.py", **TYPED, **{"sw.presets": "Q8_0,Q4_0,MXFP4"})
    assert not at.exception, [e.value for e in at.exception]
    assert "2 schemes could not run on these values" in [e.label for e in at.expander]
    assert [plain(h.value) for h in at.subheader] == ["1 scheme"]
    assert list(at.dataframe[0].value["scheme"]) == ["MXFP4"]
