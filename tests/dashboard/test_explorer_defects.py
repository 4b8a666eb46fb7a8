"""AppTest: defects a demanding user hit on the explorer (odd files, odd tensors), each
with the run that showed it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.files.tensor import FileTensor, file_exploration
from dashboard.services.model.roots import ROOTS_ENV
from dashboard.services.sources.choice import SourceKind
from dashboard.services.sources.examples import Example
from quant_core.files import open_quantized
from tests.core.quantized_files import GGML, random_blocks, write_gguf

EXPLORER = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")


def _nan_scale_gguf(path: Path) -> None:
    """A GGUF whose Q4_K tensor has a NaN super-block scale ``d`` (its first two bytes) in
    its first row, beside a healthy Q4_K tensor."""
    rng = np.random.default_rng(0)
    bad = random_blocks(rng, GGML.Q4_K, 2, 256).copy()
    bad[0, :2] = np.array([np.nan], np.float16).view(np.uint8)
    write_gguf(
        path,
        {
            "ok.weight": (random_blocks(rng, GGML.Q4_K, 2, 256), GGML.Q4_K),
            "nan.weight": (bad, GGML.Q4_K),
        },
    )


def test_a_gguf_tensor_with_a_nan_scale_is_explored_as_values_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Q4_K tensor whose fp16 ``d`` is NaN decodes to a row of NaN: the stored view
    raised "a precomputed quantization needs a finite matrix" (twice: its fallback ran the
    same call) and the page ended in a traceback. Its values go to the ordinary explorer,
    which offers to quantize the finite ones, and the page says why."""
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    _nan_scale_gguf(tmp_path / "nan.gguf")
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120).run()
    at.selectbox(key="src_kind").set_value(SourceKind.FOLDER).run()
    if at.selectbox(key="src_folder").options:
        at.selectbox(key="src_folder").set_value("").run()
    at.text_input(key="src_folder_path").set_value(str(tmp_path / "nan.gguf")).run()
    at.selectbox(key="src_folder_tensor").set_value("nan.weight").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]
    shown = " ".join(plain(x.value) for x in (*at.info, *at.warning))
    assert "256 NaN and 0 Inf among 512 values" in shown, shown
    assert "not finite" in shown and "Q4_K" in shown, shown
    assert at.checkbox(key="v_finite_only").value is True  # the finite half is explored
    # the healthy tensor of the same file still shows what the file stores
    at.selectbox(key="src_folder_tensor").set_value("ok.weight").run()
    assert not at.exception and not at.error
    assert {m.label: m.value for m in at.metric}["Stored type"] == "Q4_K"


def test_file_exploration_says_why_instead_of_raising_for_a_nan_scale(tmp_path: Path) -> None:
    """The service the stored view calls: a tensor whose stored values are not finite has
    no exploration of its codes (``unmodelled`` says why); it raised ``ValueError``."""
    _nan_scale_gguf(tmp_path / "nan.gguf")
    qf = open_quantized(tmp_path / "nan.gguf")
    fexp = file_exploration(FileTensor(qf, qf.load("nan.weight")))
    assert fexp.stored is None and fexp.comparison is None
    assert fexp.unmodelled is not None
    assert "256 of its 512 stored values are not finite" in fexp.unmodelled
    healthy = file_exploration(FileTensor(qf, qf.load("ok.weight")))
    assert healthy.unmodelled is None and healthy.stored is not None


def test_a_links_scale_format_the_picker_lacks_keeps_the_links_scale_dtype() -> None:
    """``sfmt=super&sbits=5`` (5-bit super-block scales: no picker option) fell back to
    fp32 scales, and the page warned "sdtype=fp16 is not available here; using fp32" about
    a value the link never set; fp16 per block is offered. Only the scale format's keys
    are warned about, and the scheme keeps the link's (here the default) scale dtype."""
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120)
    for k, v in {
        "src": "synthetic", "rows": "8", "cols": "256", "bits": "4", "gran": "group",
        "group": "32", "sfmt": "super", "sbits": "5",
    }.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    warned = [plain(w.value) for w in at.warning]
    assert not any("sdtype" in w for w in warned), warned
    assert any("sfmt=super is not available here" in w for w in warned), warned
    assert at.selectbox(key="q_sstore").value == "fp16"
    assert at.query_params["sdtype"] == "fp16"


