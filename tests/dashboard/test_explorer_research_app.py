"""AppTest: the research formats (min-max levels, DoReFa) in the explorer's format choice:
metrics, the teaching panel (normalise, q_k, rescale; tanh versus clipping; the transfer
curve), storage, downloads and the URL both ways."""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st
from canvas import canvas_payload, formulas_shown, metric_value, metrics_shown
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.state.research import ResearchFormat
from quant_core import Format, QkVariant

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")
SMALL = {"src": "synthetic", "rows": "16", "cols": "64"}  # 1,024 values


def new_app(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=90)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def query(at: AppTest, key: str) -> str | None:
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def chart_titles(at: AppTest) -> list[str]:
    specs = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    return [s["layout"].get("title", {}).get("text", "") for s in specs]


def test_dorefa_from_a_link_fills_the_teaching_panel() -> None:
    at = new_app(**SMALL, fmt="dorefa", bits="3", qk="centered", rescale="1").run()
    no_errors(at)
    assert at.selectbox(key="q_fmt").value is ResearchFormat.DOREFA
    assert at.slider(key="q_bits").value == 3
    assert at.radio(key="q_qk").value is QkVariant.CENTERED
    assert at.checkbox(key="q_rescale").value is True
    # codes + one float32 max|w|: 3 + 32/1024 bits per element
    assert metric_value(at, "Bits per element") == "3.031"
    assert metric_value(at, "Clipped") == "0"
    assert float(metric_value(at, "MSE")) > 0
    latex = formulas_shown(at)
    assert any(r"\tanh(w)" in line for line in latex)  # normalise
    assert any(r"\lfloor 8\,u \rfloor" in line and "c + 1/2" in line for line in latex)  # q_k
    assert any(r"\max|w|" in line for line in latex)  # rescale
    infos = " ".join(plain(i.value) for i in at.info)
    assert "tanh is not clipping" in infos and "Stored:" in infos
    assert "DoReFa" in " ".join(m.value for m in at.markdown)
    assert any("What each value becomes" in t for t in chart_titles(at))  # the transfer curve
    captions = " ".join(plain(c.value) for c in at.caption)
    assert "research format is its own rounding rule" in captions
    # the URL keeps the scheme as the link gave it
    assert [query(at, k) for k in ("fmt", "bits", "qk", "rescale")] == [
        "dorefa",
        "3",
        "centered",
        "1",
    ]
    assert query(at, "mode") is None


def test_picking_min_max_levels_and_a_variant_reaches_the_url() -> None:
    at = new_app(**SMALL).run()
    no_errors(at)
    at.selectbox(key="q_fmt").set_value(ResearchFormat.MINMAX_LEVELS).run()
    no_errors(at)
    assert query(at, "fmt") == "minmax_levels" and query(at, "qk") == "original"
    assert query(at, "rescale") is None and query(at, "gran") is None
    assert metric_value(at, "Bits per element") == "4.0625"  # 4 + 64/1024: x_min and x_max
    at.radio(key="q_qk").set_value(QkVariant.MODIFIED).run()
    at.slider(key="q_bits").set_value(2).run()
    no_errors(at)
    assert (query(at, "qk"), query(at, "bits")) == ("modified", "2")
    assert "Min-max levels" in " ".join(m.value for m in at.markdown)
    worked = canvas_payload(at, "worked")
    assert worked["columns"][:4] == ["index", "x", "u (normalised)", "code c"]
    assert max(int(row[3]) for row in worked["rows"]) <= 3
    # back to the integer grid: its keys return, the research ones go
    at.selectbox(key="q_fmt").set_value(Format.INT).run()
    no_errors(at)
    assert query(at, "fmt") == "int" and query(at, "qk") is None and query(at, "mode")


def test_plain_dorefa_stores_codes_only_and_downloads() -> None:
    at = new_app(**SMALL, fmt="dorefa", bits="4", rescale="0").run()
    no_errors(at)
    assert metric_value(at, "Bits per element") == "4"
    assert any("[−1, 1]" in plain(i.value) for i in at.info)
    at.button(key="dl_prepare").click().run()
    no_errors(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert any("(.safetensors" in label for label in labels)
    assert any("Packed codes (512 bytes)" in label for label in labels)  # 1,024 x 4 bits


def test_bad_research_links_warn_and_the_page_works() -> None:
    for bad in ({"fmt": "dorefa", "bits": "12"}, {"fmt": "int", "qk": "centered"}):
        at = new_app(**SMALL, **bad).run()
        assert not at.exception and not at.error
        texts = " ".join(plain(w.value) for w in at.warning)
        assert "Ignored the link's scheme" in texts, texts
        assert "Bits per element" in [m["label"] for m in metrics_shown(at)]
