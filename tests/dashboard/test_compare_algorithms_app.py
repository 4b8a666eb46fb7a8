"""AppTest: the sweep's algorithm dimension and output-error axis, A/B with an algorithm per
side, and both pages' URL state (seeding, warnings on values the page changes, new
addresses as Back/Forward bring them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.compare.frontier import ErrorAxis
from dashboard.services.state.scheme import GranularityKind
from quant_core import Algorithm

PAGES = Path(__file__).resolve().parents[2] / "dashboard" / "views"
LAYER = "encoder.layer.0.attention.self.query.weight"


def open_page(page: str, **query: str) -> AppTest:
    at = AppTest.from_file(str(PAGES / page), default_timeout=300)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def set_address(at: AppTest, query: dict[str, str]) -> AppTest:
    """Replace the address, as Back/Forward do, and rerun."""
    for k in list(at.query_params):
        del at.query_params[k]
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def sweep_link(**grid: str) -> dict[str, str]:
    return {f"sw.{k}": v for k, v in grid.items()}


@pytest.mark.slow
def test_sweep_algorithm_dimension_on_a_model_layer() -> None:
    link = sweep_link(
        bits="4",
        modes="symmetric",
        gran="channel",
        groups="32",
        fmt="int",
        algo="rtn,gptq,hqq",
        range="minmax",
        sdtype="fp16",
        y="output_mse",
    )
    at = open_page("sweep.py", src="model", tensor=LAYER, **link)
    no_errors(at)
    assert not at.warning
    frame = at.dataframe[0].value
    assert sorted(frame["algorithm"]) == ["GPTQ (damp 0.1, act-order)", "HQQ", "RTN"]
    assert (frame["output_mse"] > 0).all() and "on_output_frontier" in frame.columns
    captions = " ".join(plain(c.value) for c in at.caption)
    assert "calibrate on its inputs over 36 sentences" in captions
    assert "Click a point" in captions  # the open panel, before a point is picked
    assert "frontier" in plain(at.info[0].value)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert fig["layout"]["yaxis"]["title"]["text"] == "output MSE (held-out)"
    names = [t["name"] for t in fig["data"]]
    # one point trace per format and algorithm, then the two frontiers
    assert names == ["int · RTN", "int · GPTQ", "int · HQQ", "frontier", "weight MSE frontier"]
    assert {k: at.query_params[k] for k in link} == link


def test_sweep_explains_calibrated_algorithms_on_a_synthetic_tensor() -> None:
    link = sweep_link(bits="4", modes="symmetric", gran="tensor", fmt="int", algo="rtn,gptq")
    at = open_page("sweep.py", src="synthetic", rows="16", cols="64", **link)
    no_errors(at)
    warned = " ".join(plain(w.value) for w in at.warning)
    assert "GPTQ chooses codes from a linear layer's inputs (calibration data)" in warned
    assert "this tensor has none" in warned and "left out" in warned
    assert at.multiselect(key="sw_algos").options == ["RTN", "HQQ"]
    assert "GPTQ and AWQ are not offered" in " ".join(plain(c.value) for c in at.caption)
    assert list(at.dataframe[0].value["algorithm"]) == ["RTN"]
    assert at.query_params["sw.algo"] == "rtn"  # the URL holds what the page ran
    assert at.radio(key="sw_axis").options == ["weight MSE", "weight SQNR (dB)"]


def test_sweep_url_seeds_the_grid_warns_and_follows_new_addresses() -> None:
    link = sweep_link(
        bits="4,8",
        modes="asymmetric",
        gran="tensor,group",
        groups="16,100",
        fmt="int",
        algo="rtn,hqq",
        range="mse",
        sdtype="bf16",
        y="sqnr_db",
    )
    where = {"src": "synthetic", "rows": "16", "cols": "64"}
    at = open_page("sweep.py", **where, **link)
    no_errors(at)
    assert [plain(w.value) for w in at.warning] == [
        "Link: group size 100 does not divide the 64 columns; left out."
    ]
    assert at.multiselect(key="sw_bits").value == [4, 8]
    assert at.multiselect(key="sw_groups").value == [16]
    assert at.radio(key="sw_axis").value == ErrorAxis.SQNR_DB
    frame = at.dataframe[0].value
    assert len(frame) == 2 * 2 * 2  # bits x (per tensor, g16) x (RTN, HQQ), asymmetric
    assert set(frame["range"]) == {"mse"} and set(frame["scale_dtype"]) == {"bf16"}
    assert at.query_params["sw.groups"] == "16"  # the page's value, which it warned about
    kept = {k: v for k, v in link.items() if k != "sw.groups"}
    assert {k: at.query_params[k] for k in kept} == kept

    # A new address (Back/Forward): its grid replaces the one shown; a bad value warns
    # and that part takes the default.
    set_address(at, {**where, **sweep_link(bits="3,99", gran="tensor", fmt="int")})
    no_errors(at)
    assert "sw.bits holds '99'" in plain(at.warning[0].value)
    assert at.multiselect(key="sw_kinds").value == [GranularityKind.TENSOR]
    assert len(at.dataframe[0].value) == 5 * 2  # default bits (2, 3, 4, 6, 8), both modes

    # An address without a grid (the page before any sweep): nothing shows as run.
    set_address(at, where)
    no_errors(at)
    assert not at.dataframe and "Run sweep" in plain(at.info[0].value)


@pytest.mark.slow
def test_ab_gptq_on_one_side_of_a_model_layer() -> None:
    at = open_page("ab.py", src="model", tensor=LAYER, **{"b.algo": "gptq", "a.bits": "8"})
    no_errors(at)
    assert at.selectbox(key="b_a_algo").value is Algorithm.GPTQ
    table = at.dataframe[0].value
    assert list(table["algorithm"]) == ["RTN", "GPTQ (damp 0.1, act-order)"]
    assert (table["output MSE (held-out)"] > 0).all()
    text = [m.value for m in at.markdown]
    head = next(t for t in text if "bits/el" in t)
    assert head.startswith("**B**: ") and "vs **A**: 8" in head and "B costs" in head
    assert any(t.startswith("Layer output on held-out sentences:") for t in text)
    assert at.query_params["b.algo"] == "gptq" and at.query_params["a.bits"] == "8"


def test_ab_url_seeds_both_sides_and_warns_on_changed_values() -> None:
    link = {
        "a.bits": "8",
        "a.gran": "channel",
        "a.axis": "1",
        "b.gran": "group",
        "b.group": "100",
        "b.mode": "asymmetric",
        "b.algo": "hqq",
        "b.sdtype": "fp16",
    }
    at = open_page("ab.py", src="synthetic", rows="32", cols="64", **link)
    no_errors(at)
    assert at.slider(key="a_q_bits").value == 8
    assert at.selectbox(key="b_a_algo").value is Algorithm.HQQ
    warned = [plain(w.value) for w in at.warning]
    assert warned == ["Link: b.group=100 does not fit 64 columns; using 64."]
    assert at.query_params["b.group"] == "64" and at.query_params["b.algo"] == "hqq"
    assert at.query_params["a.axis"] == "1" and at.query_params["b.sdtype"] == "fp16"
    assert list(at.dataframe[0].value["algorithm"]) == ["RTN", "HQQ"]

    # Back to an address where B was RTN at 8 bits: the algorithm comes back too.
    query = {k: at.query_params[k] for k in at.query_params}
    query = {k: v for k, v in query.items() if k != "b.algo"} | {"b.bits": "8"}
    set_address(at, query)
    no_errors(at)
    assert at.selectbox(key="b_a_algo").value is Algorithm.RTN
    assert at.slider(key="b_q_bits").value == 8 and "b.algo" not in at.query_params

    bad = open_page("ab.py", src="synthetic", rows="32", cols="64", **{"b.mode": "sideways"})
    no_errors(bad)
    assert plain(bad.warning[0].value).startswith(
        "Ignored the link's scheme B config (b.mode="
    )


def test_ab_explains_why_gptq_cannot_run_on_a_synthetic_tensor() -> None:
    at = open_page("ab.py", src="synthetic", rows="32", cols="64")
    no_errors(at)
    head = next(m.value for m in at.markdown if "bits/el" in m.value)
    assert "**A**: 4.25 bits/el" in head and " — A costs " in head  # 4 + 16/64 (fp16 scales)
    assert at.selectbox(key="a_a_algo").options == ["RTN", "HQQ"]
    assert "GPTQ and AWQ are not offered" in " ".join(plain(c.value) for c in at.caption)
    # a link asking GPTQ for a tensor with no model: the reason, and RTN
    linked = open_page("ab.py", src="synthetic", rows="32", cols="64", **{"a.algo": "gptq"})
    no_errors(linked)
    assert "this tensor has none" in plain(linked.warning[0].value)
    assert list(linked.dataframe[0].value["algorithm"]) == ["RTN", "RTN"]
    assert "a.algo" not in linked.query_params


def test_explorer_query_carries_source_config_and_algorithm() -> None:
    from dashboard.components.open_scheme import _travels, explorer_link, explorer_query
    from dashboard.services.compare.weights import WeightScheme
    from dashboard.services.sources.choice import ModelSource, UploadSource
    from dashboard.services.state.algorithm import algorithm_from_query
    from dashboard.services.state.scheme import config_from_query
    from quant_core import PerGroup, QuantConfig

    choice = ModelSource(LAYER)
    scheme = WeightScheme(QuantConfig(bits=4, granularity=PerGroup(32)), Algorithm.GPTQ)
    query = explorer_query(choice, scheme, custom_calibration=True)
    assert query["src"] == "model" and query["tensor"] == LAYER
    assert config_from_query(query) == scheme.config
    assert algorithm_from_query(query).algorithm is Algorithm.GPTQ
    assert query["algo"] == "gptq" and query["damp"] == "0.1" and query["calib"] == "custom"
    assert "calib" not in explorer_query(choice, WeightScheme(scheme.config))
    assert _travels(choice) and not _travels(UploadSource("id", "w.pt", None))

    class Source:  # the field explorer_link reads of a PreparedSource
        def __init__(self, choice) -> None:
            self.choice = choice

    link = explorer_link(Source(choice), scheme)  # type: ignore[arg-type]
    assert link.startswith("./?src=model&tensor=encoder.layer.0") and "&algo=gptq&" in link
