"""Defects of the quantized-file reader found by a user's hunt (defects5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from quant_core.files import compare_with_original, open_quantized
from tests.core.quantized_files import pack_gptq, prefixed, random_int_layer, write_folder

_GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False}


@pytest.mark.parametrize(
    ("stored", "original"),
    [
        ("model.layers.0.mlp.up_proj", "layers.0.mlp.up_proj"),
        ("layers.0.mlp.up_proj", "model.layers.0.mlp.up_proj"),
    ],
    ids=["file-has-model-prefix", "original-has-model-prefix"],
)
def test_an_original_whose_names_differ_by_the_model_prefix_is_matched(
    tmp_path: Path, stored: str, original: str
) -> None:
    """A GPTQ folder names ``model.layers.0.mlp.up_proj.weight``, a checkpoint saved from
    the inner model ``layers.0.mlp.up_proj.weight`` (or the other way round): the explorer
    said "The original holds no tensor named …" and the whole model report matched none."""
    # zero points from 1: GPTQ v1 stores zero - 1, and a zero of 0 wraps to 15
    layer = random_int_layer(np.random.default_rng(0), 64, 256, 4, 32, zero_lo=1)
    qfile = open_quantized(
        write_folder(tmp_path / "q", prefixed(stored, pack_gptq(layer, 4, True)), _GPTQ)
    )
    path = tmp_path / "orig.safetensors"
    save_file({f"{original}.weight": layer.dequantize().contiguous()}, str(path))
    ofile = open_quantized(path)
    (entry,) = qfile.tensors
    names = {t.name for t in ofile.tensors}
    assert qfile.original_name(entry.name, names) == f"{original}.weight"
    # the exact name still wins over the prefixed one
    assert qfile.original_name(entry.name, {*names, entry.name}) == entry.name
    cmp = compare_with_original(
        qfile.load(entry.name), ofile.load(f"{original}.weight").dequantize(), original,
        qfile.metadata,
    )  # fmt: skip
    assert cmp.file_metrics.mse == 0.0  # the original is the layer's exact dequantization
    assert torch.isinf(torch.tensor(cmp.file_metrics.sqnr_db))


def test_a_name_of_another_layer_is_not_matched(tmp_path: Path) -> None:
    layer = random_int_layer(np.random.default_rng(0), 64, 256, 4, 32, zero_lo=1)
    parts = prefixed("model.layers.0.mlp.up_proj", pack_gptq(layer, 4, True))
    qfile = open_quantized(write_folder(tmp_path / "q", parts, _GPTQ))
    (entry,) = qfile.tensors
    others = {"layers.1.mlp.up_proj.weight", "model.model.layers.0.mlp.up_proj.weight"}
    assert qfile.original_name(entry.name, others) is None


def test_a_gguf_without_block_count_still_names_its_blocks_back(tmp_path: Path) -> None:
    """A GGUF whose writer left out ``llama.block_count`` (a script's ``GGUFWriter``, not
    llama.cpp's converter) mapped no ``blk.N`` tensor back to a Hugging Face name: the
    explorer said the original "holds no tensor named blk.0.ffn_up.weight", however it
    was spelled."""
    import gguf

    from tests.core.quantized_files import GGML, write_gguf

    up = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    q8 = (gguf.quants.quantize(up.numpy(), GGML.Q8_0), GGML.Q8_0)
    path = tmp_path / "no-count.gguf"
    write_gguf(path, {"blk.0.ffn_up.weight": q8, "blk.5.ffn_up.weight": q8, "output.weight": q8})
    qfile = open_quantized(path)
    assert "llama.block_count" not in qfile.metadata
    for n in (0, 5):
        names = qfile.entry(f"blk.{n}.ffn_up.weight").original_names
        assert f"model.layers.{n}.mlp.up_proj.weight" in names, names
    assert "lm_head.weight" in qfile.entry("output.weight").original_names
    original = {"model.layers.5.mlp.up_proj.weight"}
    assert qfile.original_name("blk.5.ffn_up.weight", original) == original.pop()


def test_a_header_listing_more_tensors_than_it_holds_says_so(tmp_path: Path) -> None:
    """A GGUF (``gguf.GGUFWriter``'s, two tensors) whose header's count says 3: "tensor 2's
    name claims a string of …", an index from 0 no page shows."""
    import struct

    import gguf

    from quant_core.files import QuantizedFileError
    from tests.core.quantized_files import GGML, write_gguf

    up = torch.randn(64, 256, generator=torch.Generator().manual_seed(0)).numpy()
    q8 = (gguf.quants.quantize(up, GGML.Q8_0), GGML.Q8_0)
    path = tmp_path / "more.gguf"
    write_gguf(path, {"blk.0.ffn_up.weight": q8, "blk.0.ffn_down.weight": q8})
    raw = bytearray(path.read_bytes())
    assert struct.unpack_from("<Q", raw, 8) == (2,)  # magic, version, then the tensor count
    struct.pack_into("<Q", raw, 8, 3)
    path.write_bytes(bytes(raw))
    # the third tensor's name is read from the padding and data after the second's
    message = (
        r"^more\.gguf: the name of tensor 3 of the 3 the header lists claims a string of "
        r"[\d,]+ bytes but only [\d,]+ remain in the file$"
    )
    with pytest.raises(QuantizedFileError, match=message):
        open_quantized(path)


def test_an_index_naming_one_missing_shard_says_one_shard_file(tmp_path: Path) -> None:
    """ "names 1 shard file(s) that … does not hold"."""
    from quant_core.files import QuantizedFileError

    layer = random_int_layer(np.random.default_rng(0), 64, 256, 4, 32, zero_lo=1)
    parts = {
        **prefixed("model.layers.0.mlp.up_proj", pack_gptq(layer, 4, True)),
        **prefixed("model.layers.1.mlp.up_proj", pack_gptq(layer, 4, True)),
    }
    folder = write_folder(tmp_path / "q", parts, _GPTQ, shards=2)
    (folder / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(QuantizedFileError, match="names 1 shard file that q does not hold: ") as e:
        open_quantized(folder)
    assert "(s)" not in str(e.value)


def test_a_header_claiming_one_tensor_too_many_for_its_bytes_says_tensor() -> None:
    from quant_core.files import QuantizedFileError, open_quantized_bytes

    raw = b"GGUF" + struct_u32(3) + struct_u64(1) + struct_u64(1)
    with pytest.raises(QuantizedFileError, match=r"claims 1 tensor and 1 metadata entry, more"):
        open_quantized_bytes(raw, "one.gguf")


def struct_u32(v: int) -> bytes:
    return v.to_bytes(4, "little")


def struct_u64(v: int) -> bytes:
    return v.to_bytes(8, "little")


def test_a_split_series_is_named_by_its_first_part_whichever_part_was_given(
    tmp_path: Path,
) -> None:
    """Opened from its second part, a series was named "m-00002-of-00002.gguf": the
    explorer's caption read "m-00002-of-00002.gguf · blk.0.ffn_up.weight" for a tensor of
    the first part, and the whole model page named the model by the part typed."""
    import gguf

    from tests.core.quantized_files import GGML, write_gguf

    up = torch.randn(64, 256, generator=torch.Generator().manual_seed(0)).numpy()
    q8 = (gguf.quants.quantize(up, GGML.Q8_0), GGML.Q8_0)
    write_gguf(
        tmp_path / "m.gguf",
        {"blk.0.ffn_up.weight": q8, "blk.0.ffn_down.weight": q8},
        split_max_tensors=1,
    )
    parts = ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]
    for given in (*parts, ""):
        qfile = open_quantized(tmp_path / given)
        assert qfile.name == parts[0], given
        assert [t.file for t in qfile.tensors] == parts
