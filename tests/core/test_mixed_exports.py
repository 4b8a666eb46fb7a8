"""quant_core.mixed.exports: llama.cpp --tensor-type lines, the JSON recipe and the CSV."""

from __future__ import annotations

import csv
import io
import json
import re

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
    assert gguf_name("encoder.layer.0.attention.self.query.weight") is None


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
