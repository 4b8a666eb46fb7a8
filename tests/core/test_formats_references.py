"""The shipped formats against the code their owners run: torchao's ``mx_formats`` (MX,
NVFP4; CPU path), ``bitsandbytes.functional.quantize_4bit(compress_statistics=True)`` (NF4
with double quantization; CPU), and straight transcriptions of the published recipes
where no package holds one (OCP MXINT8, DeepSeek-V3's 128x128 FP8 blocks, BitNet b1.58).
Everything is compared bit for bit: codes, stored scales and dequantized values.

torchao's default E8M0 scale calculation is ``ScaleCalculationMode.FLOOR``
(``2^(floor(log2 amax) - emax)``, the OCP MX v1.0 spec's); the lab follows it, and these
tests run torchao in that mode.
"""

from __future__ import annotations

import math

import bitsandbytes.functional as bnbf
import pytest
import torch
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from torchao.prototype.mx_formats.config import ScaleCalculationMode
from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
from torchao.prototype.mx_formats.kernels import unpack_uint4
from torchao.prototype.mx_formats.mx_tensor import MXTensor
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, per_tensor_amax_to_scale

from quant_core import (
    Format,
    PerGroup,
    QuantConfig,
    clip_stats,
    code_counts,
    quantize,
    storage_cost,
)
from quant_core.formats import codebook_for

# both paths: eager, and the compiled kernels (which must give the same bits)
pytestmark = pytest.mark.usefixtures("backend")

# preset -> torchao's element dtype
MX_ELEMENTS = {
    "MXFP4": torch.float4_e2m1fn_x2,
    "MXFP6_E3M2": DTYPE_FP6_E3M2,
    "MXFP6_E2M3": DTYPE_FP6_E2M3,
    "MXFP8_E4M3": torch.float8_e4m3fn,
    "MXFP8_E5M2": torch.float8_e5m2,
}


def _random(gen: torch.Generator, rows: int = 16, cols: int = 256) -> torch.Tensor:
    """Normal values with per-row magnitudes spread over 2^-20 .. 2^20 (so blocks take
    many different exponents)."""
    mags = torch.exp2(torch.randint(-20, 21, (rows, 1), generator=gen).float())
    return torch.randn(rows, cols, generator=gen) * mags


def _mx_adversarial(vmax: float, levels: torch.Tensor) -> torch.Tensor:
    """Rows of 32 (one MX block each) chosen to hit the edges: an all-zero block; a block
    at float32's largest values; a block of float32 subnormals (E8M0 code 0); a block whose
    largest value is just below the next power of two (saturation at the element's max);
    exact midpoints between neighbouring element values (ties) on scale 1, positive and
    negative; tiny negatives that round to -0; and a block of one huge and 31 small values
    (they underflow to 0 on its scale)."""
    big = torch.finfo(torch.float32).max
    g = torch.Generator().manual_seed(3)
    rows = [
        torch.zeros(32),
        big * (torch.rand(32, generator=g) * 2 - 1),
        1e-40 * torch.randn(32, generator=g),
        # amax = 2^(floor(log2 vmax) + 1) (1 - 2^-24): its scale is that of vmax, and it
        # lies beyond vmax, so it saturates
        2.0 ** (math.floor(math.log2(vmax)) + 1)
        * (1 - 2**-24)
        * torch.randn(32, generator=g).sign(),
    ]
    pos = levels[levels >= 0]
    mids = (pos[1:] + pos[:-1]) / 2
    # scale 1: the block's largest value is vmax itself (2^floor(log2 vmax) / 2^emax = 1)
    tie = torch.cat([mids, -mids])
    rows.append(torch.cat([torch.tensor([vmax]), tie.repeat(math.ceil(31 / len(tie)))[:31]]))
    rows.append(torch.cat([torch.tensor([vmax]), -torch.full((31,), float(pos[1]) / 4)]))
    rows.append(torch.cat([torch.tensor([1e30]), torch.randn(31, generator=g)]))
    return torch.stack(rows)


