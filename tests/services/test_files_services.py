"""The services that make quantized files a source: which paths are quantized files, the
explorer's view of a stored tensor (N-D GGUF tensors, act-order GPTQ) against its
original, the whole-file report and its mix, and the model roots as the reader's guard."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.teaching import teaching_panel
from dashboard.services.files.open import open_path, original_tensor, quantized_path
from dashboard.services.files.report import (
    FileReportStore,
    listing_table,
    mix_table,
    rows_table,
    run_file_report,
)
from dashboard.services.files.tensor import (
    FileTensor,
    as_matrix,
    entry_label,
    extra_bytes_note,
    file_exploration,
)
from dashboard.services.model.roots import PathRefused, parse_roots
from quant_core import Mode, PerGroup, QuantConfig, error_metrics
from quant_core.files import open_quantized
from tests.core.quantized_files import (
    GGML,
    pack_compressed,
    pack_gptq,
    prefixed,
    random_int_layer,
    random_signed_layer,
    write_folder,
    write_gguf,
)

GEN = torch.Generator().manual_seed(0)
UP = torch.randn(64, 256, generator=GEN)


@pytest.fixture
def gguf_file(tmp_path: Path) -> Path:
    experts = torch.randn(3, 8, 64, generator=GEN)
    write_gguf(
        tmp_path / "m.gguf",
        {
            "blk.0.ffn_up.weight": (gguf.quants.quantize(UP.numpy(), GGML.Q4_0), GGML.Q4_0),
            "blk.0.ffn_up_exps.weight": (
                gguf.quants.quantize(experts.numpy(), GGML.Q8_0),
                GGML.Q8_0,
            ),
            "output_norm.weight": (np.ones(64, dtype=np.float32), None),
        },
        metadata={"llama.block_count": 1},
    )
    return tmp_path / "m.gguf"


def test_an_nd_tensor_is_explored_as_the_matrix_every_page_draws(gguf_file: Path) -> None:
    f = open_quantized(gguf_file)
    st = f.load("blk.0.ffn_up_exps.weight")
    matrix = as_matrix(st.quantized, 3, 8 * 64)
    assert matrix is not None and matrix.layout.scale_shape == (3, 16)
    assert torch.equal(matrix.dequantize(), st.dequantize().reshape(3, 512))
    fexp = file_exploration(FileTensor(f, st))
    assert fexp.unmodelled is None and fexp.stored is not None
    assert fexp.stored.metrics.mse == 0  # no original: the stored values themselves
    assert entry_label(st.entry) == "blk.0.ffn_up_exps.weight  Q8_0 [3, 8, 64] 1.6 kB"


def test_act_order_gptq_against_its_original(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    layer = random_int_layer(rng, 32, 64, 4, 32, act_order=True)
    config = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True}
    write_folder(
        tmp_path, prefixed("model.layers.0.mlp.up_proj", pack_gptq(layer, 4, True)), config
    )
    f = open_quantized(tmp_path)
    st = f.load("model.layers.0.mlp.up_proj.weight")
    original = layer.dequantize() + 0.001 * torch.randn(32, 64, generator=GEN)
    fexp = file_exploration(FileTensor(f, st), original, "model.layers.0.mlp.up_proj.weight")
    order = st.column_order
    assert order is not None
    assert torch.equal(fexp.stored.original, original[:, order])
    expect = error_metrics(original[:, order], st.quantized.dequantize())
    assert fexp.comparison.file_metrics == expect
    assert fexp.rtn is not None and fexp.rtn.qt.config == st.quantized.config
    assert "act-order" in fexp.order_notes[0]


def test_whole_file_report_and_mix(gguf_file: Path, tmp_path: Path) -> None:
    original_folder = tmp_path / "orig"
    original_folder.mkdir()
    save_file(
        {"model.layers.0.mlp.up_proj.weight": UP, "model.norm.weight": torch.ones(64)},
        str(original_folder / "model.safetensors"),
    )
    f = open_quantized(gguf_file)
    original = open_quantized(original_folder)
    assert original_tensor(f, "blk.0.ffn_up.weight", original)[0] == (
        "model.layers.0.mlp.up_proj.weight"
    )
    seen = []
    rows = run_file_report(
        FileReportStore(), "k", f, original, True, on_rows=lambda r, t: seen.append(len(r))
    )
    assert seen[0] == 0 and seen[-1] == 3 and len(rows) == 3
    table = rows_table(rows).set_index("name")
    up = table.loc["blk.0.ffn_up.weight"]
    assert up["original"] == "model.layers.0.mlp.up_proj.weight"
    # made by the gguf package's Q4_0: llama.cpp's recipe rounds the original the same way
    assert up["mse"] == up["rtn_mse"] > 0
    assert table.loc["output_norm.weight", "mse"] == 0  # F32 stored exactly
    assert table.loc["blk.0.ffn_up_exps.weight", "note"] == "no tensor of that name in the original"
    mix = mix_table(f)
    assert mix["bytes"].sum() == f.nbytes and mix["type"].iloc[0] == "Q4_0"
    assert list(listing_table(f)["name"]) == [t.name for t in f.tensors]
    # a rerun resumes from the stored rows without reading again
    store = FileReportStore()
    store.add("k", rows[0])
    again = run_file_report(store, "k", f, original, True)
    assert again[0] is rows[0] and len(again) == 3


def test_which_paths_are_quantized_files(gguf_file: Path, tmp_path: Path) -> None:
    roots = parse_roots(str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    save_file({"w": torch.zeros(2, 2)}, str(plain / "model.safetensors"))
    gptq = tmp_path / "gptq"
    rng = np.random.default_rng(0)
    write_folder(
        gptq,
        prefixed("m", pack_gptq(random_int_layer(rng, 8, 32, 4, 32), 4, True)),
        {"quant_method": "gptq", "bits": 4, "group_size": 32},
    )
    assert quantized_path(str(gguf_file), roots)
    assert quantized_path(str(gptq), roots) and quantized_path(
        str(gptq / "model.safetensors"), roots
    )
    assert not quantized_path(str(plain), roots)
    assert not quantized_path(str(plain / "model.safetensors"), roots)


def test_the_roots_guard_every_file_read(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    write_gguf(outside / "m-00002-of-00002.gguf", {"b": (np.ones(32, np.float32), None)})
    write_gguf(inside / "m-00001-of-00002.gguf", {"a": (np.ones(32, np.float32), None)})
    (inside / "m-00002-of-00002.gguf").symlink_to(outside / "m-00002-of-00002.gguf")
    roots = parse_roots(str(inside))
    with pytest.raises(PathRefused, match=r"link that leads outside|outside the allowed"):
        open_path(str(inside / "m-00001-of-00002.gguf"), roots)
    with pytest.raises(PathRefused, match="outside the allowed folders"):
        open_path(str(outside / "m-00002-of-00002.gguf"), roots)


def _ct_exploration(tmp_path: Path, symmetric: bool):
    """A compressed-tensors int4 g32 tensor as llm-compressor packs it, explored (no
    original): its scales are the file's, ``max|r| / 8`` where its codes reach -8."""
    rng = np.random.default_rng(4)
    layer = random_signed_layer(rng, 8, 64, 4, 32, symmetric)
    layer.q[:, 0] = -8  # every group of column 0's reaches code -8: max|r| = 8 s
    layer.q[:, 32] = -8
    weights = {"num_bits": 4, "type": "int", "symmetric": symmetric, "strategy": "group"}
    config = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "group_0": {"targets": ["Linear"], "weights": weights | {"group_size": 32}}
        },
    }
    write_folder(
        tmp_path, prefixed("model.layers.0.mlp.up_proj", pack_compressed(layer, 4)), config
    )
    f = open_quantized(tmp_path)
    fexp = file_exploration(FileTensor(f, f.load("model.layers.0.mlp.up_proj.weight")))
    assert fexp.stored is not None
    return fexp.stored


