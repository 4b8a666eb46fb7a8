"""The lessons without Streamlit: the catalog follows the course, the course's numbers come
out as the course printed them, the packing picture's bytes are quant_core's, the forum's
``a`` -> ``b`` is absmax int8, and the export loads back exactly."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.services.explorer.explore import explore
from dashboard.services.io import load_safetensors_file_tensor
from dashboard.services.lessons import catalog, course
from dashboard.services.lessons.catalog import (
    LESSONS,
    Control,
    TensorLab,
    lesson_by_slug,
    neighbours,
)
from dashboard.services.lessons.forum import forum_answer
from dashboard.services.lessons.loading import round_trip
from dashboard.services.lessons.packing import (
    PACKING_BITS,
    packing_figure,
    packing_picture,
    parse_codes,
)
from dashboard.services.lessons.settings import LabFormat, LabGranularity, LabSettings
from dashboard.services.model.files import bundled_model_file
from dashboard.services.sources.examples import Example, example_tensor
from dashboard.services.state.lesson import lesson_from_query, lesson_to_query, page_href
from quant_core import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    ZeroPoint,
    pack,
    quantize,
    unpack,
)

COURSE = example_tensor(Example.COURSE_3X3)
THREAD_A = example_tensor(Example.VECTOR_10)


def cards(slug: str) -> dict[str, str]:
    return {c.label: c.value for c in course.tensor_cards(slug)}


# --- the catalog ----------------------------------------------------------------------


def test_lessons_follow_the_course_in_order_then_the_forum():
    chapters = [c for lesson in LESSONS for c in lesson.chapters]
    assert chapters == [
        "Quantize and De-quantize a Tensor",
        "Get the Scale and Zero Point",
        "Symmetric vs Asymmetric Mode",
        "Finer Granularity for more Precision",
        "Quantizing Weights & Activations for Inference",
        "Custom Build an 8-Bit Quantizer",
        "Replace PyTorch layers with Quantized Layers",
        "Quantize any Open Source PyTorch Model",
        "Load your Quantized Weights from HuggingFace Hub",
        "Weights Packing",
        "Packing 2-bit Weights",
        "Unpacking 2-bit Weights",
        "Beyond Linear Quantization",
    ]
    assert [lesson.slug for lesson in LESSONS if not lesson.chapters] == [
        "forum-min-max",
        "forum-backward",
    ]
    assert len({lesson.slug for lesson in LESSONS}) == len(LESSONS)
    for lesson in LESSONS:
        assert lesson.narrative and lesson.question.why
        assert lesson_by_slug(lesson.slug) is lesson


def test_neighbours_and_links():
    first, second = LESSONS[0], LESSONS[1]
    assert neighbours(first) == (None, second)
    assert neighbours(LESSONS[-1]) == (LESSONS[-2], None)
    assert lesson_to_query(second) == {"lesson": "scale-zero-point"}
    assert lesson_from_query({}) is first
    assert lesson_from_query({"lesson": "packing"}) is lesson_by_slug("packing")
    with pytest.raises(ValueError, match=r"unknown lesson 'nope'; the lessons are: quantize-"):
        lesson_from_query({"lesson": "nope"})
    with pytest.raises(ValueError, match="at most 64 characters"):
        lesson_from_query({"lesson": "x" * 65})
    assert page_href("", {"src": "example", "ex": "typed", "vals": "1, 2"}) == (
        "./?src=example&ex=typed&vals=1%2C+2"
    )
    assert page_href("layer", {}) == "./layer"


@pytest.mark.parametrize(
    "lesson", [x for x in LESSONS if isinstance(x.lab, TensorLab)], ids=lambda x: x.slug
)
def test_tensor_labs_open_at_the_lessons_scheme(lesson):
    lab = lesson.lab
    cols = 3 if lab.source == catalog.COURSE_TENSOR else 384
    assert LabSettings.of(lab.scheme).to_config(cols) == lab.scheme


def test_lab_settings_fix_a_group_that_does_not_divide_the_row():
    s = LabSettings.of(QuantConfig(4, granularity=PerGroup(64)))
    assert s.granularity is LabGranularity.GROUP and s.group_size == 64
    assert s.to_config(96).granularity == PerGroup(48)
    assert s.to_config(7).granularity == PerGroup(7)
    nf4 = LabSettings(QuantConfig(), LabFormat.NF4, 4, Mode.ASYMMETRIC, LabGranularity.ROWS, 0)
    assert nf4.to_config(8) == QuantConfig(format=Format.NF4, granularity=PerChannel(0))
    for name in ("MXFP4", "NVFP4"):  # shipped formats are their own config
        cfg = QuantConfig.from_name(name)
        assert LabFormat.of(cfg) is LabFormat(name)
        assert LabSettings.of(cfg).to_config(384) == cfg
        got = LabSettings(cfg, LabFormat(name), 8, Mode.ASYMMETRIC, LabGranularity.ROWS, 0)
        assert got.to_config(384) == cfg


# --- the course's numbers -------------------------------------------------------------


def test_quantize_dequantize_with_the_courses_hand_picked_scale_and_zero_point():
    rng = course.given_range(3.5, -70)
    assert (float(rng.lo), float(rng.hi)) == (-203.0, 689.5)  # 3.5 * (-128 + 70), 3.5 * 197
    exp = course.explore_given(COURSE, 3.5, -70)
    assert float(exp.qt.scale) == 3.5 and int(exp.qt.zero_point) == -70
    # by hand: round(r / 3.5 - 70), 728.6 -> 138.17 -> clamped to 127
    assert exp.qt.codes.tolist() == [[-15, -74, 127], [-44, 14, -123], [-70, 126, 0]]
    assert cards("quantize-dequantize") == {
        "Quantization error": "170.8753",
        "Code of 728.6": "127",
        "728.6 comes back as": "689.5",
    }
    q = lesson_by_slug("quantize-dequantize").question
    assert "689.5" in q.options[q.answer]
    with pytest.raises(ValueError, match=r"zero point 200 is outside -128\.\.127"):
        course.given_range(1.0, 200)


def test_scale_and_zero_point_as_the_course_printed_them():
    assert cards("scale-zero-point") == {
        "scale": "3.5788",  # (728.6 + 184) / 255
        "zero_point": "-77",  # round(-128 + 184 / 3.5788) = round(-76.59)
        "Quantization error": "1.5730",
    }
    qt = quantize(COURSE, QuantConfig(8, Mode.ASYMMETRIC, zero_point=ZeroPoint.COURSE_CLAMP))
    q = lesson_by_slug("scale-zero-point").question
    assert str(int(qt.codes[1, 2])) == q.options[q.answer].replace("−", "-")  # -184 -> -128


def test_symmetric_vs_asymmetric_and_the_answer():
    got = cards("symmetric-asymmetric")
    assert got["Quantization error, symmetric"] == "2.5092"  # the course's "about 2.5"
    assert got["Quantization error, asymmetric"] == "1.5730"  # and "about 1.5"
    assert got["scale, symmetric"] == "5.7370"  # 728.6 / 127
    q = lesson_by_slug("symmetric-asymmetric").question
    assert q.options[q.answer] == "Asymmetric"
    sym = course.course_error(COURSE, QuantConfig(8, Mode.SYMMETRIC))
    asym = course.course_error(COURSE, QuantConfig(8, Mode.ASYMMETRIC))
    assert asym < sym


def test_granularity_errors_and_bits_per_weight():
    assert cards("granularity") == {
        "Per tensor": "2.5092",
        "Per channel, dim 0": "1.8084",
        "Per channel, dim 1": "1.0781",
        "Bits per weight, int4 g32": "4.5",  # 4 + 16 / 32
    }
    q = lesson_by_slug("granularity").question
    assert q.options[q.answer] == "4.5"


def test_packing_cards_are_the_courses_byte():
    assert cards("packing") == {
        "unpacked_tensor": "[1, 0, 3, 2]",
        "packed_tensor": "177",
        "in bits": "10110001",
    }
    q = lesson_by_slug("packing").question
    assert q.options[q.answer] == "177"
    assert int(q.options[1]) == 0b01001110  # the distractor: first code in the top bits


def test_beyond_linear_answer_on_the_bundled_weight():
    w = load_safetensors_file_tensor(bundled_model_file(), catalog.QUERY_WEIGHT.tensor).tensor
    frame = course.format_table(w, 64)
    table = frame.set_index("format")
    int4, nf4, fp4 = (c.name for c in course.beyond_linear_schemes(64)[:3])
    q = lesson_by_slug("beyond-linear").question
    assert table.loc[[int4, nf4, fp4], "MSE"].idxmin() == nf4 and q.options[q.answer] == "NF4"
    # bits per weight: 4 + 32 / 64; MXFP4 4 + 8 / 32; NVFP4 4 + 8 / 16 + 32 / 147,456
    assert table.loc[nf4, "bits per weight"] == 4.5
    assert table.loc["MXFP4", "bits per weight"] == 4.25
    assert table.loc["NVFP4", "bits per weight"] == pytest.approx(4.5 + 32 / w.numel())
    assert {c.label for c in course.format_cards(frame)} >= {f"MSE, {nf4}", "MSE, MXFP4"}


# --- packing --------------------------------------------------------------------------


def test_course_packing_by_hand():
    pic = packing_picture((1, 0, 3, 2), 2)
    assert pic.packed == (177,) and pic.byte_bits == ("10110001",)
    assert pic.code_bits == ("01", "00", "11", "10")
    # bit 7 .. bit 0 of byte 0 belong to codes 3, 3, 2, 2, 1, 1, 0, 0
    assert pic.owners == ((3, 3, 2, 2, 1, 1, 0, 0),)
    assert pic.unpacked == (1, 0, 3, 2)
    assert pic.describe_byte(0) == "byte 0 = 0b10110001 = 177 (codes 3, 2, 1, 0)"
    assert (pic.packed_bytes, pic.one_per_byte_bytes, pic.fp32_bytes) == (1, 4, 16)


def test_three_bit_codes_straddle_bytes():
    pic = packing_picture((1, 2, 3), 3)  # quant_core.packing's docstring: [0xD1, 0x00]
    assert pic.packed == (0xD1, 0x00)
    # byte 0, bit 7 .. bit 0: code 2's low two bits, code 1's three, code 0's three
    assert pic.owners[0] == (2, 2, 1, 1, 1, 0, 0, 0)
    assert pic.owner_bits[0] == (1, 0, 2, 1, 0, 2, 1, 0)
    assert pic.owners[1] == (None,) * 7 + (2,) and pic.padding_bits == 7


def _bytes_from_picture(pic) -> list[int]:
    """The bytes rebuilt from the picture alone: each bit is its owner code's bit."""
    out = []
    for owners, bits in zip(pic.owners, pic.owner_bits, strict=True):
        value = 0
        for k, (code, bit) in enumerate(zip(owners, bits, strict=True)):
            if code is not None and (pic.codes[code] >> bit) & 1:
                value |= 1 << (7 - k)
        out.append(value)
    return out


