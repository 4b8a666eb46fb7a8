"""Defects of the quantized-file report found by a user's hunt (defects5)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from dashboard.services.display.bits import bits_text
from dashboard.services.files.report import (
    FileReportStore,
    FileRow,
    listing_table,
    mix_figure,
    mix_table,
    rows_table,
    run_file_report,
)
from quant_core.files import open_quantized
from tests.core.quantized_files import (
    pack_compressed,
    pack_gptq,
    prefixed,
    random_int_layer,
    random_signed_layer,
    write_folder,
)

_CT = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {
                "num_bits": 4,
                "type": "int",
                "symmetric": True,
                "strategy": "group",
                "group_size": 32,
            },
        }
    },
}


def test_the_whole_model_tables_write_bits_as_the_explorers_metric(tmp_path: Path) -> None:
    """A compressed-tensors int4 g32 tensor spends 4.5078125 bits per weight (its
    weight_shape tensor too): the explorer's "Bits per weight, as stored" and the page's
    caption said 4.508, the mix, the listing, the report and the mix's hover 4.5078 and
    4.508 (``.3f``) three ways."""
    layer = random_signed_layer(np.random.default_rng(0), 64, 256, 4, 32, symmetric=True)
    parts = prefixed("model.layers.0.mlp.up_proj", pack_compressed(layer, 4))
    qfile = open_quantized(write_folder(tmp_path / "ct", parts, _CT))
    (entry,) = qfile.tensors
    assert entry.bits_per_weight == 4.5078125  # (64*256/2 + 64*8*2 + 16) * 8 / 16384
    shown = bits_text(entry.bits_per_weight)
    assert shown == "4.508"
    assert list(mix_table(qfile)["bits/weight"]) == [4.508]
    assert list(listing_table(qfile)["bits/weight"]) == [4.508]
    assert list(rows_table([FileRow(1, 1, entry, None)])["bits/weight"]) == [4.508]
    bar = mix_figure(qfile).data[0]
    assert bar.customdata[0][1] == shown
    assert "%{customdata[1]} bits/weight" in bar.hovertemplate


def gptq_with_a_bad_tensor(folder: Path) -> tuple[Path, Path]:
    """A GPTQ folder of two layers whose first (``down_proj``, in the file's order) has a
    ``g_idx`` naming groups 100..107 of 8, and the original both were made from."""
    rng = np.random.default_rng(1)
    # zero points from 1: GPTQ v1 stores zero - 1, and a zero of 0 wraps to 15
    good, bad = (random_int_layer(rng, 64, 256, 4, 32, zero_lo=1) for _ in range(2))
    broken = pack_gptq(bad, 4, v1=True)
    broken["g_idx"] = broken["g_idx"] + 100
    parts = {
        **prefixed("model.layers.0.mlp.up_proj", pack_gptq(good, 4, v1=True)),
        **prefixed("model.layers.0.mlp.down_proj", broken),
    }
    config = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True}
    quantized = write_folder(folder / "gptq", parts, config)
    original = folder / "orig.safetensors"
    weights = {"up_proj": good.dequantize(), "down_proj": bad.dequantize()}
    weights = {k: v.contiguous() for k, v in weights.items()}
    save_file({f"model.layers.0.mlp.{k}.weight": v for k, v in weights.items()}, str(original))
    return quantized, original


def test_one_tensor_that_does_not_decode_is_a_note_not_the_end_of_the_report(
    tmp_path: Path,
) -> None:
    """The report raised at the first tensor whose bytes do not decode: the page showed
    the error above an empty table, and the tensors after it were never measured."""
    quantized, original = gptq_with_a_bad_tensor(tmp_path)
    qfile, ofile = open_quantized(quantized), open_quantized(original)
    rows = run_file_report(FileReportStore(), "k", qfile, ofile, with_rtn=False)
    by_name = {r.entry.name: r for r in rows}
    assert len(rows) == 2
    bad = by_name["model.layers.0.mlp.down_proj.weight"]
    assert bad.mse is None and bad.original == "model.layers.0.mlp.down_proj.weight"
    assert bad.note.startswith("not decoded: "), bad.note
    assert "g_idx names groups 100..107" in bad.note, bad.note
    good = by_name["model.layers.0.mlp.up_proj.weight"]
    # the original is the layer's exact dequantization (fp16 scale times a small integer)
    assert good.mse == 0.0 and good.note == ""
    assert torch.isinf(torch.tensor(good.sqnr_db))


def test_a_compressed_tensors_act_order_tensor_names_its_g_idx_among_the_extra_bytes(
    tmp_path: Path,
) -> None:
    """ "The file's 10,512 bytes are 1,040 more than the codes and scales drawn below …:
    0.5078 bits per value of its weight_shape tensor": 1,024 of them are its weight_g_idx."""
    from dashboard.services.files.tensor import FileTensor, extra_bytes_note, file_exploration

    layer = random_signed_layer(
        np.random.default_rng(3), 64, 256, 4, 32, symmetric=False, act_order=True
    )
    config = json.loads(json.dumps(_CT))
    config["config_groups"]["group_0"]["weights"].update(symmetric=False, actorder="group")
    parts = prefixed("model.layers.0.mlp.up_proj", pack_compressed(layer, 4))
    qfile = open_quantized(write_folder(tmp_path / "ct", parts, config))
    (entry,) = qfile.tensors
    assert entry.type_name.endswith(" act-order")
    ft = FileTensor(qfile, qfile.load(entry.name))
    fexp = file_exploration(ft)
    note = extra_bytes_note(entry, fexp.stored.storage, qfile.kind)
    # 256 int32 g_idx (1,024 bytes) and 2 int64 weight_shape (16 bytes)
    assert note is not None and "are 1,040 more than" in note, note
    assert note.endswith("of its weight_g_idx and weight_shape tensors."), note
