"""AppTest: the sweep, A/B and whole-model pages run and their controls act."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.compare.frontier import POINTS_META, pareto_mask
from dashboard.services.state.scheme import GranularityKind
from quant_core import Format, ZeroPoint

PAGES = Path(__file__).resolve().parents[2] / "dashboard" / "views"


def open_page(page: str, **query: str) -> AppTest:
    """Run one page script on its own, starting from the URL ``query``.

    (AppTest's ``switch_page`` does not carry widget state across pages the way the browser
    does; the browser test covers page switching.)
    """
    at = AppTest.from_file(str(PAGES / page), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def figure(at: AppTest, index: int) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def decode(arr) -> np.ndarray:
    """Plotly's typed-array JSON (``{"dtype", "bdata"}``) or a plain list, as numpy."""
    if isinstance(arr, dict):
        import base64

        return np.frombuffer(base64.b64decode(arr["bdata"]), dtype=arr["dtype"])
    return np.asarray(arr, dtype=float)


def test_sweep_runs_and_frontier_is_non_dominated() -> None:
    at = open_page("sweep.py", src="synthetic", rows="64", cols="128")
    no_errors(at)
    assert "[64, 128]" in plain(at.caption[0].value)
    at.button[0].click().run()  # "Run sweep" with the default grid
    no_errors(at)
    frame = at.dataframe[0].value
    assert len(frame) >= 10
    fig = figure(at, 0)
    traces = {t["name"]: t for t in fig["data"]}
    front = traces["frontier"]
    fx, fy = decode(front["x"]), decode(front["y"])
    points = [t for t in fig["data"] if t.get("meta") == POINTS_META]
    all_x = np.concatenate([decode(t["x"]) for t in points])
    all_y = np.concatenate([decode(t["y"]) for t in points])
    # the frontier joins exactly the points no other point dominates
    mask = np.asarray(pareto_mask(all_x.tolist(), all_y.tolist()))
    assert sorted(zip(fx, fy, strict=True)) == sorted(zip(all_x[mask], all_y[mask], strict=True))


def test_sweep_legend_names_formats_as_the_format_picker_does() -> None:
    """The picker offers "NF4" and "FP4 E2M1"; the legend said "nf4 · RTN", "fp4_e2m1 · RTN"."""
    at = open_page(
        "sweep.py",
        src="synthetic",
        rows="16",
        cols="64",
        **{"sw.bits": "4", "sw.modes": "symmetric", "sw.gran": "group", "sw.groups": "32",
           "sw.fmt": "int,nf4,fp4_e2m1", "sw.algo": "rtn"},
    )  # fmt: skip
    no_errors(at)
    names = [t["name"] for t in figure(at, 0)["data"]]
    assert names[:3] == ["int · RTN", "NF4 · RTN", "FP4 E2M1 · RTN"], names


def test_sweep_names_llama_quantizes_type_for_a_skipped_gguf_type() -> None:
    """Q4_K on rows of 384 values is skipped; the explorer and the whole-model report use
    Q5_0 there (llama-quantize's fallback), which the sweep's reason did not mention."""
    at = open_page(
        "sweep.py",
        src="synthetic",
        rows="16",
        cols="384",
        **{"sw.presets": "Q4_K,Q8_0", "sw.fmt": "int", "sw.bits": "4",
           "sw.modes": "symmetric", "sw.gran": "channel", "sw.algo": "rtn"},
    )  # fmt: skip
    no_errors(at)
    (skip,) = [plain(c.value) for c in at.caption if c.value.startswith("Skipped Q4")]
    assert "llama-quantize stores such a tensor as Q5_0" in skip, skip
    assert not any("Skipped Q8_0" in plain(c.value) for c in at.caption)