@settings(max_examples=80, deadline=None)
@given(data=st.data(), bits=st.sampled_from(PACKING_BITS))
def test_picture_bytes_equal_quant_core_packing(data, bits):
    codes = tuple(data.draw(st.lists(st.integers(0, (1 << bits) - 1), min_size=1, max_size=40)))
    pic = packing_picture(codes, bits)
    packed = pack(torch.tensor(codes), bits)
    assert list(pic.packed) == packed.tolist()
    assert _bytes_from_picture(pic) == packed.tolist()  # the drawing says what pack did
    assert pic.byte_bits == tuple(format(b, "08b") for b in packed.tolist())
    assert pic.unpacked == codes == tuple(unpack(packed, bits, len(codes), signed=False).tolist())
    assert pic.packed_bytes == math.ceil(len(codes) * bits / 8)
    fig = packing_figure(pic)
    cells = [a.text for a in fig.layout.annotations if a.text in ("0", "1")]
    shown = min(len(codes), 24)
    assert cells[: shown * bits] == list("".join(pic.code_bits[:shown]))


def test_parse_codes_says_what_is_wrong():
    assert parse_codes("1, 0, 3, 2", 2) == (1, 0, 3, 2)
    assert parse_codes("[1 0 3 2]", 2) == (1, 0, 3, 2)
    with pytest.raises(ValueError, match=r"code 3, 4, does not fit in 2 bits \(0 to 3\)"):
        parse_codes("1, 0, 4", 2)
    with pytest.raises(ValueError, match="code 2, '-1', is not a non-negative integer"):
        parse_codes("1, -1", 4)
    with pytest.raises(ValueError, match="no codes"):
        parse_codes(" , ", 4)
    with pytest.raises(ValueError, match=r"bits=5: the packing picture takes \(2, 3, 4, 8\)"):
        parse_codes("1", 5)


