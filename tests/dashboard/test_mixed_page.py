"""AppTest: the Mixed precision page on the bundled MiniLM, on a model folder without a
config.json (table and allocation, no output to judge, worker processes, a Ray address
that does not answer) and on a tiny random Llama (KL and perplexity); URL state and bad
input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st
import torch
from hostile import HOSTILE, HOSTILE_NAME, shows, unsafe
from markdown_text import plain
from streamlit.testing.v1 import AppTest

from dashboard.services.display.metric_help import Metric
from dashboard.services.display.text import html_literal
from dashboard.services.mixed import runner
from dashboard.services.mixed.runner import RAY_ENV, WARMING_TEXT, shutdown_pools
from dashboard.services.model.roots import ROOTS_ENV
from dashboard.services.model.shards import write_sharded
from quant_core.mixed import SHIPPED

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "mixed.py"
N_WEIGHTS = 40  # MiniLM: 37 linear layers and 3 embedding tables

pytestmark = pytest.mark.slow


def open_page(state: dict[str, object] | None = None, **query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(str(PAGE), default_timeout=600)
    for k, v in query.items():
        at.query_params[k] = v
    for k, v in (state or {}).items():
        at.session_state[k] = v
    return at.run()


def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def query(at: AppTest, key: str) -> str:
    value = at.query_params[key]
    return value[0] if isinstance(value, list) else value


def test_bundled_model_default() -> None:
    at = open_page()
    no_errors(at)
    m = metrics(at)
    assert float(m["Bits per weight"]) <= 4.5
    # 4.5 bits per weight against 16: smaller, and each card says what it measures
    assert float(m["Smaller than 16-bit"].rstrip("×")) >= 16 / 4.5 - 0.01
    helps = {x.label: x.help for x in at.metric}
    assert helps["Bits per weight"] == Metric.BITS_PER_ELEMENT.definition
    assert helps["Smaller than 16-bit"] == Metric.SIZE_RATIO.definition
    cosines = {k: float(v) for k, v in m.items() if k.startswith("Embedding cosine")}
    assert len(cosines) == 2 and all(0.5 < c <= 1 for c in cosines.values())
    assert query(at, "mx.budget") == "4.5bpw"
    assert query(at, "mx.cands").split(",") == [*SHIPPED, "int4_g128", "int8_pc"]
    assert any(f"{N_WEIGHTS} weights × 11 schemes" in c.value for c in at.caption)
    # MiniLM's rows (384 and 1536 values) do not divide Q4_K's super-blocks: its fallback
    assert any("Q4_K is stored as Q5_0" in plain(c.value) for c in at.caption)
    heat = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(heat["data"][0]["y"]) == N_WEIGHTS
    assert len(heat["data"][1]["y"]) == N_WEIGHTS  # one allocated cell per row
    table = at.dataframe[-1].value
    assert len(table) == N_WEIGHTS and set(table["scheme"]) <= set(query(at, "mx.cands").split(","))
    # a bigger budget: more bits, a closer embedding
    at.number_input(key="mx_value").set_value(6.0).run()
    no_errors(at)
    assert 5.5 < float(metrics(at)["Bits per weight"]) <= 6.0


def test_the_error_vs_size_chart_takes_the_pages_width() -> None:
    """Its labels are laid out for a plot at least PlotBox's 340 px wide; in half the page
    of a 1100 px window (about 200 px of plot) labels, subtitle and axis title were cut."""
    at = open_page().run()
    no_errors(at)
    in_columns = [el.key for col in at.columns for el in col.get("plotly_chart")]
    assert "mx_curve" not in in_columns
    assert "mx_curve" in [el.key for el in at.get("plotly_chart")]


def test_the_total_error_metric_has_a_label_that_fits_and_says_what_it_sums() -> None:
    """The label "Total error (Σ noise/signal)" was cut off in a quarter of the page at 1100
    px."""
    at = open_page(**{"mx.cands": "int8_pc,int4_g128", "mx.budget": "6bpw"})
    no_errors(at)
    (total,) = [m for m in at.metric if m.label.startswith("Total error")]
    assert total.label == "Total error" and "Σ noise/signal" in total.help
    assert len(total.label) <= len("Smaller than 16-bit")  # its neighbour, which fits


def test_the_url_carries_budget_candidates_and_floor() -> None:
    at = open_page(**{"mx.budget": "20MB", "mx.cands": "int8_pc,int4_g128", "mx.floor": "int8_pc"})
    no_errors(at)
    assert at.multiselect(key="mx_cands").value == ["int4_g128", "int8_pc"]
    assert at.radio(key="mx_unit").value.value == "MB"
    assert at.number_input(key="mx_value").value == 20.0
    assert at.selectbox(key="mx_floor").value == "int8_pc"
    assert float(metrics(at)["Size"].removesuffix(" MB")) <= 20.0
    table = at.dataframe[-1].value
    embeddings = table[table["tensor"].str.contains("embeddings")]
    assert (embeddings["scheme"] == "int8_pc").all()
    assert query(at, "mx.floor") == "int8_pc"


def test_bad_links_fall_back_with_a_warning() -> None:
    at = open_page(**{"mx.budget": "lots", "mx.cands": "int8_pc,q9,int4_g128", "mx.floor": "q9"})
    no_errors(at)
    text = " ".join(plain(w.value) for w in at.warning)
    assert "mx.budget='lots' is not a number and a unit" in text
    assert "Ignored the link's mx.cands (unknown scheme 'q9', left out)" in text
    assert "mx.floor='q9' is not a chosen scheme" in text
    assert at.multiselect(key="mx_cands").value == ["int4_g128", "int8_pc"]
    assert at.number_input(key="mx_value").value == 4.5


def test_a_budget_out_of_reach_says_what_is_reachable() -> None:
    at = open_page(**{"mx.budget": "1bpw"})
    assert not at.exception
    (err,) = at.error
    assert "below the cheapest" in err.value and "reachable are" in err.value
    assert at.get("plotly_chart")  # the heatmap is still drawn
    assert [b.label for b in at.get("download_button")] == ["Table (CSV)"]


def test_bad_pins_are_named_and_the_page_goes_on() -> None:
    at = open_page()
    at.text_area(key="mx_pins").set_value("query = int9\n").run()
    assert "pin line 1: 'int9' is not a chosen scheme" in plain(at.error[0].value)
    assert metrics(at)["Bits per weight"]
    at.text_area(key="mx_pins").set_value(r"attention\.self\.query = int8_pc").run()
    no_errors(at)
    table = at.dataframe[-1].value
    assert (table[table["tensor"].str.contains("query")]["scheme"] == "int8_pc").all()


def test_a_link_carries_the_pins_and_the_importance_toggle() -> None:
    """Pins and "Weigh errors by input importance" were left out of the URL: a reloaded or
    shared link allocated without the pins."""
    pins = r"attention\.self\.query = int8_pc"
    at = open_page(**{"mx.cands": "int8_pc,int4_g128", "mx.pins": pins, "mx.imp": "off"})
    no_errors(at)
    assert at.text_area(key="mx_pins").value == pins
    assert at.toggle(key="mx_importance").value is False
    table = at.dataframe[-1].value
    assert (table[table["tensor"].str.contains("query")]["scheme"] == "int8_pc").all()
    assert query(at, "mx.pins") == pins and query(at, "mx.imp") == "off"
    at.toggle(key="mx_importance").set_value(True).run()
    at.text_area(key="mx_pins").set_value("").run()
    no_errors(at)
    assert "mx.imp" not in at.query_params and "mx.pins" not in at.query_params


def _t(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


@pytest.fixture
def roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_llama: Path) -> Path:
    shards = [
        {"model.layers.0.self_attn.q_proj.weight": _t(128, 128, seed=1),
         "model.layers.0.input_layernorm.weight": torch.ones(128)},
        {"model.layers.0.mlp.down_proj.weight": _t(128, 256, seed=2),
         "lm_head.weight": _t(200, 128, seed=3)},
    ]  # fmt: skip
    write_sharded(tmp_path / "weights-only", shards, 2)
    (tmp_path / "llama").symlink_to(tiny_llama, target_is_directory=True)
    monkeypatch.setenv(ROOTS_ENV, f"{tmp_path}:{tiny_llama.parent}")
    # worker processes run the eager kernels (the same results): no compiling per process
    monkeypatch.setenv("QLAB_COMPILE", "0")
    shutdown_pools()  # each test meets a cold pool
    yield tmp_path
    shutdown_pools()


def open_folder(roots: Path, name: str) -> AppTest:
    """The page opened on the folder ``roots / name`` (the model source set before the
    first run: the bundled model is not measured on the way)."""
    path = str((roots / name).resolve())
    return open_page({"m_source": "folder", "m_folder": path})


def test_a_folder_without_config_json_gets_table_and_allocation(
    roots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RAY_ENV, "127.0.0.1:9")  # nothing listens there
    # no table is small enough for this process: the workers' path and Ray's fallback
    monkeypatch.setattr(runner, "IN_PROCESS_MAX_ELEMENTS", 0)
    at = open_folder(roots, "weights-only")
    no_errors(at)
    text = " ".join(plain(w.value) for w in at.warning)
    assert "no answer from 127.0.0.1:9" in text
    assert "running on this machine, 2 worker processes instead" in text
    captions = " ".join(plain(c.value) for c in at.caption)
    assert "no config.json" in captions
    assert "plain sums of squared weight errors" in captions
    assert "3 weights × 11 schemes" in captions
    # the page started the workers (prewarm) and says that they are warming
    assert plain(WARMING_TEXT) in captions
    table = at.dataframe[-1].value
    assert sorted(table["tensor"]) == [
        "lm_head.weight",
        "model.layers.0.mlp.down_proj.weight",
        "model.layers.0.self_attn.q_proj.weight",
    ]
    assert any("no config.json" in plain(i.value) for i in at.info)
    assert not [b for b in at.button if b.key == "mx_judge"]


def test_a_small_folders_table_runs_in_the_servers_warm_process(
    roots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of at most ``IN_PROCESS_MAX_ELEMENTS`` weight elements is measured here,
    where the kernels are warm, not in fresh workers that compile theirs first; the caption
    says so, and Ray is not even looked for (no warning about the address that does not
    answer). Its rows are the workers' rows (``test_mixed_runner``)."""
    monkeypatch.setenv(RAY_ENV, "127.0.0.1:9")  # nothing listens there
    at = open_folder(roots, "weights-only")
    no_errors(at)
    assert not at.warning
    captions = " ".join(plain(c.value) for c in at.caption)
    n = 128 * 128 + 128 * 256 + 200 * 128
    assert (
        f"the table runs on this machine, in the app's own process (a small model, {n:,} "
        "weight elements" in captions
    )
    assert len(at.dataframe[-1].value) == 3


