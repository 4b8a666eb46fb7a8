"""The explorer page under AppTest with unusual values: every format and granularity on the
examples, the finite-only offer, a row of NaN."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from canvas import canvas_payloads, metrics_shown
from markdown_text import plain
from streamlit.testing.v1 import AppTest
from value_helpers import (
    decode,
    first_row_nan,
    nonfinite_grid,
    npy_bytes,
)

from dashboard.services.session_files import KeptUpload
from dashboard.services.sources.choice import SourceKind
from dashboard.services.sources.examples import Example
from quant_core import (
    Format,
)

EXPLORER = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")
MAGENTA = "#ff00ff"

# --- the explorer page under AppTest -----------------------------------------------------


def new_app(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def no_errors(at: AppTest, where: str = "") -> None:
    assert not at.exception, (where, [e.value for e in at.exception])
    assert not at.error, (where, [plain(e.value) for e in at.error])


def metric_texts(at: AppTest) -> list[str]:
    return [m["value"] for m in metrics_shown(at)]


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


@pytest.mark.parametrize("example", list(Example), ids=lambda e: e.value)
def test_examples_under_every_format_and_granularity(example: Example) -> None:
    at = new_app(src="example", ex=example.value).run()
    no_errors(at, "first run")
    for fmt in (f for f in Format if f is not Format.TERNARY_PACKED):  # the picker's formats
        for gran, axis in (("tensor", None), ("channel", 0), ("channel", 1), ("group", None)):
            at.selectbox(key="q_fmt").set_value(fmt)
            at.radio(key="q_gran").set_value(gran)
            at.run()
            if axis is not None:
                at.radio(key="q_axis").set_value(axis).run()
            where = f"{example.value} {fmt.value} {gran} {axis}"
            no_errors(at, where)
            texts = metric_texts(at)
            assert len(texts) >= 12 and not any("nan" in t.lower() for t in texts), (where, texts)
            assert len(chart_specs(at)) >= 4, where  # the 4 maps (plotly: a small tensor)
            assert {"zoom", "histogram", "worked"} <= set(canvas_payloads(at)), where


def upload_in_app(array: np.ndarray, name: str) -> AppTest:
    """The explorer with ``array`` as an upload (AppTest cannot drive the file widget: the
    upload is placed where the picker keeps it for the session)."""
    at = new_app().run()
    at.session_state["_uploaded_file"] = KeptUpload(f"id-{name}", name, npy_bytes(array))
    at.selectbox(key="src_kind").set_value(SourceKind.UPLOAD).run()
    return at


def test_page_offers_to_quantize_finite_values_only() -> None:
    at = upload_in_app(nonfinite_grid(), "bad.npy")
    no_errors(at)
    (warning,) = at.warning
    assert "2 NaN and 2 Inf among 40 values, first at (0, 3), (1, 0), (2, 5), (4, 7)" in (
        plain(warning.value)
    )
    box = at.checkbox(key="v_finite_only")
    assert box.label == "Quantize the finite values only" and box.value is True
    texts = metric_texts(at)
    assert texts and not any("nan" in t.lower() for t in texts), texts
    specs = chart_specs(at)
    bad = ~np.isfinite(nonfinite_grid())
    overview = specs[:4]
    assert all(s["layout"]["plot_bgcolor"] == MAGENTA for s in overview)
    assert np.array_equal(np.isnan(decode(overview[0]["data"][0]["z"])), bad)
    # unticked: nothing is quantized and no metric is shown
    box.uncheck().run()
    no_errors(at)
    assert not metrics_shown(at) and not at.get("plotly_chart")


def test_page_with_a_row_of_nan_under_the_default_scheme() -> None:
    at = upload_in_app(first_row_nan().numpy(), "row_nan.npy")
    no_errors(at)
