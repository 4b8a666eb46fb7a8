"""AppTest: the Lessons page walked lesson by lesson (question first, then the course's
numbers and the lab; previous/next and the URL), and the typed-values box of the
explorer's teaching examples."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
import streamlit as st
from canvas import metrics_shown
from hostile import HOSTILE, unsafe
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.lessons.catalog import LESSONS, lesson_by_slug, neighbours
from dashboard.services.lessons.settings import LabFormat
from dashboard.services.sources.choice import SourceKind
from dashboard.services.sources.examples import Example
from quant_core import Mode

ROOT = Path(__file__).resolve().parents[2]
LESSONS_PAGE = str(ROOT / "dashboard" / "views" / "lessons.py")
EXPLORER = str(ROOT / "dashboard" / "views" / "explorer.py")

# The course's numbers each lesson must show once answered (label: value); model lessons
# are checked by label and range below.
COURSE_NUMBERS = {
    "quantize-dequantize": {"Quantization error": "170.8753", "728.6 comes back as": "689.5"},
    "scale-zero-point": {"scale": "3.5788", "zero_point": "-77", "Quantization error": "1.5730"},
    "symmetric-asymmetric": {
        "Quantization error, symmetric": "2.5092",
        "Quantization error, asymmetric": "1.5730",
    },
    "granularity": {
        "Per tensor": "2.5092",
        "Per channel, dim 0": "1.8084",
        "Per channel, dim 1": "1.0781",
        "Bits per weight, int4 g32": "4.5",
    },
    "custom-quantizer": {"int8_weights": "384×384", "scales": "384", "nn.Linear replaced": "37"},
    "load-back": {"Same values loaded": "yes"},
    "packing": {"packed_tensor": "177", "in bits": "10110001"},
    "forum-min-max": {"s = max|a| / 127": "0.041719", "b[3]": "0.5423", "min(a)": "0.5491"},
}


def new_app(path: str = LESSONS_PAGE, **query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(path, default_timeout=180)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def query(at: AppTest, key: str) -> str | None:
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def cards(at: AppTest, key: str) -> dict[str, str]:
    for el in at.get("bidi_component"):
        if el.key == key:
            data = json.loads(el.proto.json)
            return {c["label"]: c["value"] for row in data["rows"] for c in row}
    return {}


def links(at: AppTest) -> list[str]:
    return [
        part.split("](", 1)[1].rstrip(")")
        for el in at.markdown
        for part in el.value.split("\n")
        if part.startswith("[") and "](./" in part
    ]


def answer(at: AppTest, slug: str, option: int) -> AppTest:
    return at.radio(key=f"lesson_q_{slug}").set_value(option).run()


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda x: x.slug)
def test_every_lesson_asks_then_shows_the_course_numbers_and_moves_on(lesson):
    at = new_app(lesson=lesson.slug).run()
    no_errors(at)
    assert lesson.title in at.title[0].value
    assert query(at, "lesson") == lesson.slug
    assert cards(at, "lesson_course") == {}  # the lab waits for the answer
    at = answer(at, lesson.slug, lesson.question.answer)
    no_errors(at)
    assert at.success and lesson.question.options[lesson.question.answer] in at.success[0].value
    shown = cards(at, "lesson_course")
    assert shown, "no course numbers"
    for label, value in COURSE_NUMBERS.get(lesson.slug, {}).items():
        assert shown.get(label) == value, (label, shown)
    assert cards(at, "lesson_metrics") or at.get("plotly_chart") or at.dataframe  # the lab
    assert any(href.startswith("./") for href in links(at)), "no link into the full page"
    prev, nxt = neighbours(lesson)
    if nxt is not None:
        at.button(key="lesson_next").click().run()
        no_errors(at)
        assert query(at, "lesson") == nxt.slug and nxt.title in at.title[0].value
        at.button(key="lesson_prev").click().run()
        assert query(at, "lesson") == lesson.slug and lesson.title in at.title[0].value
    else:
        assert not at.button(key="lesson_prev").disabled and prev is not None


def test_model_lessons_answers_hold_on_the_bundled_model():
    at = new_app(lesson="weights-activations").run()
    at = answer(at, "weights-activations", 0)
    got = {k: float(v) for k, v in cards(at, "lesson_course").items()}
    assert got["Output MSE, W8A16"] < got["Output MSE, W8A8"]
    at = new_app(lesson="whole-model").run()
    at = answer(at, "whole-model", 0)
    assert float(cards(at, "lesson_course")["Mean embedding cosine"]) > 0.999


def test_wrong_answer_and_skip_still_open_the_lab():
    at = new_app(lesson="symmetric-asymmetric").run()
    at = answer(at, "symmetric-asymmetric", 0)  # symmetric: wrong
    assert "Not quite" in at.warning[0].value and "Asymmetric" in at.warning[0].value
    assert cards(at, "lesson_course")
    at = new_app(lesson="packing").run()
    at.button(key="lesson_skip_packing").click().run()
    assert "The answer: **177**" in at.info[0].value
    assert cards(at, "lesson_course")["packed_tensor"] == "177"


def test_a_bad_lesson_link_warns_and_opens_the_first():
    at = new_app(lesson=HOSTILE[:60]).run()
    assert not at.exception and unsafe(at) == []
    assert any("Ignored the link's lesson" in plain(w.value) for w in at.warning)
    assert query(at, "lesson") == LESSONS[0].slug


def test_the_lab_opens_at_the_course_settings_and_links_the_explorer_at_its_state():
    at = new_app(lesson="symmetric-asymmetric").run()
    at = answer(at, "symmetric-asymmetric", 1)
    assert at.radio(key="lesson_mode").value is Mode.SYMMETRIC
    assert at.select_slider(key="lesson_bits").value == 8
    (href,) = [h for h in links(at) if h.startswith("./?")]
    q = {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
    assert q["src"] == "example" and q["ex"] == "course_3x3"
    assert (q["bits"], q["mode"], q["gran"]) == ("8", "symmetric", "tensor")
    assert cards(at, "lesson_metrics")["MSE"] == "2.509"
    at.radio(key="lesson_mode").set_value(Mode.ASYMMETRIC).run()
    at.select_slider(key="lesson_bits").set_value(4).run()
    (href,) = [h for h in links(at) if h.startswith("./?")]
    q = {k: v[0] for k, v in parse_qs(urlparse(href).query).items()}
    assert (q["bits"], q["mode"]) == ("4", "asymmetric")  # the link follows the lab
    # another lesson opens at its own settings, not the ones left behind
    at.button(key="lesson_next").click().run()
    at = answer(at, "granularity", 1)
    assert at.radio(key="lesson_mode").value is Mode.SYMMETRIC  # granularity: sym per row
    assert at.select_slider(key="lesson_bits").value == 8


def test_the_scale_and_zero_point_lab():
    at = new_app(lesson="quantize-dequantize").run()
    at = answer(at, "quantize-dequantize", 2)
    assert cards(at, "lesson_metrics")["MSE"] == "170.9"
    at.slider(key="lesson_zero").set_value(-77).run()
    at.number_input(key="lesson_scale").set_value(3.5788).run()
    no_errors(at)
    assert float(cards(at, "lesson_metrics")["MSE"]) < 2.0  # no value clamps now


def test_beyond_linear_lab_offers_todays_formats():
    at = new_app(lesson="beyond-linear").run()
    at = answer(at, "beyond-linear", 1)
    course = cards(at, "lesson_course")
    assert {"MSE, MXFP4", "MSE, NVFP4"} <= set(course) and len(course) == 6
    assert cards(at, "lesson_metrics")["Bits per element"] == "4.5"  # NF4 g64: 4 + 32/64
    at.selectbox(key="lesson_format").set_value(LabFormat.MXFP4).run()
    no_errors(at)
    assert cards(at, "lesson_metrics")["Bits per element"] == "4.25"  # 4 + 8/32
    assert "lesson_gran" not in [e.key for e in at.selectbox]  # its blocks are fixed
    (href,) = [h for h in links(at) if h.startswith("./?")]
    assert parse_qs(urlparse(href).query)["preset"] == ["MXFP4"]  # the link carries it


def test_packing_lab_draws_the_users_codes():
    at = new_app(lesson="packing").run()
    at = answer(at, "packing", 0)
    at.selectbox(key="lesson_pack_bits").set_value(3).run()
    at.text_input(key="lesson_codes").set_value("1, 2, 3").run()
    no_errors(at)
    assert cards(at, "lesson_metrics")["Packed"] == "2 B"
    assert any("byte 0 = 0b11010001 = 209" in c.value for c in at.caption)
    at.text_input(key="lesson_codes").set_value("1, 9").run()
    assert "does not fit in 3 bits" in plain(at.error[0].value)
    at.text_input(key="lesson_codes").set_value(HOSTILE).run()
    assert at.error and unsafe(at) == []


def test_forum_lab_takes_pasted_values_and_escapes_bad_text():
    at = new_app(lesson="forum-min-max").run()
    at = answer(at, "forum-min-max", 1)
    assert "22, 56, 77, 13, 127" in " ".join(m.value for m in at.markdown)
    at.text_area(key="lesson_values").set_value("a = torch.tensor([1.0, -2.0, 4.0])").run()
    no_errors(at)
    assert cards(at, "lesson_course")["s = max|a| / 127"] == f"{4 / 127:.6f}"
    at.text_area(key="lesson_values").set_value("1, *x* y").run()
    (err,) = at.error
    assert plain(err.value) == "a: row 1, value 2 holds '*x*', which is not a number"
    at.text_area(key="lesson_values").set_value(HOSTILE).run()
    assert at.error and unsafe(at) == []


# --- the explorer's typed-values box ---------------------------------------------------


def test_explorer_typed_values_box():
    at = new_app(EXPLORER).run()
    at.selectbox(key="src_kind").set_value(SourceKind.EXAMPLE).run()
    at.selectbox(key="src_example").set_value(Example.TYPED).run()
    no_errors(at)
    assert any("your typed values (2x3)" in plain(c.value) for c in at.caption)
    at.text_area(key="src_typed").set_value("[[1, 2], [3, 4], [5, 6]]").run()
    no_errors(at)
    assert any("your typed values (3x2)" in plain(c.value) for c in at.caption)
    assert query(at, "vals") == "[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]"
    assert "Bits per element" in [m["label"] for m in metrics_shown(at)]
    at.text_area(key="src_typed").set_value("1, 2\n3, <b>**x**</b>").run()
    assert not at.exception
    (err,) = at.error
    # shown as typed, not as Markdown or HTML
    assert plain(err.value) == "Values: row 2, value 2 holds '<b>**x**</b>', which is not a number"
    # the rest of the page keeps working on the previous tensor
    assert any("Still showing the previous tensor" in plain(i.value) for i in at.info)
    assert "Bits per element" in [m["label"] for m in metrics_shown(at)]
    at.text_area(key="src_typed").set_value(HOSTILE).run()
    assert at.error and unsafe(at) == []


def test_explorer_opens_typed_values_from_a_link():
    at = new_app(EXPLORER, src="example", ex="typed", vals="0.9372, 2.3312, 5.2983").run()
    no_errors(at)
    assert any("your typed values (3)" in plain(c.value) for c in at.caption)
    at = new_app(EXPLORER, src="example", ex="typed", vals="1, nope").run()
    assert any("vals: row 1, value 2 holds 'nope'" in plain(w.value) for w in at.warning)
    at = new_app(EXPLORER, src="example", ex="typed", vals=HOSTILE).run()
    assert at.warning and unsafe(at) == []


def test_lesson_lookup_is_the_catalogs():
    assert lesson_by_slug("packing").title.startswith("Pack")


def test_explorer_research_panel_shows_the_backward_pass():
    at = new_app(EXPLORER, src="synthetic", rows="16", cols="64", fmt="dorefa", bits="2").run()
    no_errors(at)
    specs = [json.loads(el.proto.spec) for el in at.get("plotly_chart")]
    names = {t.get("name") for s in specs for t in s["data"]}
    assert {"gradient passed back (STE)", "this tensor's values (autograd)"} <= names
    assert any("How is the input kept in [0, 1]?" in i.value for i in at.info)
    assert any(r"\mathbb{1}\left[0 \le x \le 1\right]" in m.value for m in at.markdown)