def test_a_files_own_scale_is_shown_as_stored_not_derived_by_the_min_max_rule(
    tmp_path: Path,
) -> None:
    """The teaching panel wrote ``s = max|r| / 7 = 0.054474 / 7`` (a max|r| worked back from
    the scale) beside a note saying max|r| = 0.06226 and "lands on code -8, not on the
    lowest code -8": a file's scale need not be the lab's max|r| / 7 (this file's codes reach
    -8; compressed-tensors' own symmetric rule is max|r| / 7.5)."""
    exp = _ct_exploration(tmp_path, symmetric=True)
    panel = teaching_panel(exp, 0)
    scale = float(exp.qt.scale.reshape(-1)[0])
    assert panel.formulas[1].startswith(r"s = "), panel.formulas
    assert "stored" in panel.formulas[1] and r"\frac{\max|r|}" not in panel.formulas[1]
    (note,) = panel.notes
    assert f"s = {scale:.4g} is the one stored" in note and "not on the lowest" not in note
    assert f"rule's {8 * scale / 7:.4g}" in note  # max|r| = 8 s, the rule's max|r| / 7
    # compressed-tensors' calculate_qparams: max_val_pos / (bit_range / 2), bit_range 15
    assert "divides max|r| by (qmax − qmin)/2 = 7.5" in note and "by 8" not in note


def test_the_labs_own_scale_is_still_derived() -> None:
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(1))
    for mode in Mode:
        panel = teaching_panel(explore(x, QuantConfig(4, mode, PerGroup(32))), 0)
        assert r"\frac{" in panel.formulas[1] and "stored" not in panel.formulas[1]
        assert not any("is the one stored" in n for n in panel.notes)


def test_a_gguf_tensor_spends_nothing_beyond_its_codes_and_scales(gguf_file: Path) -> None:
    f = open_quantized(gguf_file)
    ft = FileTensor(f, f.load("blk.0.ffn_up.weight"))
    fexp = file_exploration(ft)
    assert fexp.stored is not None
    assert extra_bytes_note(ft.entry, fexp.stored.storage, f.kind) is None
