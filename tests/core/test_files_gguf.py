"""GGUF files written by ``gguf.GGUFWriter`` open with every tensor listed from the header
(as ``gguf.GGUFReader`` lists it) and decode bit for bit (against
``gguf.quants.dequantize``), one file or a split series; names map back to Hugging Face's."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from quantized_files import GGML, random_blocks, write_gguf

from quant_core import quantize
from quant_core.files import (
    AllowedRoots,
    FileKind,
    QuantizedFileError,
    compare_with_original,
    open_quantized,
    open_quantized_bytes,
)
from quant_core.files.gguf_file import lab_decodes
from quant_core.formats.gguf_types import ggml_type

PACKAGE_QUANTIZED = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4")
LAB_TABLE_BLOCKS = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS")
LATTICE = ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M")


def _reference(path: Path, name: str) -> np.ndarray:
    reader = gguf.GGUFReader(path)
    tensor = next(t for t in reader.tensors if t.name == name)
    return gguf.quants.dequantize(tensor.data, tensor.tensor_type)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


@pytest.mark.parametrize("type_name", PACKAGE_QUANTIZED)
def test_types_quantized_by_the_gguf_package_decode_bit_for_bit(tmp_path, rng, type_name):
    x = rng.standard_normal((8, 512)).astype(np.float32)
    qtype = GGML[type_name]
    blocks = gguf.quants.quantize(x, qtype)
    path = tmp_path / "m.gguf"
    write_gguf(path, {"blk.0.ffn_up.weight": (blocks, qtype)})
    f = open_quantized(path)
    entry = f.entry("blk.0.ffn_up.weight")
    assert (entry.type_name, entry.shape, entry.nbytes) == (type_name, (8, 512), blocks.nbytes)
    assert entry.bits_per_weight == pytest.approx(float(ggml_type(type_name).bits_per_weight))
    st = f.load("blk.0.ffn_up.weight")
    assert st.quantized is not None and st.quantized.config == ggml_type(type_name).config
    ref = _reference(path, "blk.0.ffn_up.weight")
    assert np.array_equal(st.dequantize().numpy().view(np.uint32), ref.view(np.uint32))
    # what is stored, exactly: the bytes come back from the lab's tensor
    assert st.quantized.to_ggml_bytes() == blocks.tobytes()


@pytest.mark.parametrize("type_name", ["Q4_0", "Q5_1", "Q8_0", "TQ2_0", "MXFP4"])
def test_types_quantized_by_the_lab_reopen_as_the_same_tensor(tmp_path, type_name):
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(3))
    qt = quantize(x, ggml_type(type_name).config)
    raw = np.frombuffer(qt.to_ggml_bytes(), dtype=np.uint8).reshape(4, -1)
    path = tmp_path / "lab.gguf"
    write_gguf(path, {"t": (raw, GGML[type_name])})
    back = open_quantized(path).load("t").quantized
    assert back is not None
    assert torch.equal(back.codes, qt.codes)
    assert torch.equal(back.scale, qt.scale)
    assert torch.equal(back.dequantize(), qt.dequantize())


@pytest.mark.parametrize("type_name", LAB_TABLE_BLOCKS)
def test_k_quants_decode_to_the_lab_tensor(tmp_path, rng, type_name):
    """Random valid blocks (the package does not quantize K-quants): the lab's
    ``QuantizedTensor``, its values bit for bit the package's."""
    qtype = GGML[type_name]
    path = tmp_path / "k.gguf"
    write_gguf(path, {"w": (random_blocks(rng, qtype, 4, 512), qtype)})
    st = open_quantized(path).load("w")
    ref = _reference(path, "w")
    assert lab_decodes(type_name) and st.quantized is not None
    assert st.quantized.config == ggml_type(type_name).config
    assert np.array_equal(st.dequantize().numpy().view(np.uint32), ref.view(np.uint32))