def _torchao_mx(x: torch.Tensor, elem) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(E8M0 codes as int32, element bit patterns as int32, dequantized)`` from torchao."""
    mx = MXTensor.to_mx(x, elem, 32, scaling_mode=ScaleCalculationMode.FLOOR)
    scale, data = mx.scale, mx.qdata
    if elem == torch.float4_e2m1fn_x2:
        bits = unpack_uint4(data.view(torch.uint8).contiguous()).reshape(x.shape)
    elif elem in (torch.float8_e4m3fn, torch.float8_e5m2):
        bits = data.view(torch.uint8)
    else:
        bits = data  # FP6: unpacked bit patterns, one per byte
    deq = mx.dequantize(torch.float32)
    return scale.view(torch.uint8).to(torch.int32), bits.to(torch.int32), deq


@pytest.mark.parametrize("name", sorted(MX_ELEMENTS))
@pytest.mark.parametrize("data", ["random", "bf16", "adversarial"])
def test_mx_codes_scales_and_values_are_torchaos(name: str, data: str) -> None:
    cfg = QuantConfig.from_name(name)
    cb = codebook_for(cfg.format)
    if data == "random":
        x = _random(torch.Generator().manual_seed(7))
    elif data == "bf16":
        x = _random(torch.Generator().manual_seed(10)).bfloat16()
    else:
        x = _mx_adversarial(cb.max_abs, cb.values)
    qt = quantize(x, cfg)
    e8m0, bits, deq = _torchao_mx(x, MX_ELEMENTS[name])
    assert torch.equal(qt.stored.codes, e8m0.reshape(qt.stored.codes.shape))
    # the codes are the bit patterns: -0 included (a small negative keeps its sign)
    assert torch.equal(qt.codes.to(torch.int32), bits)
    assert torch.equal(cb.decode_table[qt.codes.long()], cb.decode_table[bits.long()])
    assert torch.equal(qt.dequantize().float(), deq)


def _ocp_mxint8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """OCP MX v1.0 MXINT8, per block of 32: ``X = 2^(floor(log2 amax))`` (INT8's emax is 0:
    its element ``q 2^-6`` is below 2), E8M0 code ``clamp(floor(log2 amax), -127, 127) +
    127`` (0 for an all-zero block); ``q = clamp(round(x / (X 2^-6)), -127, 127)``, ties to
    even; value ``q X 2^-6``. ``(E8M0 codes, q, values)``."""
    blocks = x.reshape(-1, 32).double()  # exact: float32 values, powers of two
    amax = blocks.abs().amax(dim=1, keepdim=True)
    _, exp = torch.frexp(amax)  # amax = m 2^exp, m in [0.5, 1): floor(log2 amax) = exp - 1
    e = torch.where(amax > 0, exp - 1, torch.full_like(exp, -127)).clamp(-127, 127)
    step = torch.exp2((e - 6).double())
    q = torch.round(blocks / step).clamp(-127, 127)
    return (e + 127).to(torch.int32), q.to(torch.int8), (q * step).float()


@pytest.mark.parametrize("data", ["random", "adversarial"])
def test_mxint8_is_the_ocp_specs_symmetric_int8(data: str) -> None:
    cfg = QuantConfig.from_name("MXINT8")
    if data == "random":
        x = _random(torch.Generator().manual_seed(8))
    else:
        # -amax rounds to -128 on a grid of 2^(e-6) when |amax| / 2^(e-6) >= 127.5: the
        # spec clamps it to -127 (its INT8 element is symmetric, 1 63/64 at most)
        x = _mx_adversarial(1.984375, torch.arange(-127, 128) / 64)
        x = torch.cat([x, torch.tensor([[-1.999] + [0.5 + 1 / 128] * 31])])
    qt = quantize(x, cfg)
    e, q, values = _ocp_mxint8(x)
    assert torch.equal(qt.stored.codes.reshape(-1, 1), e)
    assert torch.equal(qt.codes.reshape(-1, 32), q)
    assert torch.equal(qt.dequantize().reshape(-1, 32), values)
    assert (cfg.qmin, cfg.qmax) == (-127, 127)
    rng = qt.representable_range()
    assert torch.equal(rng.lo, -rng.hi)
    # 255 codes, counted from -127; the end codes are -127 and 127
    counts = code_counts(qt)
    assert len(counts) == 255 and int(counts.sum()) == x.numel()
    assert int(counts[0]) == int((q == -127).sum()) and int(counts[-1]) == int((q == 127).sum())
    assert clip_stats(x, qt).n_saturated == int((q.abs() == 127).sum())


def _nvfp4_reference(x: torch.Tensor) -> NVFP4Tensor:
    t = per_tensor_amax_to_scale(x.abs().amax())
    return NVFP4Tensor.to_nvfp4(x, 16, per_tensor_scale=t)


def _nvfp4_adversarial(huge: bool) -> torch.Tensor:
    """Rows of 64 (four NVFP4 blocks): an all-zero block next to a large one; blocks so
    small beside the tensor's largest that their E4M3 scale clamps at its smallest normal
    2^-6; tiny negatives (-0); with the tensor's amax 2688 = 448 * 6 (``t = 1``), a block of
    amax 6 has the scale 1 and exact FP4 ties. ``huge``: one value of 3e38 instead (the
    tensor scale near float32's largest, most blocks at 2^-6)."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(8, 64, generator=g)
    x[0, :16] = 0
    x[1, :16] = 1e-9 * torch.randn(16, generator=g)
    x[2, 16:32] = torch.tensor([6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0] * 2)
    x[2, 24:32] = -x[2, 24:32]
    x[3, 32:48] = torch.tensor([6.0] + [-0.2] * 15)
    x[4] = x[4] * 100
    x[4, 0] = 2688.0
    if huge:
        x[5, 60] = 3e38
    return x


@pytest.mark.parametrize("data", ["random", "bf16", "adversarial", "huge"])
def test_nvfp4_codes_scales_and_values_are_torchaos(data: str) -> None:
    if data in ("adversarial", "huge"):
        x = _nvfp4_adversarial(huge=data == "huge")
    else:
        x = _random(torch.Generator().manual_seed(9))
        x = x.bfloat16() if data == "bf16" else x
    qt = quantize(x, QuantConfig.from_name("NVFP4"))
    ref = _nvfp4_reference(x)
    codes = unpack_uint4(ref.qdata.view(torch.uint8).contiguous()).reshape(x.shape)
    assert torch.equal(qt.codes, codes)
    assert torch.equal(qt.stored.codes, ref.scale.view(torch.uint8).to(torch.int32))
    assert torch.equal(qt.stored.super_scale, ref.per_tensor_scale.reshape(()))
    assert torch.equal(qt.dequantize().float(), ref.dequantize(torch.float32))
    if data == "adversarial":  # ties to even: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2,
        # 2.5 -> 2, 3.5 -> 4, 5 -> 4 (and the negatives likewise)
        levels = [6.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
        assert float(qt.stored.super_scale) == 1.0
        assert qt.dequantize()[2, 16:32].tolist() == levels + [-v for v in levels]


def test_nvfp4_all_zero_tensor_keeps_a_finite_tensor_scale() -> None:
    # torchao's amax / (448 * 6) is 0 here and its codes 0 / 0 = NaN; the lab stores t = 1
    qt = quantize(torch.zeros(2, 32), QuantConfig.from_name("NVFP4"))
    assert float(qt.stored.super_scale) == 1.0
    assert torch.equal(qt.dequantize(), torch.zeros(2, 32))


# --- bitsandbytes: NF4 with double quantization -------------------------------------------


def _bnb_nf4_dq(x: torch.Tensor) -> tuple[torch.Tensor, bnbf.QuantState]:
    packed, state = bnbf.quantize_4bit(x, blocksize=64, compress_statistics=True, quant_type="nf4")
    return packed, state


def _nf4_adversarial() -> torch.Tensor:
    """Rows of 64 (one NF4 block each), 300 blocks (two runs of 256 scales, the second
    short): zero blocks, tiny (float32 subnormal) and huge blocks, NF4 midpoint ties."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(300, 64, generator=g)
    x[::7] = 0
    x[5] *= 1e-30
    x[6] *= 1e20
    x[8] *= 1e-39  # an absmax below 1e-38: bitsandbytes codes on 1 / 1e-38
    nf4 = codebook_for(QuantConfig.from_name("NF4_DQ").format).values
    mids = (nf4[1:] + nf4[:-1]) / 2
    x[10] = torch.cat([torch.tensor([1.0]), mids, mids, -mids, mids, mids[:3]])
    return x


@pytest.mark.parametrize("data", ["random", "adversarial", "one-run", "constant-scales"])
def test_nf4_double_quant_is_bitsandbytes_cpu(data: str) -> None:
    if data == "random":
        g = torch.Generator().manual_seed(12)
        x = torch.randn(64, 1024, generator=g) * torch.rand(64, 1, generator=g) * 3
    elif data == "adversarial":
        x = _nf4_adversarial()
    elif data == "one-run":
        x = torch.randn(3, 64, generator=torch.Generator().manual_seed(13))
    else:  # every block's absmax is 2: centred scales all 0, the run's absmax 0
        x = torch.randn(4, 128, generator=torch.Generator().manual_seed(14)).clamp(-1.5, 1.5)
        x[:, ::64] = 2.0
    packed, state = _bnb_nf4_dq(x)
    cfg = QuantConfig.from_name("NF4_DQ")
    qt = quantize(x, cfg)
    raw = packed.view(torch.uint8).reshape(-1)
    codes = torch.stack([raw >> 4, raw & 0x0F], dim=1).reshape(-1)[: x.numel()]
    assert torch.equal(qt.codes.reshape(-1), codes)
    st = qt.stored
    assert torch.equal(st.codes.reshape(-1), state.absmax.to(torch.int32))
    # the float32 second level, bit for bit
    assert torch.equal(st.super_scale.view(torch.int32), state.state2.absmax.view(torch.int32))
    assert torch.equal(st.super_min.view(torch.int32), state.offset.view(torch.int32))
    assert torch.equal(qt.dequantize(), bnbf.dequantize_4bit(packed, state))
    # the stored bits: packed codes, 8-bit scale codes, fp32 run absmaxes, fp32 offset
    held = 8 * (packed.numel() + state.absmax.numel()) + 32 * (state.state2.absmax.numel() + 1)
    assert storage_cost(x.shape, cfg).total_bits == held


def test_nf4_single_level_codes_are_bitsandbytes_for_tiny_blocks() -> None:
    # quantize_4bit multiplies by 1 / max(absmax, 1e-38): a block below 1e-38 (float32
    # subnormals) codes as bitsandbytes does instead of dividing by its scale
    g = torch.Generator().manual_seed(18)
    x = torch.randn(6, 64, generator=g)
    x[0] = 0
    x[1] *= 1e-39
    x[2] *= 3e-38
    x[3] *= 1e-41
    packed, state = bnbf.quantize_4bit(x, blocksize=64, compress_statistics=False, quant_type="nf4")
    raw = packed.view(torch.uint8).reshape(-1)
    codes = torch.stack([raw >> 4, raw & 0x0F], dim=1).reshape(x.shape)
    qt = quantize(x, QuantConfig(format=Format.NF4, granularity=PerGroup(64)))
    assert torch.equal(qt.codes, codes)
    assert torch.equal(qt.dequantize(), bnbf.dequantize_4bit(packed, state))


def test_double_quant_codes_come_from_bitsandbytes_lookup_table_not_the_nearest() -> None:
    # bitsandbytes' CPU quantize_blockwise reads the code off a 65536-point grid of
    # [-1, 1] (k = trunc((v + 1) / 2 * 65535 + 0.5), the entry nearest -1 + 2k / 65535):
    # a centred scale just above the midpoint of map entries 176 and 177 whose grid point
    # lies below it is stored as 176, though 177 is nearer.
    from quant_core.formats.scales import dynamic_map

    table = dynamic_map()
    mid = float((table[176] + table[177]) / 2)
    v = math.ceil(mid * 2**20) / 2**20  # a multiple of 2^-20: every sum below is exact
    k = math.trunc((v + 1) / 2 * 65535 + 0.5)
    assert v > mid and -1 + 2 * k / 65535 < mid  # nearest: 177; bitsandbytes' grid: 176
    # 256 NF4 blocks (one run), absmax 2 + c: c = +-1, +-v, else 0, so the mean is 2 and
    # the centred scales are c exactly, their run's absmax 1
    c = torch.zeros(256)
    c[:4] = torch.tensor([1.0, -1.0, v, -v])
    x = torch.zeros(256, 64)
    x[:, 0] = 2 + c
    _, state = _bnb_nf4_dq(x)
    qt = quantize(x, QuantConfig.from_name("NF4_DQ"))
    assert int(state.absmax[2]) == 176
    assert torch.equal(qt.stored.codes.reshape(-1), state.absmax.to(torch.int32))


# --- DeepSeek-V3 FP8 128x128 blocks and BitNet b1.58: the published formulas --------------


def _deepseek_fp8_blocks(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DeepSeek-V3's block FP8 (its ``act_quant`` / ``weight_dequant`` kernels on 128x128
    weight tiles): ``s = amax / 448`` per tile (float32), ``y = (w / s).to(float8_e4m3fn)``,
    ``w_hat = y.float() * s``. ``(E4M3 bit patterns, s [R/128, C/128], w_hat)``."""
    r, c = w.shape
    tiles = w.reshape(r // 128, 128, c // 128, 128).permute(0, 2, 1, 3)
    s = tiles.abs().amax(dim=(2, 3), keepdim=True) / 448.0
    y = (tiles / s).to(torch.float8_e4m3fn)
    w_hat = (y.float() * s).permute(0, 2, 1, 3).reshape(r, c)
    bits = y.view(torch.uint8).permute(0, 2, 1, 3).reshape(r, c)
    return bits, s.reshape(r // 128, c // 128), w_hat


def test_fp8_block_is_deepseek_v3s_128x128_e4m3() -> None:
    g = torch.Generator().manual_seed(15)
    w = torch.randn(256, 384, generator=g) * 0.02
    w[:128, :128] *= 1e-6  # tiles of very different magnitudes
    w[128:, 256:] *= 1e6
    w[0, 0] = 448 * w[:128, :128].abs().amax() * (1 + 2**-10)  # the tile's amax: code 448
    # E4M3 ties on tile (0, 1): its amax 448 gives s = 1, and 0.53125 lies midway between
    # 0.5 and 0.5625 (round to even: 0.5), 8.5 between 8 and 9 (even: 8)
    w[1, 128:130] = torch.tensor([0.53125, 8.5])
    w[2, 128] = 448.0
    cfg = QuantConfig.from_name("FP8_BLOCK")
    qt = quantize(w, cfg)
    bits, s, w_hat = _deepseek_fp8_blocks(w)
    assert torch.equal(qt.scale, s)
    assert torch.equal(qt.codes, bits)
    assert torch.equal(qt.dequantize(), w_hat)
    assert qt.dequantize()[1, 128:130].tolist() == [0.5, 8.0]


def test_fp8_block_all_zero_tile_dequantizes_to_zero() -> None:
    # DeepSeek's s = 0 / 448 would give 0 / 0 = NaN codes; the lab keeps s = 1
    w = torch.randn(128, 256, generator=torch.Generator().manual_seed(16))
    w[:, :128] = 0
    qt = quantize(w, QuantConfig.from_name("FP8_BLOCK"))
    assert qt.scale.tolist()[0][0] == 1.0
    assert torch.equal(qt.dequantize()[:, :128], torch.zeros(128, 128))


@pytest.mark.parametrize("shape", [(256, 384), (3, 7), (1, 1000)])
def test_bitnet_is_b158s_absmean_ternary(shape: tuple[int, int]) -> None:
    """BitNet b1.58: ``gamma = mean|W|`` over the whole tensor, ``W_q = clamp(round(W /
    gamma), -1, 1)`` (round half to even), ``W_hat = gamma W_q``. The mean is the exact one
    rounded to float32 (summed in float64; a float32 sum's order can move it by an ulp).
    BitNet's code adds ``eps = 1e-5`` to ``gamma``; the lab's scale is ``gamma`` itself."""
    w = torch.randn(shape, generator=torch.Generator().manual_seed(17)) * 0.02
    w.reshape(-1)[:4] = torch.tensor([0.5, -0.5, 1.5, -1.5]) * w.abs().double().mean().float()
    gamma = w.abs().double().mean().float()
    q = torch.clamp(torch.round(w / gamma), -1, 1)
    qt = quantize(w, QuantConfig.from_name("BITNET"))
    assert float(qt.scale) == float(gamma)
    assert torch.equal(qt.codes.to(torch.int64) - 1, q.to(torch.int64))  # stored as q + 1
    assert torch.equal(qt.dequantize(), q * gamma)


# --- bits per weight -----------------------------------------------------------------------

_N = 256 * 1024  # a [256, 1024] tensor: whole runs of 256 NF4 scales, whole 128x128 tiles


@pytest.mark.parametrize(
    ("name", "bits"),
    [
        ("MXFP4", 4 + 8 / 32),  # 4.25
        ("MXFP6_E3M2", 6 + 8 / 32),  # 6.25
        ("MXFP6_E2M3", 6 + 8 / 32),
        ("MXFP8_E4M3", 8 + 8 / 32),  # 8.25
        ("MXFP8_E5M2", 8 + 8 / 32),
        ("MXINT8", 8 + 8 / 32),
        ("NVFP4", 4 + 8 / 16 + 32 / _N),  # 4.5, + one fp32 per tensor
        ("NVFP4_GGUF", 4 + 8 / 16),  # 4.5: GGUF's NVFP4 has no tensor scale
        ("NF4_DQ", 4 + 8 / 64 + 32 / (64 * 256) + 32 / _N),  # 4.127, + the fp32 offset
        ("FP8_BLOCK", 8 + 32 / (128 * 128)),  # 8.00195
        ("BITNET", 2 + 32 / _N),  # ternary in 2 bits, one fp32 scale
    ],
)
def test_bits_per_weight_of_the_shipped_formats(name: str, bits: float) -> None:
    cost = storage_cost((256, 1024), QuantConfig.from_name(name))
    assert cost.bits_per_element == bits  # exact: sums of powers of two over _N


@pytest.mark.parametrize(
    "name",
    [
        *("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"),
        *("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"),
        *("IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4_GGUF", "Q1_0"),
    ],
)
def test_gguf_bits_per_weight_are_llama_cpps_block_sizes(name: str) -> None:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[name.removesuffix("_GGUF")]]
    cost = storage_cost((256, 1024), QuantConfig.from_name(name))
    assert cost.bits_per_element == 8 * size / block
