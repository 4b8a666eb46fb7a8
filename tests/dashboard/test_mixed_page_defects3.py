"""AppTest: defects of the Mixed precision page's sidebar found by a user's hunt
(defects3)."""

from __future__ import annotations

import math
from pathlib import Path

import gguf
import numpy as np
import pytest
import streamlit as st
import torch
from markdown_text import plain
from safetensors.torch import save_file
from streamlit.testing.v1 import AppTest

from dashboard.services.model.roots import ROOTS_ENV
from quant_core.mixed import BudgetUnit
from tests.core.quantized_files import GGML, write_gguf

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "mixed.py"


def _controls() -> None:
    import streamlit as st

    from dashboard.components.mixed_controls import N_WEIGHTS, mixed_controls

    st.session_state[N_WEIGHTS] = 22_700_000  # MiniLM's weights, about
    st.text(mixed_controls().budget.describe())


def shown(at: AppTest) -> str:
    """The budget box's text: its value under its printf format (the frontend's sprintf
    writes ``%0.2f`` and ``%.6g`` as Python does)."""
    box = at.number_input(key="mx_value")
    return box.proto.format % box.value


def test_the_budget_box_shows_the_budget_the_page_allocates_for() -> None:
    """The box's default format, ``%0.2f``, showed a link's 4.281 bpw as "4.28" (the page
    allocated for 4.281), and 4.5 bpw turned into GB (0.01215 GB) as "0.01"."""
    at = AppTest.from_function(_controls, default_timeout=60)
    at.query_params["mx.budget"] = "4.281bpw"
    at.run()
    assert not at.exception
    assert [t.value for t in at.text] == ["4.281 bpw"]
    assert shown(at) == "4.281"
    at.radio(key="mx_unit").set_value(BudgetUnit.GIGABYTES).run()
    assert [t.value for t in at.text] == ["0.01215 GB"]
    assert shown(at) == "0.01215"
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    assert shown(at) == f"{at.number_input(key='mx_value').value:g}" == "12.15"
    # every digit a link carries
    at = AppTest.from_function(_controls, default_timeout=60)
    at.query_params["mx.budget"] = "1234.5678MB"
    at.run()
    assert [t.value for t in at.text] == ["1234.5678 MB"]
    assert shown(at) == "1234.5678"


def test_a_weight_with_nan_is_kept_as_stored_and_the_table_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One NaN in one weight stopped the whole table ("The table stopped: a.weight:
    a.weight: the weight holds NaN or Inf values"), where the whole model page keeps such
    a weight float and reports the others."""
    g = torch.Generator().manual_seed(0)
    bad = torch.randn(64, 64, generator=g)
    bad[3, 5] = math.nan
    folder = tmp_path / "nan"
    folder.mkdir()
    save_file({"a.weight": bad, "b.weight": torch.randn(64, 64, generator=g)},
              str(folder / "model.safetensors"))  # fmt: skip
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    monkeypatch.setenv("QLAB_COMPILE", "0")
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=600)
    # a.weight kept as stored is 32 bits per weight: the budget counts it (18.07 at least)
    at.query_params["mx.budget"] = "19bpw"
    at.session_state["m_source"] = "folder"
    at.session_state["m_folder"] = str(folder)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]
    captions = [plain(c.value) for c in at.caption]
    assert "No scheme can take a.weight: the weight holds 1 NaN and 0 Inf values of 4,096." in (
        captions
    )
    assert not any("cannot take" in c and "NaN" in c for c in captions), captions
    assert (
        "1 tensor no candidate can take, kept as stored: 32 bits per weight, 16,384 bytes, "
        "counted in the budget and the size." in captions
    ), captions
    table = at.dataframe[-1].value.set_index("tensor")
    assert table.loc["a.weight", "scheme"] == "stored"
    assert table.loc["b.weight", "scheme"] != "stored"


@pytest.mark.parametrize(
    ("qtype", "says"),
    [
        (GGML.Q8_0, "w.gguf is a quantized file: the table measures each scheme on float"),
        # measured since defects4 (test_mixed_page_defects4): only the judgement's note
        (None, "A single file holds weights but not the model's code: no output to judge."),
    ],
    ids=["q8_0", "f32"],
)
def test_a_gguf_is_called_quantized_only_when_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, qtype: GGML | None, says: str
) -> None:
    """An F32/F16 GGUF (convert_hf_to_gguf's output, the lab's own "original") was refused
    as "This is a quantized file"."""
    w = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    data = w if qtype is None else gguf.quants.quantize(w, qtype)
    write_gguf(tmp_path / "w.gguf", {"blk.0.ffn_up.weight": (data, qtype)})
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=600)
    at.query_params["m.src"] = "folder"
    at.query_params["m.folder"] = str(tmp_path / "w.gguf")
    at.run()
    assert not at.exception and not at.error
    (info,) = [plain(i.value) for i in at.info]
    assert info.startswith(says), info