def test_a_group_size_survives_a_visit_to_a_narrower_tensor() -> None:
    """Group 256 on a 512 x 512 tensor, then a look at the 4 x 4 and 10-value examples:
    each source took the nearest divisor of *the previous source's* size (256 -> 4 -> 2,
    not 10), and back on the 512-column tensor the visitor's 256 had become 2 (16 bits per
    value instead of 8.0625) with no word said. The picker keeps the size the visitor
    (or the link) chose and takes the nearest divisor of it on each tensor."""
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120)
    for k, v in {
        "src": "synthetic", "rows": "512", "cols": "512", "gran": "group", "group": "256",
    }.items():
        at.query_params[k] = v
    at.run()
    assert at.session_state["q_group"] == 256
    at.selectbox(key="src_kind").set_value(SourceKind.EXAMPLE).run()
    at.selectbox(key="src_example").set_value(Example.RANDOM_4X4).run()
    assert at.session_state["q_group"] == 4
    at.selectbox(key="src_example").set_value(Example.VECTOR_10).run()
    assert at.session_state["q_group"] == 10  # nearest to 256, not to 4
    at.selectbox(key="src_kind").set_value(SourceKind.SYNTHETIC).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["q_group"] == 256
    assert at.query_params["group"] == "256"
    # a size the visitor picks on the narrow tensor is their choice from then on
    at.selectbox(key="src_kind").set_value(SourceKind.EXAMPLE).run()
    at.selectbox(key="src_example").set_value(Example.VECTOR_10).run()
    at.select_slider(key="q_group").set_value(5).run()
    at.selectbox(key="src_kind").set_value(SourceKind.SYNTHETIC).run()
    assert at.session_state["q_group"] == 4  # the divisor of 512 nearest to 5


def test_a_links_group_size_wins_over_the_kept_choice() -> None:
    """The kept choice does not override a scheme given to the picker: Back to an address
    naming group 4 on the 512-column tensor opens at 4, even right after 4 was the size
    set for a narrower tensor."""
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120)
    for k, v in {
        "src": "synthetic", "rows": "512", "cols": "512", "gran": "group", "group": "256",
    }.items():
        at.query_params[k] = v
    at.run()
    at.selectbox(key="src_kind").set_value(SourceKind.EXAMPLE).run()
    at.selectbox(key="src_example").set_value(Example.RANDOM_4X4).run()
    assert at.session_state["q_group"] == 4
    # Back to an address of the 512-column tensor at group 4 (the browser's history)
    at.query_params.clear()
    for k, v in {
        "src": "synthetic", "rows": "512", "cols": "512", "gran": "group", "group": "4",
    }.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["src_kind"] is SourceKind.SYNTHETIC
    assert at.session_state["q_group"] == 4


@pytest.mark.parametrize(
    ("vals", "limit"),
    [("1e-8,2e-8,-3e-8,4e-8", "smallest positive fp16"), ("1e7,-2e7,3e7", "largest fp16")],
    ids=["below-fp16", "above-fp16"],
)
def test_a_scale_clamped_to_its_dtype_is_explained_as_such(vals: str, limit: str) -> None:
    """Typed values near 1e-8 under fp16 scales: the min-max rule's scale (5.7e-9) is
    below fp16's smallest positive value, so the stored scale is 5.96e-8. The page said
    "the file's quantizer or the algorithm chose it (llm-compressor's ...; GPTQ and HQQ
    ...)" of a plain round-to-nearest on typed values: no file and no algorithm. It now
    names the scale dtype's limit."""
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120)
    for k, v in {"src": "example", "ex": "typed", "vals": vals, "sdtype": "fp16"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    notes = " ".join(plain(i.value) for i in at.info)
    assert "file's quantizer" not in notes, notes
    assert limit in notes and "fp32" in notes, notes


def test_a_links_zoom_and_block_beyond_the_tensor_are_named() -> None:
    """``zr=999999&zc=5000&blk=99999`` on a 64 x 64 tensor in groups of 32 (128 blocks):
    the zoom window and the block were moved to the last row, column and block with no
    word said, while the link's scheme values get "Link: ... using ..." lines. The view's
    do too, naming the link's value and the one shown."""
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120)
    for k, v in {
        "src": "synthetic", "rows": "64", "cols": "64", "gran": "group", "group": "32",
        "zr": "999999", "zc": "5000", "zs": "16", "blk": "99999",
    }.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    warned = " ".join(plain(w.value) for w in at.warning)
    assert "zr=999999 is beyond this tensor's 64 rows; showing row 63" in warned, warned
    assert "zc=5000 is beyond this tensor's 64 columns; showing column 63" in warned, warned
    assert "blk=99999 is beyond this scheme's 128 blocks; showing block 127" in warned, warned
    # said once: the next run (a widget moved) does not repeat it
    at.number_input(key="v_zrow").set_value(10).run()
    assert not any("zr=999999" in plain(w.value) for w in at.warning)


def test_a_links_zoom_beyond_a_one_row_tensor_says_row_not_rows() -> None:
    """On a 1 x 64 tensor per tensor (one block) the warnings read "1 rows" and "1 blocks"."""
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120)
    for k, v in {
        "src": "synthetic", "rows": "1", "cols": "64", "gran": "tensor", "zr": "5", "blk": "3",
    }.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    warned = " ".join(plain(w.value) for w in at.warning)
    assert "zr=5 is beyond this tensor's 1 row; showing row 0" in warned, warned
    assert "blk=3 is beyond this scheme's 1 block; showing block 0" in warned, warned
