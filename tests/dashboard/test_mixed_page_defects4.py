"""AppTest: defects of the Mixed precision page found by a user's hunt (defects4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import streamlit as st
import torch
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.model.roots import ROOTS_ENV
from quant_core.mixed import BudgetUnit
from tests.core.quantized_files import write_gguf

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "mixed.py"


def _controls() -> None:
    import streamlit as st

    from dashboard.components.mixed_controls import N_WEIGHTS, mixed_controls

    st.session_state[N_WEIGHTS] = 22_700_000  # MiniLM's weights, about
    st.text(mixed_controls().budget.describe())


def test_the_budget_steps_by_a_size_that_suits_its_unit() -> None:
    """The +/- step was 0.25 in every unit: one click on MiniLM's 0.01277 GB budget made
    it 0.26 GB, twenty times the model; now a step is 0.25 bits per weight's worth."""
    at = AppTest.from_function(_controls, default_timeout=60).run()
    assert not at.exception
    assert at.number_input(key="mx_value").step == 0.25
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    assert at.number_input(key="mx_value").step == 0.5  # 0.71 MB rounded down to 1-2-5
    at.radio(key="mx_unit").set_value(BudgetUnit.GIGABYTES).run()
    box = at.number_input(key="mx_value")
    assert box.step == 0.0005
    box.increment().run()
    assert [t.value for t in at.text] == ["0.01327 GB"]  # 0.01277 + 0.0005


def test_a_budget_survives_a_round_trip_through_the_units() -> None:
    """Each change of unit rounded the converted value to 4 digits, and the next one
    converted that: 4.281 bpw came back from GB and MB as 4.282."""
    at = AppTest.from_function(_controls, default_timeout=60)
    at.query_params["mx.budget"] = "4.281bpw"
    at.run()
    for unit in (BudgetUnit.GIGABYTES, BudgetUnit.MEGABYTES, BudgetUnit.BITS_PER_WEIGHT):
        at.radio(key="mx_unit").set_value(unit).run()
    assert not at.exception
    assert [t.value for t in at.text] == ["4.281 bpw"]
    # a value typed in MB is the one a round trip returns to, not the bpw before it
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    at.number_input(key="mx_value").set_value(12.34).run()
    at.radio(key="mx_unit").set_value(BudgetUnit.GIGABYTES).run()
    at.radio(key="mx_unit").set_value(BudgetUnit.BITS_PER_WEIGHT).run()
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    assert [t.value for t in at.text] == ["12.34 MB"]
    assert at.number_input(key="mx_value").value == pytest.approx(12.34, abs=0)


