"""The explorer's export records the name of the tensor it was made from, so that the
reopened file is matched with its original by name (defects6). It recorded none: the
reopened export's tensor was named after the file ("quantized_int4_asym_g8"), never a
name the original holds."""

from __future__ import annotations

import pytest
import torch

from dashboard.services.explorer import exports
from dashboard.services.explorer.explore import explore
from dashboard.services.files.tags import TAG_ROOM, option_tag
from dashboard.services.files.tensor import source_tensor_name
from dashboard.services.sources.choice import FolderSource, SyntheticSource
from dashboard.services.sources.prepared import prepare
from dashboard.services.sources.synthetic import SyntheticSpec
from quant_core import Mode, PerGroup, QuantConfig
from quant_core.files import compare_with_original, open_quantized

NAME = "model.layers.0.mlp.up_proj.weight"
X = torch.randn(8, 32, generator=torch.Generator().manual_seed(2))
CFG = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(8))


def test_the_export_is_matched_with_its_original_by_name(tmp_path) -> None:
    path = tmp_path / "quantized_int4_asym_g8.safetensors"
    path.write_bytes(exports.quantized_safetensors(explore(X, CFG), NAME))
    qfile = open_quantized(path)
    (entry,) = qfile.tensors
    assert entry.name == NAME
    assert qfile.original_name(NAME, {NAME, "model.norm.weight"}) == NAME
    cmp = compare_with_original(qfile.load(NAME), X, NAME)
    assert cmp.rtn is not None and torch.equal(cmp.rtn.codes, qfile.load(NAME).quantized.codes)


def test_an_export_of_a_tensor_with_no_name_is_named_by_its_file(tmp_path) -> None:
    path = tmp_path / "up.safetensors"
    path.write_bytes(exports.quantized_safetensors(explore(X, CFG)))
    (entry,) = open_quantized(path).tensors
    assert entry.name == "up"


@pytest.mark.parametrize(
    ("choice", "want"),
    [(FolderSource("/m", NAME), NAME), (SyntheticSource(SyntheticSpec()), None)],
    ids=["checkpoint", "synthetic"],
)
def test_the_name_recorded_is_the_sources_tensor(choice, want) -> None:
    assert source_tensor_name(prepare(choice, X, "x")) == want


@pytest.mark.parametrize(
    ("type_name", "tag"),
    [
        ("Q4_K", "Q4_K"),
        ("AWQ int4 g128", "AWQ int4 g128"),  # fits: whole
        ("bnb FP4 b64 + DQ", "bnb FP4 b64 + DQ"),
        ("GPTQ int4 g128 act-order", "int4 g128 act"),
        ("GPTQ int4 g32 act-order", "int4 g32 act"),
        ("GPTQ int4 per-channel act-order", "int4 per-ch act"),
        ("NF4 + double quant", "NF4 + DQ"),
        ("CT int4 g128 asym", "int4 g128 asym"),
        ("CT int4 g128 asym act-order", "i4 g128 asym act"),
    ],
)
def test_a_long_stored_type_is_compacted_to_fit_beside_the_name(type_name, tag) -> None:
    assert option_tag(type_name) == tag
    assert len(option_tag(type_name)) <= TAG_ROOM == 16


def test_a_room_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="room must be at least 1 character, got 0"):
        option_tag("Q4_K", 0)