def test_a_causal_lm_folder_is_judged_by_kl_and_perplexity(roots: Path) -> None:
    at = open_folder(roots, "llama")
    no_errors(at)
    # the float model ran on the calibration text: its layers' errors are weighted
    assert not any("plain sums of squared" in c.value for c in at.caption)
    at.number_input(key="mx_tokens").set_value(64).run()
    at.button(key="mx_judge").click().run()
    no_errors(at)
    m = metrics(at)
    kl = {k: v for k, v in m.items() if k.startswith("KL, ")}
    ppl = {k: v for k, v in m.items() if k.startswith("Perplexity, ")}
    assert len(kl) == 2 and len(ppl) == 2
    assert all(float(v.split()[0]) >= 0 for v in kl.values())
    assert any("Float model perplexity" in c.value and "64 tokens" in c.value for c in at.caption)
    # the tiny Llama's names have llama.cpp spellings
    code = at.code[0].value if at.code else ""
    chosen = at.dataframe[-1].value
    if chosen["scheme"].isin(["Q4_0", "Q8_0", "MXFP4"]).any():
        assert "--tensor-type '^" in code


def test_hostile_folder_tensor_names_and_pins_are_shown_literally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder and a tensor named like an image, a link and HTML, and a pin typed like
    one: nothing renders (``hostile.unsafe``), and the heatmap names the tensor as it is."""
    weight = f"{HOSTILE}.weight"
    g = torch.Generator().manual_seed(0)
    target = tmp_path / HOSTILE_NAME
    write_sharded(target, [{weight: torch.randn(32, 64, generator=g),
                            "model.layers.0.mlp.up_proj.weight": torch.randn(32, 64, generator=g)}],
                  1)  # fmt: skip
    monkeypatch.setenv(ROOTS_ENV, str(tmp_path))
    monkeypatch.setenv("QLAB_COMPILE", "0")  # the worker processes' kernels, as above
    try:
        at = open_page(
            {"m_source": "folder", "m_folder": str(target.resolve()),
             "mx_pins": f"{HOSTILE} = Q9"},
            **{"mx.cands": "int8_pc,MXFP4"},
        )  # fmt: skip
        assert not at.exception, [e.value for e in at.exception]
        assert unsafe(at) == []
        assert shows(at, "![px](http:\\\\127.0.0.1:9\\name.png)")  # the folder, as named
        assert shows(at, "pin line 1: 'Q9' is not a chosen scheme")
        heat = json.loads(at.get("plotly_chart")[0].proto.spec)
        assert html_literal(weight) in heat["data"][0]["y"]
    finally:
        shutdown_pools()


def test_an_export_with_no_line_is_not_offered_as_an_empty_file() -> None:
    """Candidates without a GGUF type give no --tensor-type line: the file would be empty.
    Its button is disabled and the caption says why, counted."""
    at = open_page(**{"mx.budget": "20MB", "mx.cands": "int8_pc,int4_g128", "mx.floor": "int8_pc"})
    no_errors(at)
    buttons = {b.label: b for b in at.get("download_button")}
    assert buttons["llama.cpp --tensor-type file"].proto.disabled
    assert not buttons["Recipe (JSON)"].proto.disabled
    captions = " ".join(plain(c.value) for c in at.caption)
    assert f"{N_WEIGHTS} of {N_WEIGHTS} tensors have no --tensor-type line" in captions
    assert "whose scheme has no GGUF type" in captions


def test_minilm_gets_llama_cpp_lines_under_its_bert_names() -> None:
    """MiniLM's BERT names are renamed as llama.cpp's converter does: the shipped formats
    give lines; the position and token-type embeddings (never quantized by llama-quantize)
    and the pooler (dropped by the converter) get none, and the caption says why."""
    at = open_page()
    no_errors(at)
    buttons = {b.label: b for b in at.get("download_button")}
    assert not buttons["llama.cpp --tensor-type file"].proto.disabled
    captions = " ".join(plain(c.value) for c in at.caption)
    m = re.search(rf"(\d+) of {N_WEIGHTS} tensors (?:has|have) no --tensor-type line", captions)
    assert m is not None and int(m[1]) < N_WEIGHTS - 30  # 36 layer weights + token_embd
    assert "2 that llama-quantize never quantizes" in captions
    assert "1 with no llama.cpp name" in captions


def test_changing_the_budgets_unit_keeps_its_size() -> None:
    """4.5 bits per weight became "4.5 MB" when the unit changed: below every candidate."""
    from quant_core.mixed import BudgetUnit

    at = open_page()
    size = metrics(at)["Size"]
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    no_errors(at)
    assert at.number_input(key="mx_value").value == pytest.approx(float(size.split()[0]), 0.01)
    assert query(at, "mx.budget").endswith("MB")
    assert float(metrics(at)["Bits per weight"]) == pytest.approx(4.5, abs=0.01)
    at.radio(key="mx_unit").set_value(BudgetUnit.BITS_PER_WEIGHT).run()
    no_errors(at)
    assert at.number_input(key="mx_value").value == pytest.approx(4.5, abs=0.01)