def test_sweep_grid_controls_act() -> None:
    at = open_page("sweep.py", src="example", ex="random_4x4")
    at.multiselect(key="sw_formats").set_value([Format.INT])
    at.multiselect(key="sw_bits").set_value([4, 8])
    at.multiselect(key="sw_kinds").set_value([])
    at.button[0].click().run()
    no_errors(at)
    # an empty granularity list runs nothing and says what is missing
    assert "granularities" in plain(at.warning[0].value) and not at.dataframe
    at.multiselect(key="sw_kinds").set_value([GranularityKind.TENSOR])
    at.button[0].click().run()
    no_errors(at)
    # 2 bits x 2 modes x per-tensor = 4 schemes
    assert len(at.dataframe[0].value) == 4
    # Every zero-point convention: the asymmetric schemes run once under each.
    at.multiselect(key="sw_zps").set_value(list(ZeroPoint))
    at.button[0].click().run()
    no_errors(at)
    table = at.dataframe[0].value
    assert len(table) == 2 + 2 * 3
    asym = table[table["mode"] == "asymmetric"]
    assert sorted(asym["zero_point"]) == sorted(2 * [z.value for z in ZeroPoint])


def test_sweep_link_carries_zero_point_conventions() -> None:
    at = open_page(
        "sweep.py", src="example", ex="random_4x4", **{"sw.zp": "course_clamp,float_min"}
    )
    no_errors(at)
    assert at.multiselect(key="sw_zps").value == [ZeroPoint.COURSE_CLAMP, ZeroPoint.FLOAT_MIN]


def test_ab_offers_llama_quantizes_fallback_for_the_side_that_does_not_fit() -> None:
    """Q4_K on rows of 384 values: the explorer offers Q5_0 (llama-quantize's type for such
    a tensor); A/B stopped at the error with nothing to click."""
    at = open_page("ab.py", src="synthetic", rows="32", cols="384", **{"b.preset": "Q4_K"})
    assert not at.exception
    assert [plain(e.value) for e in at.error] == [
        "Scheme B cannot quantize this tensor: Q4_K stores its scales per super-block of 256 "
        "values: rows of 384 values (shape (32, 384)) do not divide into super-blocks of 256"
    ]
    buttons = [b for b in at.button if b.key.startswith("ab_fallback_")]
    assert [b.label for b in buttons] == [
        "Use Q5_0 for B, llama-quantize's type for such a tensor"
    ]
    buttons[0].click().run()
    no_errors(at)
    assert at.selectbox(key="b_q_preset").value == "Q5_0"
    assert at.dataframe[0].value["scheme"].tolist()[1] == "Q5_0"


def test_ab_names_every_side_that_does_not_fit_before_running() -> None:
    """Both sides Q4_K and Q6_K on rows of 384: the page named only the side that failed
    first (A), yet offered a button for each; each side now says why, with its button."""
    at = open_page(
        "ab.py", src="synthetic", rows="32", cols="384", **{"a.preset": "Q4_K", "b.preset": "Q6_K"}
    )
    assert not at.exception
    errors = [plain(e.value) for e in at.error]
    assert [e.split(":")[0] for e in errors] == [
        "Scheme A cannot quantize this tensor",
        "Scheme B cannot quantize this tensor",
    ]
    assert "Q4_K stores" in errors[0] and "Q6_K stores" in errors[1], errors
    assert [b.label for b in at.button if b.key.startswith("ab_fallback_")] == [
        "Use Q5_0 for A, llama-quantize's type for such a tensor",
        "Use Q8_0 for B, llama-quantize's type for such a tensor",
    ]


def test_ab_runs_with_shared_scale_and_totals() -> None:
    at = open_page("ab.py", src="synthetic", rows="32", cols="64")
    no_errors(at)
    assert "[32, 64]" in plain(at.caption[0].value)
    fig = figure(at, 0)
    heat = [t for t in fig["data"] if t["type"] == "heatmap"]
    assert len(heat) == 2
    text = " ".join(m.value for m in at.markdown)
    assert "Blocks won" in text
    before = at.dataframe[0].value["MSE"].tolist()
    at.slider(key="b_q_bits").set_value(8).run()
    no_errors(at)
    after = at.dataframe[0].value["MSE"].tolist()
    assert after[0] == pytest.approx(before[0]) and after[1] < before[1]
