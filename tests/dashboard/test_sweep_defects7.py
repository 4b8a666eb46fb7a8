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