def test_gguf_nvfp4_decodes_to_the_lab_tensor_bit_for_bit(tmp_path, rng):
    """GGUF's own NVFP4 (64-value blocks, four UE4M3 scales, no tensor scale; the lab's
    ``NVFP4_GGUF``, not NVIDIA's ``NVFP4``): any bytes, scale bytes 0x00, 0x7F (both 0),
    0x80 and 0xFF (bit 7 ignored) and FP4 code 8 included, decode to the lab's tensor, its
    values bit for bit the package's."""
    raw = rng.integers(0, 256, size=(4, 512 // 64, 36), dtype=np.uint8)
    raw[0, :, :4] = [0x00, 0x7F, 0x80, 0xFF]
    raw[1, 0, 4:] = 0x88  # every code 8 (llama.cpp's +0)
    blocks = raw.reshape(4, -1)
    path = tmp_path / "nv.gguf"
    write_gguf(path, {"w": (blocks, GGML.NVFP4)})
    f = open_quantized(path)
    entry = f.entry("w")
    assert (entry.type_name, entry.shape, entry.bits_per_weight) == ("NVFP4", (4, 512), 4.5)
    st = f.load("w")
    assert lab_decodes("NVFP4") and st.quantized is not None and st.notes == ()
    assert st.quantized.config == ggml_type("NVFP4").config
    assert st.quantized.config.name == "NVFP4_GGUF"
    ref = _reference(path, "w")
    assert np.array_equal(st.dequantize().numpy().view(np.uint32), ref.view(np.uint32))
    assert st.quantized.stored.codes.reshape(4, -1)[0, :4].tolist() == [0x00, 0x7F, 0x80, 0xFF]
    assert st.quantized.scale.reshape(4, -1)[0, :4].tolist() == [0.0, 0.0, 0.0, 480.0]


def test_gguf_nvfp4_quantized_by_the_lab_reopens_as_the_same_tensor(tmp_path):
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(3))
    qt = quantize(x, ggml_type("NVFP4").config)
    raw = np.frombuffer(qt.to_ggml_bytes(), dtype=np.uint8).reshape(4, -1)
    path = tmp_path / "lab.gguf"
    write_gguf(path, {"t": (raw, GGML.NVFP4)})
    back = open_quantized(path).load("t").quantized
    assert back is not None
    assert torch.equal(back.codes, qt.codes)
    assert torch.equal(back.scale, qt.scale)
    assert torch.equal(back.stored.codes, qt.stored.codes)
    assert back.to_ggml_bytes() == raw.tobytes()
    ref = _reference(path, "t")
    assert np.array_equal(back.dequantize().numpy().view(np.uint32), ref.view(np.uint32))
    assert np.array_equal(qt.dequantize().numpy().view(np.uint32), ref.view(np.uint32))


def _q1_0_values(blocks: np.ndarray) -> np.ndarray:
    """``dequantize_row_q1_0`` in numpy (the gguf package has no Q1_0 decoder; the C code
    itself is compared in test_kquants): fp16 ``d``, then bit ``j % 8`` of byte ``j / 8``
    of the 16 that follow: ``d`` when set, else ``-d``."""
    b = blocks.reshape(-1, 18)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    bits = np.unpackbits(b[:, 2:], axis=1, bitorder="little")
    return np.where(bits == 1, d, -d).astype(np.float32)


def test_gguf_q1_0_decodes_to_the_lab_tensor(tmp_path, rng):
    raw = rng.integers(0, 256, size=(3, 2, 18), dtype=np.uint8)
    d = rng.uniform(-2, 2, size=(3, 2)).astype(np.float16)
    raw[:, :, :2] = d.view(np.uint8).reshape(3, 2, 2)
    raw[0, 0] = [0x00, 0x38, 0x0D] + [0xFF] * 15  # by hand: d = 0.5, bits 0, 2, 3 of byte 0
    path = tmp_path / "q1.gguf"
    write_gguf(path, {"w": (raw.reshape(3, -1), GGML.Q1_0)})
    f = open_quantized(path)
    assert (f.entry("w").type_name, f.entry("w").bits_per_weight) == ("Q1_0", 1.125)
    st = f.load("w")
    assert lab_decodes("Q1_0") and st.quantized is not None and st.notes == ()
    assert st.quantized.config == ggml_type("Q1_0").config
    values = st.dequantize().numpy()
    assert values[0, :5].tolist() == [0.5, -0.5, 0.5, 0.5, -0.5]
    expected = _q1_0_values(raw).reshape(values.shape)
    assert np.array_equal(values.view(np.uint32), expected.view(np.uint32))
    assert st.quantized.to_ggml_bytes() == raw.tobytes()


@pytest.mark.parametrize("type_name", LATTICE)
def test_lattice_types_open_as_values_with_their_type_named(tmp_path, rng, type_name):
    qtype = GGML[type_name]
    path = tmp_path / "iq.gguf"
    write_gguf(path, {"w": (random_blocks(rng, qtype, 2, 512), qtype)})
    f = open_quantized(path)
    st = f.load("w")
    assert st.quantized is None and st.type_name == type_name
    assert "lattice" in st.notes[0]
    ref = _reference(path, "w")
    assert np.array_equal(st.dequantize().numpy().view(np.uint32), ref.view(np.uint32))


def test_listing_matches_gguf_reader(tmp_path, rng):
    x = rng.standard_normal((16, 256)).astype(np.float32)
    tensors = {
        "token_embd.weight": (x.astype(np.float16), None),
        "blk.0.attn_q.weight": (gguf.quants.quantize(x, GGML.Q8_0), GGML.Q8_0),
        "blk.0.attn_k.weight": (random_blocks(rng, GGML.Q4_K, 16, 256), GGML.Q4_K),
        "output_norm.weight": (x[0], None),
    }
    meta = {
        "llama.block_count": 1,
        "general.name": "tiny",
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(300)],
    }
    path = tmp_path / "m.gguf"
    write_gguf(path, tensors, metadata=meta)
    f = open_quantized(path)
    reader = gguf.GGUFReader(path)
    assert f.kind is FileKind.GGUF
    ours = {t.name: t for t in f.tensors}
    assert set(ours) == {t.name for t in reader.tensors}
    for t in reader.tensors:
        mine = ours[t.name]
        assert mine.type_name == t.tensor_type.name
        assert mine.shape == tuple(reversed(t.shape.tolist()))
        assert mine.nbytes == t.n_bytes
        assert f._source._where[t.name][1].offset == t.data_offset
    assert f.metadata["general.name"] == "tiny"
    assert f.metadata["tokenizer.ggml.tokens"].count == 300  # long arrays: type and length
    assert f.metadata["tokenizer.ggml.tokens"].values is None
    assert f.mix()[0].nbytes == max(s.nbytes for s in f.mix())
    assert sum(s.nbytes for s in f.mix()) == f.nbytes