# --- the forum ------------------------------------------------------------------------


def test_forum_b_is_absmax_int8_not_min_max_levels():
    ans = forum_answer(THREAD_A)
    # s = max|a| / 127 = 5.2983 / 127; codes round(a / s) by hand
    assert ans.scale == pytest.approx(5.2983 / 127, rel=1e-6)
    assert ans.absmax.codes.tolist() == [22, 56, 77, 13, 127, 37, 21, 67, 73, 109]
    b = [round(c * 5.2983 / 127, 4) for c in ans.absmax.codes.tolist()]
    assert b[:5] == [0.9178, 2.3363, 3.2124, 0.5423, 5.2983]
    assert [round(v, 4) for v in ans.b.tolist()] == b
    # 256 levels from min to max give other numbers: 0.5491 + round((a - min) / step) step
    levels = [round(v, 4) for v in ans.minmax.dequantized.tolist()]
    assert levels[:2] == [0.9402, 2.3370]
    assert ans.below_min == (3,) and round(float(ans.b[3]), 4) == 0.5423 < 0.5491
    fp32, absmax, minmax = ans.storage()
    assert (fp32.bytes, absmax.bytes, minmax.bytes) == (40, 14, 18)  # 320, 80 + 32, 80 + 64
    table = ans.table()
    assert table["code"].tolist()[:5] == [22, 56, 77, 13, 127]
    assert table["b a level?"].tolist().count("no") >= 8
    assert len(ans.levels_table()) == 256
    q = lesson_by_slug("forum-min-max").question
    assert q.options[q.answer] == "No"


