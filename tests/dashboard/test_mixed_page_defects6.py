"""AppTest: defects of the Mixed precision page (defects6)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import streamlit as st
import torch
from markdown_text import plain
from safetensors.torch import save_file
from streamlit.testing.v1 import AppTest

from dashboard.services.model.roots import ROOTS_ENV

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "mixed.py"


def test_a_tensor_kept_as_stored_is_exported_and_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bf16 weight with a NaN, kept as stored: the --tensor-type lines had none for it (so
    llama-quantize gave it the file type's default) and the heatmap marked no cell of its
    row. Now a line keeps it bf16 and the heatmap's "kept as stored" column rings it."""
    g = torch.Generator().manual_seed(0)
    bad = torch.randn(64, 64, generator=g).to(torch.bfloat16)
    bad[3, 5] = math.nan
    folder = tmp_path / "llama"
    folder.mkdir()
    save_file({"model.layers.0.mlp.up_proj.weight": bad,
               "model.layers.0.mlp.down_proj.weight": torch.randn(64, 64, generator=g)},
              str(folder / "model.safetensors"))  # fmt: skip
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    monkeypatch.setenv("QLAB_COMPILE", "0")
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=600)
    at.query_params["mx.budget"] = "12bpw"  # the kept bf16 tensor is 16 of it
    at.session_state["m_source"] = "folder"
    at.session_state["m_folder"] = str(folder)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]
    table = at.dataframe[-1].value.set_index("tensor")
    assert table.loc["model.layers.0.mlp.up_proj.weight", "scheme"] == "stored"
    (code,) = [c.value for c in at.code]
    assert r"--tensor-type '^blk\.(0)\.ffn_up\.weight$=bf16'" in code, code
    assert "ffn_down" in code
    heat = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "Sensitivity" in json.loads(c.proto.spec)["layout"]["title"]["text"]
    )
    ring = heat["data"][1]
    marks = dict(zip(ring["y"], ring["x"], strict=True))
    assert marks["model.layers.0.mlp.up_proj.weight"] == "kept as stored"
    assert heat["data"][0]["x"][-1] == "kept as stored"


@pytest.mark.parametrize(("budget", "step"), [("0.005MB", 0.0002), ("0.000005GB", 2e-7)])
def test_a_links_first_run_steps_the_budget_by_the_models_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: str, step: float
) -> None:
    """From a link with the budget in MB or GB, the first run's +/- stepped by 1 MB or
    0.01 GB (the weight count was set only once the table's tasks were made, after the
    sidebar): 200 times this folder's size. The count comes from the headers before the
    sidebar now: a quarter bit per weight of its 8,192 weights, 0.000256 MB, rounded down
    to 1-2-5."""
    from dashboard.services.mixed.state import budget_step
    from quant_core.mixed import BudgetUnit

    g = torch.Generator().manual_seed(1)
    folder = tmp_path / "small"
    folder.mkdir()
    save_file({"a.weight": torch.randn(64, 64, generator=g),
               "b.weight": torch.randn(64, 64, generator=g)},
              str(folder / "model.safetensors"))  # fmt: skip
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    monkeypatch.setenv("QLAB_COMPILE", "0")
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=600)
    at.query_params["mx.budget"] = budget
    at.session_state["m_source"] = "folder"
    at.session_state["m_folder"] = str(folder)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    unit = BudgetUnit.MEGABYTES if budget.endswith("MB") else BudgetUnit.GIGABYTES
    assert at.number_input(key="mx_value").step == step == budget_step(unit, 8192)