def test_split_series_opens_from_any_part(tmp_path, rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    tensors = {
        f"blk.{i}.ffn_up.weight": (gguf.quants.quantize(x + i, GGML.Q8_0), GGML.Q8_0)
        for i in range(5)
    }
    write_gguf(tmp_path / "m.gguf", tensors, split_max_tensors=2)
    parts = sorted(p.name for p in tmp_path.glob("*.gguf"))
    assert parts == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    first = open_quantized(tmp_path / parts[0])
    second = open_quantized(tmp_path / parts[1])
    folder = open_quantized(tmp_path)
    assert (
        [t.name for t in first.tensors]
        == [t.name for t in second.tensors]
        == [t.name for t in folder.tensors]
    )
    assert len(first.tensors) == 5 and {t.file for t in first.tensors} == set(parts)
    st = first.load("blk.4.ffn_up.weight")
    expect = gguf.quants.dequantize(gguf.quants.quantize(x + 4, GGML.Q8_0), GGML.Q8_0)
    assert np.array_equal(st.dequantize().numpy(), expect)
    (tmp_path / parts[2]).unlink()
    with pytest.raises(QuantizedFileError, match=r"missing: m-00003-of-00003\.gguf"):
        open_quantized(tmp_path / parts[0])


def _series(tmp_path: Path, x: np.ndarray) -> list[str]:
    """m-0000{1,2,3}-of-00003.gguf by ``gguf.GGUFWriter`` (split.no, split.count and
    split.tensors.count in every part, as ``llama-gguf-split`` writes them): t0..t4, two a
    part."""
    write_gguf(tmp_path / "m.gguf", {f"t{i}": (x + i, None) for i in range(5)}, split_max_tensors=2)
    return [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]


def test_parts_without_split_metadata_are_not_joined_on_their_names(tmp_path, rng):
    """Three whole GGUF files named as parts (no split.* keys, which llama-gguf-split
    always writes) were read as one series, silently."""
    x = rng.standard_normal((2, 32)).astype(np.float32)
    for i in (1, 2, 3):
        write_gguf(tmp_path / f"m-0000{i}-of-00003.gguf", {f"t{i}": (x, None)})
    for i in (1, 2, 3):
        name = rf"m-0000{i}-of-00003\.gguf"
        with pytest.raises(
            QuantizedFileError, match=rf"^{name} is named as part {i} of .*no split"
        ):
            open_quantized(tmp_path / f"m-0000{i}-of-00003.gguf")


def test_a_lone_file_named_like_a_part_without_split_metadata_is_read_alone(tmp_path, rng):
    """llama.cpp loads a file without split.count as a whole model, whatever its name."""
    x = rng.standard_normal((2, 32)).astype(np.float32)
    write_gguf(tmp_path / "m-00002-of-00003.gguf", {"w": (x, None)})
    f = open_quantized(tmp_path / "m-00002-of-00003.gguf")
    assert [t.name for t in f.tensors] == ["w"]
    assert any("read as one file" in note for note in f.notes)
    assert np.array_equal(f.load("w").dequantize().numpy(), x)


U16, I32 = gguf.GGUFValueType.UINT16, gguf.GGUFValueType.INT32


def test_a_part_without_split_no_is_refused_naming_it(tmp_path, rng):
    """llama.cpp: "missing key split.no in GGUF split <file>"."""
    x = rng.standard_normal((2, 32)).astype(np.float32)
    parts = _series(tmp_path, x)
    second = {"t2": (x + 2, None), "t3": (x + 3, None)}
    write_gguf(tmp_path / parts[1], second, metadata={"split.count": (3, U16)})
    for opened in parts:
        with pytest.raises(
            QuantizedFileError, match=r"^m-00002-of-00003\.gguf: .*has no split\.no"
        ):
            open_quantized(tmp_path / opened)
    # as UINT32: llama.cpp's gguf_get_val_u16 asserts the type
    write_gguf(tmp_path / parts[1], second, metadata={"split.no": 1, "split.count": (3, U16)})
    with pytest.raises(QuantizedFileError, match=r"split\.no is stored as UINT32; .* UINT16"):
        open_quantized(tmp_path / parts[0])


def test_a_first_part_without_split_count_or_tensor_total_is_refused(tmp_path, rng):
    """llama.cpp reads split.count and split.tensors.count from the first part and checks
    the total ("corrupted model: N tensors expected but M found")."""
    x = rng.standard_normal((2, 32)).astype(np.float32)
    parts = _series(tmp_path, x)
    first = {"t0": (x, None), "t1": (x + 1, None)}
    meta: dict[str, object] = {"split.no": (0, U16), "split.tensors.count": (5, I32)}
    write_gguf(tmp_path / parts[0], first, metadata=meta)
    with pytest.raises(QuantizedFileError, match=r"^m-00001-of-00003\.gguf: .*no split\.count"):
        open_quantized(tmp_path / parts[1])
    meta = {"split.no": (0, U16), "split.count": (3, U16)}
    write_gguf(tmp_path / parts[0], first, metadata=meta)
    with pytest.raises(QuantizedFileError, match=r"no split\.tensors\.count"):
        open_quantized(tmp_path / parts[2])
    meta["split.tensors.count"] = (6, I32)
    write_gguf(tmp_path / parts[0], first, metadata=meta)
    with pytest.raises(QuantizedFileError, match=r"says 6 tensors but the parts hold 5"):
        open_quantized(tmp_path / parts[0])
    meta["split.tensors.count"] = (5, I32)
    write_gguf(tmp_path / parts[0], first, metadata=meta)
    assert len(open_quantized(tmp_path / parts[0]).tensors) == 5


def test_a_folder_of_two_models_asks_which(tmp_path, rng):
    x = rng.standard_normal((4, 32)).astype(np.float32)
    for name in ("a-Q8_0.gguf", "a-Q4_0.gguf"):
        write_gguf(tmp_path / name, {"w": (x, None)})
    with pytest.raises(QuantizedFileError, match="holds 2 GGUF models"):
        open_quantized(tmp_path)


def test_names_map_back_and_llama_query_rows_compare_after_the_converters_permutation(tmp_path):
    """llama.cpp's converter permutes q_proj's rows (``LlamaModel.permute``); the
    comparison applies it to the original, so a Q8_0 file's error is Q8_0's."""
    gen = torch.Generator().manual_seed(0)
    heads, head_dim, hidden = 4, 16, 64
    original = torch.randn(heads * head_dim, hidden, generator=gen)
    converted = (
        original.reshape(heads, 2, head_dim // 2, hidden).swapaxes(1, 2).reshape(original.shape)
    )
    blocks = gguf.quants.quantize(converted.numpy(), GGML.Q8_0)
    path = tmp_path / "m.gguf"
    meta = {
        "llama.block_count": 1,
        "llama.attention.head_count": heads,
        "llama.attention.head_count_kv": heads,
    }
    write_gguf(path, {"blk.0.attn_q.weight": (blocks, GGML.Q8_0)}, metadata=meta)
    f = open_quantized(path)
    hf = "model.layers.0.self_attn.q_proj.weight"
    assert hf in f.entry("blk.0.attn_q.weight").original_names
    assert f.original_name("blk.0.attn_q.weight", {hf, "lm_head.weight"}) == hf
    st = f.load("blk.0.attn_q.weight")
    cmp = compare_with_original(st, original, hf, f.metadata)
    assert cmp.order_note and "permuted" in cmp.order_note[0]
    assert torch.equal(cmp.original, converted)
    # the file was made by llama.cpp's reference quantizer; the lab's LLAMA_CPP recipe
    # rounds the original to the very same values
    assert cmp.rtn is not None
    assert torch.equal(cmp.rtn.dequantize(), cmp.stored)
    assert cmp.file_metrics == cmp.rtn_metrics
    unpermuted = compare_with_original(st, original, hf, None)
    assert unpermuted.file_metrics.mse > 100 * cmp.file_metrics.mse


def test_uploaded_bytes_open_like_the_file(tmp_path, rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    path = tmp_path / "m.gguf"
    write_gguf(path, {"w": (gguf.quants.quantize(x, GGML.Q4_0), GGML.Q4_0)})
    f = open_quantized_bytes(path.read_bytes(), "m.gguf")
    assert [(t.name, t.type_name) for t in f.tensors] == [("w", "Q4_0")]
    assert torch.equal(f.load("w").dequantize(), open_quantized(path).load("w").dequantize())


def test_reading_stays_inside_the_allowed_roots(tmp_path, rng):
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    x = rng.standard_normal((4, 32)).astype(np.float32)
    write_gguf(outside / "m.gguf", {"w": (x, None)})
    guard = AllowedRoots((inside,))
    with pytest.raises(QuantizedFileError, match="outside the allowed folders"):
        open_quantized(outside / "m.gguf", guard=guard)
    (inside / "link.gguf").symlink_to(outside / "m.gguf")
    with pytest.raises(QuantizedFileError, match="outside the allowed folders"):
        open_quantized(inside / "link.gguf", guard=guard)
    with pytest.raises(QuantizedFileError, match="outside the allowed folders"):
        open_quantized(inside / ".." / "out" / "m.gguf", guard=guard)
    write_gguf(inside / "ok.gguf", {"w": (x, None)})
    assert open_quantized(inside / "ok.gguf", guard=guard).load("w").values is not None


def test_the_quantized_tensor_bound_is_checked_before_reading(tmp_path, rng):
    x = rng.standard_normal((64, 64)).astype(np.float32)
    path = tmp_path / "m.gguf"
    write_gguf(path, {"w": (x, None)})
    with pytest.raises(QuantizedFileError, match=r"4,096 values .* the limit is 1,000"):
        open_quantized(path).load("w", max_elements=1000)
