"""AppTest: what issue 29 found confusing on the sweep, A/B and whole-model pages (error
digits, the sweep's table and plot, the whole model's sentences, notice and cosine chart)."""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.display.errors import ERROR_FORMAT
from quant_core import ScaleDtype

PAGES = Path(__file__).resolve().parents[2] / "dashboard" / "views"


def open_page(page: str, timeout: int = 120, **query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGES / page), default_timeout=timeout)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def column_formats(frame_element) -> dict[str, str]:
    """Each configured column's number format, from the dataframe element's proto."""
    config = json.loads(frame_element.proto.columns or "{}")
    out = {}
    for name, col in config.items():
        fmt = (col.get("type_config") or {}).get("format")
        if fmt is not None:
            out[name.removeprefix("col:")] = fmt
    return out


def test_ab_table_writes_errors_at_three_significant_digits() -> None:
    at = open_page("ab.py", src="synthetic", rows="32", cols="64")
    no_errors(at)
    formats = column_formats(at.dataframe[0])
    assert formats.get("MSE") == ERROR_FORMAT
    assert formats.get("max abs error") == ERROR_FORMAT


def test_sweep_concludes_and_shows_a_readable_table() -> None:
    at = open_page("sweep.py", src="synthetic", rows="64", cols="128")
    at.button(key="sw_run").click().run()
    no_errors(at)
    said = [plain(m.value) for m in at.markdown]
    assert any(t.startswith("Best at ≤ 4.5 bits per element: ") for t in said), said
    frame = at.dataframe[0]
    # empty cells (no zero point, no group size) blank rather than "None"
    assert frame.proto.HasField("placeholder") and frame.proto.placeholder == ""
    formats = column_formats(frame)
    assert formats.get("mse") == ERROR_FORMAT and formats.get("max_abs") == ERROR_FORMAT
    shown = frame.value
    assert list(shown.columns[:3]) == ["scheme", "mse", "sqnr_db"]
    bits = shown["bits_per_element"].tolist()
    assert bits == sorted(bits)


def test_sweep_grid_chips_wrap_instead_of_being_cut_off() -> None:
    at = open_page("sweep.py", src="synthetic", rows="64", cols="128")
    no_errors(at)
    boxes = at.get("multiselect")
    assert len(boxes) >= 8
    # in a column, a multiselect's chips otherwise stay on one row that scrolls sideways
    unwrapped = [b.proto.label for b in boxes if not (b.proto.HasField("wrap") and b.proto.wrap)]
    assert not unwrapped


def test_every_page_starts_from_fp16_scales_and_names_them() -> None:
    explorer = open_page("explorer.py", src="synthetic", rows="32", cols="64")
    no_errors(explorer)
    assert explorer.selectbox(key="q_sstore").value == "fp16"
    ab = open_page("ab.py", src="synthetic", rows="32", cols="64")
    no_errors(ab)
    assert ab.selectbox(key="a_q_sstore").value == ab.selectbox(key="b_q_sstore").value == "fp16"
    assert list(ab.dataframe[0].value["scheme"]) == [
        "int4 sym per-channel(0), fp16 scales",
        "int4 asym g32, fp16 scales",
    ]
    sweep = open_page("sweep.py", src="synthetic", rows="32", cols="64")
    assert sweep.selectbox(key="sw_sdtype").value is ScaleDtype.FP16


def test_an_old_link_without_sdtype_gets_the_default_and_one_with_it_keeps_it() -> None:
    old = {"src": "synthetic", "rows": "32", "cols": "64", "bits": "4", "gran": "group"}
    at = open_page("explorer.py", **old)
    no_errors(at)
    assert at.selectbox(key="q_sstore").value == "fp16"
    kept = open_page("explorer.py", **old, sdtype="fp32")
    no_errors(kept)
    assert kept.selectbox(key="q_sstore").value == "fp32"