def test_forum_answer_refuses_what_it_cannot_show():
    with pytest.raises(ValueError, match="at least 2 values"):
        forum_answer(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="NaN or ±inf"):
        forum_answer(torch.tensor([1.0, float("nan")]))


# --- loading back ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)),
        QuantConfig(3, Mode.ASYMMETRIC, PerTensor()),
        QuantConfig(format=Format.NF4, granularity=PerGroup(3)),
    ],
    ids=lambda c: c.describe(),
)
def test_round_trip_loads_the_same_values(cfg):
    exp = explore(COURSE, cfg)
    rt = round_trip(exp)
    assert rt.same_codes and rt.same_values
    names = {t.name for t in rt.tensors}
    assert {"codes", "scale"} <= names
    codes = next(t for t in rt.tensors if t.name == "codes")
    assert codes.dtype == "uint8" and codes.nbytes == math.ceil(9 * cfg.bits / 8)
    assert exp.storage.total_bytes <= rt.tensor_bytes <= exp.storage.total_bytes + 2
    assert rt.file_bytes > rt.tensor_bytes  # plus the header
    got = course.loading_cards(rt, exp)
    assert got[-1].value == "yes"


def test_controls_of_the_beyond_linear_lab():
    lab = lesson_by_slug("beyond-linear").lab
    assert isinstance(lab, TensorLab) and Control.FORMAT in lab.controls
    schemes = course.beyond_linear_schemes(64)
    assert [c.format for c in schemes[:4]] == [
        Format.INT,
        Format.NF4,
        Format.FP4_E2M1,
        Format.FP8_E4M3,
    ]
    assert all(c.granularity == PerGroup(64) for c in schemes[:4])
    assert [c.name for c in schemes[4:]] == ["MXFP4", "NVFP4"]
    assert {f.value for f in LabFormat if f.named} == {"MXFP4", "NVFP4"}
