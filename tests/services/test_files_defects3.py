"""Defects of the quantized-file report found by a user's hunt (defects3)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from dashboard.services.display.counts import counted
from dashboard.services.display.sizes import compact_bytes, compact_count
from dashboard.services.explorer import exports
from dashboard.services.explorer.explore import explore
from dashboard.services.files.report import (
    FileRow,
    listing_table,
    mix_figure,
    mix_table,
    rows_table,
)
from dashboard.services.model.evaluate import SkippedLayer, iter_layers
from dashboard.services.model.throughput import Throughput
from quant_core import QuantConfig
from quant_core.files import StoredTensor, TensorEntry, compare_with_original, open_quantized


def _nf4_export(folder: Path) -> Path:
    values = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    path = folder / "up-nf4.safetensors"
    path.write_bytes(
        exports.quantized_safetensors(explore(values, QuantConfig.from_name("NF4_DQ")))
    )
    return path


def test_the_whole_model_tables_name_a_stored_type_as_the_explorer_does(tmp_path: Path) -> None:
    """The explorer's "Stored type" says "NF4 + double quant" for the lab's export; the whole
    model page's mix, its bar chart, the listing and the report said the key, NF4_DQ."""
    qfile = open_quantized(_nf4_export(tmp_path))
    assert list(mix_table(qfile)["type"]) == ["NF4 + double quant"]
    assert list(listing_table(qfile)["type"]) == ["NF4 + double quant"]
    assert list(mix_figure(qfile).data[0].x) == ["NF4 + double quant"]
    row = FileRow(1, 1, qfile.tensors[0], None)
    assert list(rows_table([row])["type"]) == ["NF4 + double quant"]


def test_the_mix_charts_hover_counts_one_tensor_in_the_singular(tmp_path: Path) -> None:
    """The bar's hover read "… MB in 1 tensors"."""
    fig = mix_figure(open_quantized(_nf4_export(tmp_path)))
    bar = fig.data[0]
    assert bar.customdata[0][0] == "1 tensor"
    assert "%{customdata[0]}," in bar.hovertemplate and " tensors" not in bar.hovertemplate


def test_counted_says_one_in_the_singular() -> None:
    assert counted(1, "tensor") == "1 tensor"
    assert counted(0, "tensor") == "0 tensors"
    assert counted(2_048, "linear layer") == "2,048 linear layers"
    assert counted(2, "matrix", "matrices") == "2 matrices"
    with pytest.raises(TypeError, match="int"):
        counted(True, "tensor")


def test_the_folder_reports_throughput_counts_one_weight_in_the_singular() -> None:
    """The whole model page's line under a folder of one linear weight: "1 weights, …"."""
    line = Throughput(1, 16_384, 4_096, 0.01, 0.02).describe()
    assert line.startswith("1 weight, 16.4 kB read"), line
    assert Throughput(2, 0, 0, 0.0, 0.0).describe().startswith("2 weights,")


def test_a_size_at_one_decimal_never_writes_a_thousand_of_a_unit() -> None:
    """999,950 bytes read "1000.0 kB" (and 999,950,000 "1000.0 MB"): the unit was picked
    before rounding."""
    assert compact_bytes(999_950, 1) == "1.0 MB" and compact_bytes(999_999, 1) == "1.0 MB"
    assert compact_bytes(999_949, 1) == "999.9 kB"
    assert compact_bytes(999_950_000, 1) == "1.0 GB" and compact_bytes(999_949_999, 1) == "999.9 MB"
    assert compact_bytes(999, 1) == "999 B" and compact_bytes(1_000, 1) == "1.0 kB"
    assert compact_bytes(1_536, 1) == "1.5 kB" and compact_bytes(17_408, 1) == "17.4 kB"


def test_a_nonfinite_value_is_named_by_its_tensor_not_by_x_hat() -> None:
    """A file's F32 tensor holding a NaN: the whole model report's note (and the
    explorer's "Cannot compare") read "x_hat holds 1 NaN and 0 Inf value(s) out of 8;
    quantization needs finite values", naming an argument of error_metrics."""
    values = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    bad = values.clone()
    bad[1, 2] = math.nan
    entry = TensorEntry("blk.0.x.weight", "F32", (2, 4), 32, "f.gguf", False)
    with pytest.raises(ValueError) as caught:
        compare_with_original(StoredTensor(entry, None, values=bad), values, "model.x.weight")
    assert str(caught.value) == (
        "the file's blk.0.x.weight holds 1 NaN and 0 Inf values of 8: no error can be measured"
    )
    with pytest.raises(ValueError, match=r"^the original's model.x.weight holds 0 NaN and 1 Inf"):
        compare_with_original(
            StoredTensor(entry, None, values=values), values.masked_fill(bad.isnan(), math.inf),
            "model.x.weight",
        )  # fmt: skip


def test_an_index_of_one_shard_says_one_shard(tmp_path: Path) -> None:
    """A folder whose index lists one shard: the page's note read "1 shards listed by
    model.safetensors.index.json"."""
    shard = "model-00001-of-00001.safetensors"
    save_file({"a.weight": torch.ones(4, 4)}, str(tmp_path / shard))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {"a.weight": shard}})
    )
    assert "1 shard listed by model.safetensors.index.json" in open_quantized(tmp_path).notes


def test_a_folder_weight_with_nan_is_skipped_naming_the_weight_not_x(tmp_path: Path) -> None:
    """The whole-model folder report skipped a weight holding one NaN with "x holds 1 NaN
    and 0 Inf value(s) out of 4096; quantization needs finite values": ``x`` is
    ``quantize``'s argument, not anything on the page."""
    w = torch.randn(64, 64)
    w[3, 5] = float("nan")
    save_file({"a.weight": w, "b.weight": torch.randn(64, 64)}, str(tmp_path / "m.safetensors"))
    path = tmp_path / "m.safetensors"
    results = [r for _, _, r in iter_layers(path, QuantConfig.from_name("Q8_0"))]
    skipped = [r for r in results if isinstance(r, SkippedLayer)]
    assert [s.name for s in skipped] == ["a.weight"]
    assert skipped[0].reason == "the weight holds 1 NaN and 0 Inf values of 4,096"
    assert len(results) == 2


def test_compact_sizes_and_counts_never_write_an_exponent_or_a_thousand_of_a_unit() -> None:
    """The whole-model and mixed-precision pages showed a tiny model as "0.00 MB"; their
    sizes now come from ``compact_bytes``, which wrote 999,950 bytes as "1e+03 kB"."""
    assert compact_bytes(999_950) == "1 MB" and compact_bytes(999_999_999) == "1 GB"
    assert compact_bytes(16_384) == "16.4 kB" and compact_bytes(812) == "812 B"
    assert compact_bytes(8_388_608) == "8.39 MB" and compact_bytes(1_070_000_000) == "1.07 GB"
    assert compact_count(999_999) == "1M" and compact_count(12_345) == "12.3k"
    assert compact_count(9_999) == "9,999"