def test_a_float_gguf_is_measured_like_a_safetensors_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GGUF of F32/F16 tensors (convert_hf_to_gguf's output) got only "the table reads
    float weights from .safetensors files only". Its tensors are read through the
    quantized-file reader, measured at the size the file spends on them, and the
    --tensor-type lines keep their GGUF names."""
    rng = np.random.default_rng(0)
    up = rng.standard_normal((128, 256)).astype(np.float32)
    down = rng.standard_normal((256, 128)).astype(np.float16)
    write_gguf(
        tmp_path / "w.gguf",
        {
            "blk.0.ffn_up.weight": (up, None),
            "blk.0.ffn_down.weight": (down, None),
            "blk.0.attn_norm.weight": (np.ones(256, dtype=np.float32), None),
        },
    )
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    monkeypatch.setenv("QLAB_COMPILE", "0")
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=600)
    at.query_params["m.src"] = "folder"
    at.query_params["m.folder"] = str(tmp_path / "w.gguf")
    at.query_params["mx.cands"] = "Q8_0"
    at.query_params["mx.budget"] = "8.5bpw"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]
    captions = [plain(c.value) for c in at.caption]
    assert any(c.startswith("w.gguf · 2 weights × 1 scheme") for c in captions), captions
    table = at.dataframe[-1].value.set_index("tensor")
    assert set(table.index) == {"blk.0.ffn_up.weight", "blk.0.ffn_down.weight"}
    # the values measured are the file's: Q8_0's SQNR of the F16 tensor as the lab gets it
    from quant_core import quantize
    from quant_core.mixed import candidate_named

    cfg = candidate_named("Q8_0").config
    w = torch.from_numpy(down.astype(np.float32))
    err = (quantize(w, cfg).dequantize() - w).square().sum() / w.square().sum()
    got = float(table.loc["blk.0.ffn_down.weight", "weighted SQNR (dB)"])
    assert got == pytest.approx(-10 * float(torch.log10(err)), abs=1e-4)
    codes = [c.value for c in at.code]
    assert codes == [
        "--tensor-type '^blk\\.(0)\\.ffn_up\\.weight$=q8_0' "
        "--tensor-type '^blk\\.(0)\\.ffn_down\\.weight$=q8_0'"
    ], codes
    assert not any("no --tensor-type line" in c for c in captions), captions
    assert [m.value for m in at.metric][:2] == ["8.500", "69.6 kB"]  # 65,536 weights
    (info,) = [plain(i.value) for i in at.info]
    assert info == "A single file holds weights but not the model's code: no output to judge."


def _folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tensors: dict[str, torch.Tensor]
) -> AppTest:
    from safetensors.torch import save_file

    folder = tmp_path / "m"
    folder.mkdir()
    save_file(tensors, str(folder / "model.safetensors"))
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    monkeypatch.setenv("QLAB_COMPILE", "0")
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=600)
    at.session_state["m_source"] = "folder"
    at.session_state["m_folder"] = str(folder)
    return at


def test_a_bad_pin_drops_the_pins_but_keeps_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad pin line ("Rules: pin line 1: 'int9' is not a chosen scheme") threw the floor
    away too, and nothing said so: the embeddings went to Q4_0 under "at least Q8_0"."""
    g = torch.Generator().manual_seed(0)
    at = _folder(tmp_path, monkeypatch, {
        "model.embed_tokens.weight": torch.randn(64, 64, generator=g),
        "model.layers.0.mlp.up_proj.weight": torch.randn(64, 64, generator=g) * 0.01,
    })  # fmt: skip
    at.query_params["mx.cands"] = "Q4_0,Q8_0"
    at.query_params["mx.floor"] = "Q8_0"
    at.query_params["mx.budget"] = "6.5bpw"
    at.query_params["mx.pins"] = "up_proj = int9"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    (err,) = [plain(e.value) for e in at.error]
    assert err == (
        "Rules: pin line 1: 'int9' is not a chosen scheme (Q4_0, Q8_0); the allocation below "
        "has no pins (the floor Q8_0 still holds)."
    )
    table = at.dataframe[-1].value.set_index("tensor")
    assert table.loc["model.embed_tokens.weight", "scheme"] == "Q8_0"


def _floor_controls() -> None:
    import streamlit as st

    from dashboard.components.mixed_controls import mixed_controls

    st.text(str(mixed_controls().floor))


def test_a_floor_comes_back_with_its_scheme() -> None:
    """Taking the floor's scheme out of the candidates reset the floor to "none" for good,
    without a word: putting Q8_0 back left the embeddings without their floor."""
    at = AppTest.from_function(_floor_controls, default_timeout=60)
    at.query_params["mx.cands"] = "Q4_0,Q8_0"
    at.query_params["mx.floor"] = "Q8_0"
    at.run()
    assert [t.value for t in at.text] == ["Q8_0"]
    at.multiselect(key="mx_cands").set_value(["Q4_0"]).run()
    assert not at.exception
    assert [t.value for t in at.text] == ["None"]
    assert [plain(c.value) for c in at.caption] == [
        "No floor while Q8_0 is not a candidate: it comes back with it."
    ]
    at.multiselect(key="mx_cands").set_value(["Q4_0", "Q8_0"]).run()
    assert [t.value for t in at.text] == ["Q8_0"] and not at.caption
    # a floor picked by hand meanwhile wins
    at.multiselect(key="mx_cands").set_value(["Q4_0"]).run()
    at.selectbox(key="mx_floor").set_value("Q4_0").run()
    at.multiselect(key="mx_cands").set_value(["Q4_0", "Q8_0"]).run()
    assert [t.value for t in at.text] == ["Q4_0"] and not at.caption


def test_a_float_gguf_with_an_f64_tensor_beside_is_still_measured(tmp_path: Path) -> None:
    """An F64 tensor (llama.cpp writes some rope frequency tables so) is no quantization:
    the GGUF is listed as a checkpoint, the F64 1-D tensor left out of the table by its
    shape."""
    from dashboard.services.mixed.sources import gguf_checkpoint
    from dashboard.services.mixed.tasks import is_table_weight
    from quant_core.files import open_quantized

    path = tmp_path / "f64.gguf"
    write_gguf(path, {"blk.0.ffn_up.weight": (np.ones((8, 64), np.float32), None),
                      "rope_freqs.weight": (np.ones(4, np.float64), None)})  # fmt: skip
    file = open_quantized(path)
    ckpt = gguf_checkpoint(file)
    assert ckpt is not None
    assert [t.name for t in ckpt.tensors if is_table_weight(t.info)] == ["blk.0.ffn_up.weight"]


def test_a_gguf_tensor_over_the_limits_is_kept_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a safetensors weight over the folder limits: skipped rows (kept as stored), not
    "The table stopped"."""
    from dashboard.services.io.common import Limits
    from dashboard.services.mixed import sources, tasks
    from dashboard.services.mixed.tasks import tasks_for
    from quant_core.files import open_quantized
    from quant_core.mixed import candidate_named

    path = tmp_path / "w.gguf"
    write_gguf(path, {"blk.0.ffn_up.weight": (np.ones((8, 64), np.float32), None)})
    file = open_quantized(path)
    ckpt = sources.gguf_checkpoint(file)
    assert ckpt is not None
    (task,) = tasks_for(ckpt, [candidate_named("Q8_0")], None)
    limits = Limits(max_elements=100, max_bytes=2**30)
    monkeypatch.setattr(tasks, "FOLDER_LIMITS", limits)  # measure_task checks the size
    monkeypatch.setattr(sources, "FOLDER_LIMITS", limits)
    (row,) = sources.gguf_task(file)(task).rows
    assert row.skipped is not None and row.skipped.startswith("not read: tensor")
    assert row.stored_bits == 8 * 64 * 32
