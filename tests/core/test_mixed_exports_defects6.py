"""quant_core.mixed.exports: a tensor kept as stored keeps its stored type in the
``--tensor-type`` lines (defects6)."""

from __future__ import annotations

import re

import gguf

from quant_core.mixed import STORED, Allocation, SensitivityRow
from quant_core.mixed.exports import NoLine, NoLineWhy, tensor_type_lines


def _cell(tensor: str, scheme: str, gtype: str | None) -> SensitivityRow:
    return SensitivityRow(tensor, scheme, (2, 64), 2048, 1088, 8.5, 1e-4, 40.0, 0.01, 1.0,
                          True, None, None, 0.1, None, gtype)  # fmt: skip


def _alloc(recipe: dict[str, str]) -> Allocation:
    n = len(recipe)
    return Allocation(tuple(recipe), tuple(recipe.values()), (850,) * n, (0.5,) * n,
                      (100,) * n, 850 * n, 0.0, 0)  # fmt: skip


def test_a_tensor_kept_as_stored_keeps_its_stored_type() -> None:
    """A tensor no candidate could take (NaN, a shape no block fits) got no line, so
    llama-quantize gave it the file type's default (Q4_K_M's q4_k, say): neither the size
    nor the error the allocation counted. Now a line keeps it as stored, in a ggml type
    name llama-quantize's ``parse_ggml_type`` takes (the ``gguf`` package's names,
    case-insensitive); float64, which llama-quantize does not write, is listed with why."""
    recipe = {
        "model.layers.0.mlp.up_proj.weight": STORED,
        "model.layers.1.mlp.up_proj.weight": STORED,
        "model.layers.2.mlp.up_proj.weight": "Q8_0",
        "model.layers.0.mlp.down_proj.weight": STORED,
        "lm_head.weight": STORED,
        "model.layers.3.mlp.up_proj.weight": STORED,
    }
    rows = [_cell(t, "Q8_0", "Q8_0") for t in recipe]
    stored = {
        "model.layers.0.mlp.up_proj.weight": "bfloat16",
        "model.layers.1.mlp.up_proj.weight": "bfloat16",
        "model.layers.0.mlp.down_proj.weight": "float32",
        "lm_head.weight": "float16",
        "model.layers.3.mlp.up_proj.weight": "float64",
    }
    out = tensor_type_lines(_alloc(recipe), rows, stored)
    assert out.lines == (
        r"^blk\.(0|1)\.ffn_up\.weight$=bf16",
        r"^blk\.(2)\.ffn_up\.weight$=q8_0",
        r"^blk\.(0)\.ffn_down\.weight$=f32",
        r"^output\.weight$=f16",
    )
    assert out.skipped == (
        NoLine(
            "model.layers.3.mlp.up_proj.weight",
            NoLineWhy.KEPT_TYPE,
            "kept as stored in float64, which llama-quantize does not write",
        ),
    )
    names = {t.name.lower() for t in gguf.GGMLQuantizationType}
    assert {line.rpartition("=")[2] for line in out.lines} <= names
    assert re.search(out.lines[0].rpartition("=")[0], "blk.1.ffn_up.weight")
    # with no stored types given, it says so
    (why,) = {s.text for s in tensor_type_lines(_alloc(recipe), rows).skipped}
    assert why == "kept as stored, its stored type not given"
