"""quant_core.mixed.exports: llama.cpp --tensor-type lines, the JSON recipe and the CSV."""

from __future__ import annotations

import csv
import io
import json
import re

from quant_core.mixed import STORED, Allocation, Budget, candidate_named
from quant_core.mixed.exports import gguf_name, recipe_json, table_csv, tensor_type_lines
from quant_core.mixed.sensitivity import ROW_FIELDS, SensitivityRow

CANDS = [candidate_named("q8_g32"), candidate_named("int4_g128")]


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
    assert gguf_name("encoder.layer.0.attention.self.query.weight") is None


def test_tensor_type_lines_group_layers_by_role_and_type() -> None:
    a = alloc(
        {
            "model.embed_tokens.weight": "q8_g32",
            "model.layers.0.self_attn.q_proj.weight": "q8_g32",
            "model.layers.3.self_attn.q_proj.weight": "q8_g32",
            "model.layers.1.self_attn.q_proj.weight": "int4_g128",  # no GGUF type
            "model.layers.0.mlp.weird.weight": "q8_g32",  # no llama.cpp name
            "model.layers.2.mlp.up_proj.weight": STORED,
        }
    )
    out = tensor_type_lines(a, CANDS)
    assert out.lines == (r"^token_embd\.weight$=q8_0", r"^blk\.(0|3)\.attn_q\.weight$=q8_0")
    assert dict(out.skipped) == {
        "model.layers.1.self_attn.q_proj.weight": "int4_g128 has no GGUF type",
        "model.layers.0.mlp.weird.weight": "no llama.cpp name for it here",
        "model.layers.2.mlp.up_proj.weight": "kept as stored",
    }
    # each pattern matches exactly the GGUF names of the tensors it stands for
    pattern = re.compile(out.lines[1].rpartition("=")[0])
    hits = [f"blk.{i}.attn_q.weight" for i in range(12) if pattern.search(f"blk.{i}.attn_q.weight")]
    assert hits == ["blk.0.attn_q.weight", "blk.3.attn_q.weight"]
    assert not pattern.search("blk.30.attn_q.weight")
    assert out.file_text().splitlines() == list(out.lines)
    assert out.command_args().startswith("--tensor-type '^token_embd")


def test_recipe_json_names_schemes_by_the_labs_names() -> None:
    a = alloc({"x.weight": "q8_g32", "y.weight": "int4_g128"})
    doc = json.loads(recipe_json(a, CANDS, Budget(8.5), "tiny"))
    assert doc["tensors"] == {"x.weight": "q8_g32", "y.weight": "int4_g128"}
    assert doc["budget"] == "8.5 bpw" and doc["source"] == "tiny"
    assert doc["bits_per_weight"] == 8.5 and doc["bytes"] == 2 * 107  # ceil(850 / 8)
    assert doc["schemes"]["q8_g32"]["gguf_type"] == "Q8_0"
    assert doc["schemes"]["int4_g128"]["granularity"] == {"kind": "group", "group_size": 128}
    assert doc["schemes"]["int4_g128"]["mode"] == "asymmetric"


def test_csv_has_every_cell_and_marks_the_chosen_ones() -> None:
    nan = float("nan")
    rows = [
        SensitivityRow("t", "q8_g32", (2, 64), 2048, 1088, 8.5, 1e-4, 40.0, 0.01, 1.0, True,
                       None, None, 0.1),
        SensitivityRow("t", "int4_g128", (2, 64), 2048, 0, nan, nan, nan, nan, 1.0, True, None,
                       "group size 128 must divide the last dimension 64", 0.0),
    ]  # fmt: skip
    text = table_csv(rows, {"t": "q8_g32"})
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert list(parsed[0]) == [*ROW_FIELDS, "chosen"]
    assert [p["chosen"] for p in parsed] == ["True", "False"]
    assert parsed[0]["shape"] == "2×64" and parsed[1]["mse"] == "nan"
    assert parsed[1]["skipped"].startswith("group size 128")
