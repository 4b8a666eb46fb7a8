"""Defects of the quantized-file report found by a user's hunt (defects5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dashboard.services.display.bits import bits_text
from dashboard.services.files.report import (
    FileRow,
    listing_table,
    mix_figure,
    mix_table,
    rows_table,
)
from quant_core.files import open_quantized
from tests.core.quantized_files import (
    pack_compressed,
    prefixed,
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
