"""The framework of the shipped formats: 2-D tiles, absmean ranges, what a config may combine,
GGUF type identification and llama-quantize's fallback types (hand-derived fixtures)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from quant_core import (
    Format,
    FP8Scales,
    Mode,
    PerBlock,
    PerChannel,
    PerGroup,
    PowerOfTwoScales,
    QuantConfig,
    RangeMethod,
    Recipe,
    ScaleDtype,
    SuperBlockScales,
    ZeroPoint,
    check_shape,
    fallback_config,
    fallback_type,
    ggml_type,
    ggml_types,
    layout_for,
    quantize,
    storage_cost,
)
from quant_core.formats.registry import SHIPPED_SET, family_of, presets


def test_per_block_tiles_round_trip_and_number_tiles_row_by_row() -> None:
    x = torch.arange(24.0).reshape(4, 6)
    layout = layout_for((4, 6), PerBlock(2, 3))
    blocks = layout.to_blocks(x)
    # tile (0, 0) is rows 0-1 x cols 0-2, read row by row; tile 1 is its right neighbour
    assert blocks[0].tolist() == [0, 1, 2, 6, 7, 8]
    assert blocks[1].tolist() == [3, 4, 5, 9, 10, 11]
    assert torch.equal(layout.from_blocks(blocks), x)
    assert layout.block_ids().tolist() == [[0, 0, 0, 1, 1, 1]] * 2 + [[2, 2, 2, 3, 3, 3]] * 2
    assert layout.scale_shape == (2, 2)


def test_per_block_names_the_tile_that_does_not_fit() -> None:
    with pytest.raises(ValueError, match=r"128 x 128.*\(30522, 384\)"):
        layout_for((30522, 384), PerBlock(128, 128))
    with pytest.raises(ValueError, match="2-D"):
        layout_for((2, 4, 6), PerBlock(2, 3))


def test_absmean_range_is_the_mean_magnitude() -> None:
    x = torch.tensor([[0.5, -1.5, 2.0, 0.0]])
    cfg = QuantConfig(format=Format.TERNARY, range_method=RangeMethod.ABSMEAN)
    qt = quantize(x, cfg)
    # a = (0.5 + 1.5 + 2 + 0) / 4 = 1: ternary levels -1, 0, 1; 0.5 ties to 0 (half even)
    assert float(qt.scale) == 1.0
    assert qt.dequantize().tolist() == [[0.0, -1.0, 1.0, 0.0]]
    with pytest.raises(ValueError, match="absmean"):
        QuantConfig(mode=Mode.ASYMMETRIC, range_method=RangeMethod.ABSMEAN)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"scale_format": SuperBlockScales(6), "granularity": PerChannel(0)}, "no groups"),
        ({"scale_format": SuperBlockScales(6, 96), "granularity": PerGroup(64)}, "96"),
        (
            {
                "scale_format": SuperBlockScales(6),
                "granularity": PerGroup(32),
                "mode": Mode.ASYMMETRIC,
            },
            "float_min",
        ),
        ({"scale_format": PowerOfTwoScales(), "format": Format.NF4}, "E8M0"),
        ({"scale_format": PowerOfTwoScales(), "mode": Mode.ASYMMETRIC}, "symmetric"),
        ({"scale_format": PowerOfTwoScales(), "range_method": RangeMethod.MSE}, "MSE"),
        ({"recipe": Recipe.LLAMA_CPP, "bits": 5, "granularity": PerGroup(64)}, "GGUF"),
    ],
)
def test_combinations_a_config_refuses_name_the_reason(fields: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        QuantConfig(**fields)


def test_two_level_formats_keep_one_spelling_of_their_scale_dtype() -> None:
    a = QuantConfig(format=Format.FP4_E2M1, granularity=PerGroup(32),
                    scale_format=PowerOfTwoScales(), scale_dtype=ScaleDtype.FP16)
    assert a.scale_dtype is ScaleDtype.FP32 and a == QuantConfig.from_name("MXFP4")


def test_gguf_types_are_the_llama_cpp_recipe_and_mxfp4_also_the_labs() -> None:
    q4k = QuantConfig.from_name("Q4_K")
    assert q4k.gguf_type == "Q4_K" and q4k.recipe is Recipe.LLAMA_CPP
    assert replace(q4k, recipe=Recipe.LAB).gguf_type is None  # the lab's mins differ
    assert QuantConfig.from_name("MXFP4").gguf_type == "MXFP4"  # recipe: the lab's (OCP)
    assert QuantConfig(bits=4, granularity=PerGroup(32)).gguf_type is None
    assert ggml_type("q4_k").config == q4k


def test_gguf_nvfp4_is_its_own_preset_beside_nvidias() -> None:
    gg, nv = QuantConfig.from_name("NVFP4_GGUF"), QuantConfig.from_name("nvfp4")
    assert gg.gguf_type == "NVFP4" and gg.recipe is Recipe.LLAMA_CPP and nv.gguf_type is None
    assert gg == ggml_type("NVFP4").config and gg.scale_format == FP8Scales(tensor_scale=False)
    assert (family_of(gg), family_of(nv)) == ("GGUF", "NVIDIA")
    labels = {p.name: p for p in presets()}
    assert labels["NVFP4_GGUF"].label == "NVFP4 (llama.cpp)"
    assert "no fp32 tensor scale" in labels["NVFP4_GGUF"].summary
    assert "one fp32 scale per tensor" in labels["NVFP4"].summary
    assert gg.describe() == "fp4_e2m1 g16 s:e4m3 llama.cpp"
    assert nv.describe() == "fp4_e2m1 g16 s:e4m3+fp32"
    lab = replace(gg, recipe=Recipe.LAB)  # E4M3 scales without a tensor scale, torch's cast
    assert lab.gguf_type is None and lab.name == "fp4_e2m1 g16 s:e4m3"
    assert "NVFP4_GGUF" not in SHIPPED_SET  # the sweep's one click keeps NVIDIA's
    with pytest.raises(TypeError, match="tensor_scale must be a bool"):
        FP8Scales(tensor_scale=1)  # type: ignore[arg-type]
    # rows that 64 does not divide: no fallback type, llama-quantize keeps them in F16
    assert fallback_type("NVFP4", 128) == "NVFP4" and fallback_type("NVFP4", 96) == "F16"


def test_gguf_q1_0_is_binary_codes_under_an_fp16_scale() -> None:
    cfg = QuantConfig.from_name("Q1_0")
    assert cfg.format is Format.BINARY and cfg.bits == 1 and cfg.gguf_type == "Q1_0"
    assert family_of(cfg) == "GGUF" and cfg == ggml_type("Q1_0").config
    assert fallback_type("Q1_0", 256) == "Q1_0" and fallback_type("Q1_0", 320) == "F16"
    # the lab's recipe on the same layout: an absmean scale, 0 rounding to +1 as in Q1_0
    lab = QuantConfig(format=Format.BINARY, granularity=PerGroup(4),
                      range_method=RangeMethod.ABSMEAN)
    qt = quantize(torch.tensor([[2.0, -1.0, 0.0, -1.0]]), lab)
    assert qt.codes.tolist() == [[1, 0, 1, 0]] and qt.scale.tolist() == [[1.0]]
    assert qt.dequantize().tolist() == [[1.0, -1.0, 1.0, -1.0]]


def test_lab_e4m3_scales_without_a_tensor_scale() -> None:
    # the lab's recipe: the scale is e4m3(amax / 6) itself, IEEE-rounded and clamped to
    # [2^-6, 448] as torchao clamps NVIDIA's block scales
    cfg = QuantConfig(format=Format.FP4_E2M1, granularity=PerGroup(16),
                      scale_format=FP8Scales(tensor_scale=False))
    x = torch.zeros(3, 16)
    x[0, 0], x[1, 0], x[2, 0] = 6.375, 1e-9, 6000.0  # 1.0625 rounds to the even 1.0
    qt = quantize(x, cfg)
    assert qt.scale.reshape(-1).tolist() == [1.0, 2.0**-6, 448.0]
    assert qt.stored.codes.reshape(-1).tolist() == [0x38, 0x08, 0x7E]
    assert qt.stored.super_scale is None
    assert storage_cost((4, 64), cfg).bits_per_element == 4.5


# llama.cpp's tensor_type_fallback (src/llama-quant.cpp), by hand: a row that a 256-value
# super-block does not divide falls back; one that not even 32 divides stays F16.
@pytest.mark.parametrize(
    ("name", "row", "expected"),
    [
        ("Q4_K", 384, "Q5_0"),
        ("Q5_K", 384, "Q5_1"),
        ("Q6_K", 384, "Q8_0"),
        ("Q2_K", 384, "Q4_0"),
        ("Q3_K", 1536 + 32, "Q4_0"),
        ("TQ1_0", 384, "Q4_0"),
        ("TQ2_0", 384, "Q4_0"),
        ("IQ4_XS", 384, "IQ4_NL"),
        ("Q4_K", 512, "Q4_K"),
        ("Q4_0", 384, "Q4_0"),
        ("Q4_K", 100, "F16"),
        ("Q8_0", 100, "F16"),
    ],
)
def test_llama_quantize_fallback_types(name: str, row: int, expected: str) -> None:
    assert fallback_type(name, row) == expected


def test_fallback_config_stores_minilm_weights_as_llama_quantize_does() -> None:
    q4k = QuantConfig.from_name("Q4_K")
    # MiniLM's intermediate [1536, 384] has rows of 384; its output [384, 1536] rows of 1536
    assert fallback_config(q4k, (1536, 384)) == QuantConfig.from_name("Q5_0")
    assert fallback_config(q4k, (384, 1536)) is q4k
    plain = QuantConfig(bits=4, granularity=PerGroup(100))
    assert fallback_config(plain, (384, 384)) is plain  # not a GGUF type: quantize decides
    with pytest.raises(ValueError, match="F16"):
        fallback_config(q4k, (3, 100))


def test_a_row_that_does_not_divide_the_super_block_names_256() -> None:
    q4k = QuantConfig.from_name("Q4_K")
    with pytest.raises(ValueError, match=r"super-block of 256 values: rows of 384"):
        quantize(torch.randn(4, 384), q4k)
    with pytest.raises(ValueError, match="256"):
        storage_cost((4, 384), q4k)


@pytest.mark.parametrize("name", ["Q2_K", "Q4_K", "Q6_K", "IQ4_XS"])
def test_a_row_that_fits_no_block_names_the_super_block_too(name: str) -> None:
    # 250 fails the 32- or 16-value blocks as well: the super-block is what to say
    cfg = QuantConfig.from_name(name)
    with pytest.raises(ValueError, match=r"super-block of 256 values: rows of 250"):
        quantize(torch.randn(4, 250), cfg)
    with pytest.raises(ValueError, match=r"super-block of 256 values: rows of 250"):
        storage_cost((4, 250), cfg)


ROW_LENGTHS = (16, 32, 48, 64, 100, 250, 256, 384, 1056, 1536)


@pytest.mark.parametrize("name", [p.name for p in presets()])
def test_check_shape_refuses_what_quantize_refuses_in_the_same_words(name: str) -> None:
    """The shape check a page makes before any work: for every preset, a shape passes it
    when ``quantize`` accepts it, and a refusal is ``quantize``'s own; the one exception
    is a GGUF type whose file blocks are larger than the lab's (GGUF's NVFP4: 64)."""
    cfg = QuantConfig.from_name(name)
    for cols in ROW_LENGTHS:
        shape = (3, cols)
        try:
            quantize(torch.randn(shape, generator=torch.Generator().manual_seed(0)), cfg)
        except ValueError as exc:
            with pytest.raises(ValueError) as refused:
                check_shape(shape, cfg)
            assert str(refused.value) == str(exc), (shape, str(exc))
            continue
        try:
            layout = check_shape(shape, cfg)
        except ValueError as exc:
            block = ggml_type(cfg.gguf_type).block_size
            assert str(exc).startswith(f"{cfg.gguf_type} stores blocks of {block} values")
            assert cols % block and block > cfg.granularity.group_size, (name, cols)
        else:
            assert layout == layout_for(shape, cfg.granularity)


@pytest.mark.parametrize("name", [t.name for t in ggml_types()])
def test_check_shape_passes_a_gguf_type_where_llama_quantize_keeps_it(name: str) -> None:
    """A GGUF type fits a shape exactly where llama-quantize stores it in that type."""
    cfg = ggml_type(name).config
    for cols in ROW_LENGTHS:
        try:
            check_shape((3, cols), cfg)
            fits = True
        except ValueError:
            fits = False
        assert fits == (fallback_type(name, cols) == name), cols


def test_check_shape_names_the_super_block_then_the_block() -> None:
    with pytest.raises(ValueError, match=r"super-block of 256 values: rows of 250 values"):
        check_shape((16, 250), QuantConfig.from_name("Q4_K"))
    with pytest.raises(ValueError, match=r"group size 32 must divide the last dimension 250"):
        check_shape((16, 250), QuantConfig.from_name("Q4_0"))


def test_lab_super_block_scales_store_d_times_integer() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 512)
    cfg = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(32),
                      zero_point=ZeroPoint.FLOAT_MIN, scale_dtype=ScaleDtype.FP16,
                      scale_format=SuperBlockScales(6))
    qt = quantize(x, cfg)
    st = qt.stored
    assert st is not None and st.super_scale is not None and st.super_min is not None
    assert st.codes.shape == (2, 16) and st.super_scale.shape == (2, 2)
    assert int(st.codes.max()) <= 63 and int(st.codes.min()) >= 0
    d = st.super_scale.repeat_interleave(8, dim=1)  # 8 blocks of 32 per super-block of 256
    dmin = st.super_min.repeat_interleave(8, dim=1)
    assert torch.equal(qt.scale, d * st.codes)  # exact: fp16 times a 6-bit integer
    assert torch.equal(qt.offset, -(dmin * st.min_codes))
    assert torch.equal(d, d.half().float())  # d is stored as fp16
    # Within the representable range a value is at most half a step from its level;
    # beyond it, clamping adds its distance to the range's end. Slack: one float32 rounding
    # of the level s u + m (relative eps of the largest magnitude).
    rng = qt.representable_range()
    lo, hi = qt.layout.expand(rng.lo.reshape(-1)), qt.layout.expand(rng.hi.reshape(-1))
    step = qt.layout.expand(qt.scale.reshape(-1))
    bound = step / 2 + (x - x.clamp(lo, hi)).abs()
    slack = torch.finfo(torch.float32).eps * float(x.abs().max())
    assert bool(((x - qt.dequantize()).abs() <= bound + slack).all())
