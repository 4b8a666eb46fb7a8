"""Small cases whose expected outputs are derived by hand (the derivation is in each test)."""

from __future__ import annotations

import math

import pytest
import torch

from quant_core import (
    NF4_VALUES,
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    ScaleDtype,
    ZeroPoint,
    dorefa_quantize_weights,
    error_metrics,
    minmax_levels_quantize,
    pack,
    packed_size,
    quantize,
    storage_cost,
    unpack,
)

# Every test here runs on both backends (see conftest.backend).
pytestmark = pytest.mark.usefixtures("backend")

# -- packing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("codes", "bits", "expected"),
    [
        # 1 | 2 << 3 | (3 & 0b11) << 6 = 0xD1; the top bit of 3 (0) opens byte 1
        ([1, 2, 3], 3, [0xD1, 0x00]),
        # -1 at 4 bits is 0b1111
        ([-1], 4, [0x0F]),
        # nibbles, low first: 0x1, 0x2 -> 0x21; 0xF then 4 zero padding bits -> 0x0F
        ([1, 2, 15], 4, [0x21, 0x0F]),
        # bits LSB first: 1,0,1,1,0,0,0,1 -> 0b10001101; the 9th bit opens byte 1
        ([1, 0, 1, 1, 0, 0, 0, 1, 1], 1, [0x8D, 0x01]),
        # 31 fills bits 0-4; 1 sets bit 5: 0b00111111; bits 8-9 are zero
        ([31, 1], 5, [0x3F, 0x00]),
        # 16 bits little-endian
        ([0x1234], 16, [0x34, 0x12]),
        # -128 at 8 bits is 0x80; -2 at 2 bits is 0b10
        ([-128, 127], 8, [0x80, 0x7F]),
        ([-2, 1, -1, 0], 2, [0b00_11_01_10]),
        ([], 3, []),
    ],
    ids=["3bit-123", "4bit-neg1", "4bit-nibbles", "1bit-9codes", "5bit", "16bit", "8bit-ends",
         "2bit-signed", "empty"],
)  # fmt: skip
def test_pack_matches_bytes_derived_by_hand(codes, bits, expected):
    t = torch.tensor(codes, dtype=torch.int64)
    assert pack(t, bits).tolist() == expected
    assert packed_size(len(codes), bits) == len(expected)
    signed = min(codes, default=0) < 0
    back = unpack(torch.tensor(expected, dtype=torch.uint8), bits, len(codes), signed=signed)
    assert back.tolist() == codes


def test_unpack_signed_and_unsigned_views_of_one_byte():
    packed = torch.tensor([0xD1, 0x00], dtype=torch.uint8)  # 3-bit codes 1, 2, 3
    assert unpack(packed, 3, 3, signed=False).tolist() == [1, 2, 3]
    assert unpack(packed, 3, 3, signed=True).tolist() == [1, 2, 3]
    # 0b111 is 7 unsigned, -1 signed
    assert unpack(torch.tensor([0x07], dtype=torch.uint8), 3, 1, signed=False).tolist() == [7]
    assert unpack(torch.tensor([0x07], dtype=torch.uint8), 3, 1, signed=True).tolist() == [-1]


def test_unpack_ignores_trailing_bytes_and_default_dtypes():
    packed = torch.tensor([0x21, 0x0F, 0xFF], dtype=torch.uint8)
    assert unpack(packed, 4, 3, signed=False).tolist() == [1, 2, 15]
    assert unpack(packed, 8, 1).dtype == torch.int8
    assert unpack(packed, 8, 1, signed=False).dtype == torch.int16
    assert unpack(packed, 16, 1, signed=False).dtype == torch.int32


# -- codebook formats ------------------------------------------------------------------------


def test_nf4_small_case():
    # absmax 1 -> s = 1. 0.5 lies between 0.44071 (code 12, distance 0.0593) and 0.56262
    # (code 13, distance 0.0626): code 12. -0.6 lies between -0.69619 (code 1, distance
    # 0.0962) and -0.52507 (code 2, distance 0.0749): code 2.
    x = torch.tensor([-1.0, 0.0, 1.0, 0.5, -0.6])
    qt = quantize(x, QuantConfig(format="nf4"))
    assert float(qt.scale) == 1.0
    assert qt.codes.tolist() == [0, 7, 15, 12, 2]
    expected = torch.tensor([NF4_VALUES[c] for c in [0, 7, 15, 12, 2]])
    assert torch.equal(qt.dequantize(), expected)


def test_nf4_scales_by_absmax_per_group():
    # groups [2, -4] and [0.5, 0.25]: s = 4 and 0.5; -4/4 = -1 -> code 0, 2/4 = 0.5 -> 12,
    # 0.5/0.5 = 1 -> 15, 0.25/0.5 = 0.5 -> 12
    x = torch.tensor([[2.0, -4.0, 0.5, 0.25]])
    qt = quantize(x, QuantConfig(format=Format.NF4, granularity=PerGroup(2)))
    assert qt.scale.tolist() == [[4.0, 0.5]]
    assert qt.codes.tolist() == [[12, 0, 15, 12]]


def test_fp4_e2m1_small_case():
    # absmax 6 -> s = 1. Codes 0-7 are 0, .5, 1, 1.5, 2, 3, 4, 6; 8-15 their negatives.
    # Ties go to the even code, as IEEE rounding does: 0.25 -> 0 (code 0, not 1),
    # 0.75 -> 1.0 (code 2), 2.5 -> 2 (code 4), 5 -> 4 (code 6). -0.1 rounds to -0: code 8.
    x = torch.tensor([6.0, -6.0, 0.25, 0.75, 2.5, 5.0, -0.1, -1.75])
    qt = quantize(x, QuantConfig(format="fp4_e2m1"))
    assert qt.codes.tolist() == [7, 15, 0, 2, 4, 6, 8, 12]  # -1.75 is a tie -> -2 (code 12)
    assert qt.dequantize().tolist() == [6.0, -6.0, 0.0, 1.0, 2.0, 4.0, 0.0, -2.0]


def test_fp8_e4m3_small_case():
    # absmax 448 (the largest e4m3 value, 0 1111 110 = 0x7E) -> s = 1; 1.0 = 0 0111 000 = 0x38;
    # 2^-9, the smallest subnormal, = 0x01; -448 sets the sign bit: 0xFE
    x = torch.tensor([448.0, -448.0, 1.0, 2.0**-9])
    qt = quantize(x, QuantConfig(format="fp8_e4m3"))
    assert qt.codes.tolist() == [0x7E, 0xFE, 0x38, 0x01]
    assert torch.equal(qt.dequantize(), x)


# -- linear quantization by hand -------------------------------------------------------------


def test_symmetric_ties_round_half_to_even():
    # max|r| = 127 * 2^-3 -> s = 2^-3 exactly; r/s = 0.5, 1.5, 2.5, -0.5, -2.5, 127
    s = 2.0**-3
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 127.0]) * s
    qt = quantize(x, QuantConfig(bits=8))
    assert float(qt.scale) == s
    assert qt.codes.tolist() == [0, 2, 2, 0, -2, 127]


def test_mode_docstring_example():
    # Mode's docstring: 8 bits, r in [-2, 1]. Symmetric s = 2/127, r = 1 -> 63.5 -> 64 (even).
    # Asymmetric s = 3/255, z = round(-128 + 2/s) = round(-128 + 170) = 42, r = 1 -> 127.
    x = torch.tensor([-2.0, 1.0])
    sym = quantize(x, QuantConfig(bits=8))
    assert sym.codes.tolist() == [-127, 64]
    asym = quantize(x, QuantConfig(bits=8, mode=Mode.ASYMMETRIC))
    assert int(asym.zero_point) == 42
    assert asym.codes.tolist() == [-128, 127]


def test_asymmetric_all_positive_block_clamps_z():
    # r in [1, 2] at 2 bits: s = 1/3, qmin - r_min/s = -2 - 3 = -5 clamps to z = -2, so the
    # levels are s (q + 2) = 0, 1/3, 2/3, 1 and every input saturates at the top, 1.0:
    # the course's convention, which does not widen the range to include zero.
    x = torch.tensor([1.0, 1.5, 2.0])
    qt = quantize(x, QuantConfig(bits=2, mode="asymmetric", zero_point="course_clamp"))
    assert int(qt.zero_point) == -2
    assert qt.codes.tolist() == [1, 1, 1]
    torch.testing.assert_close(qt.dequantize(), torch.ones(3), rtol=1e-6, atol=0)


def test_zero_point_docstring_example():
    # ZeroPoint's docstring: 2 bits (codes -2..1), range [1, 4].
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    # include zero: [0, 4], s = 4/3, z = -2 - round(0) = -2, levels 0, 4/3, 8/3, 4;
    # 1 -> round(0.75) - 2 = -1, 2 -> round(1.5) = 2 (even) -> 0, 3 -> round(2.25) = 2 -> 0,
    # 4 -> 3 - 2 = 1
    inc = quantize(x, QuantConfig(bits=2, mode="asymmetric"))
    assert inc.config.zero_point is ZeroPoint.INCLUDE_ZERO  # the default
    assert float(inc.scale) == float(torch.tensor(4.0) / 3) and int(inc.zero_point) == -2
    assert inc.codes.tolist() == [-1, 0, 0, 1] and inc.offset is None
    # float min: s = 3/3 = 1, m = 1 - 1 * (-2) = 3, levels 1, 2, 3, 4: every value exact
    fmin = quantize(x, QuantConfig(bits=2, mode="asymmetric", zero_point="float_min"))
    assert (float(fmin.scale), float(fmin.offset), int(fmin.zero_point)) == (1.0, 3.0, 0)
    assert fmin.codes.tolist() == [-2, -1, 0, 1]
    assert torch.equal(fmin.dequantize(), x)
    assert fmin.levels(0).tolist() == [1.0, 2.0, 3.0, 4.0]
    # course clamp: s = 1, z = clamp(round(-2 - 1)) = -2, levels 0, 1, 2, 3: 4 saturates
    course = quantize(x, QuantConfig(bits=2, mode="asymmetric", zero_point="course_clamp"))
    assert (float(course.scale), int(course.zero_point)) == (1.0, -2)
    assert course.dequantize().tolist() == [1.0, 2.0, 3.0, 3.0]


def test_quantize_docstring_example():
    # quantize's docstring, 4 bits, x = [0.7, 1.0, 1.3]
    x = torch.tensor([0.7, 1.0, 1.3])
    inc = quantize(x, QuantConfig(bits=4, mode="asymmetric"))
    assert float(inc.scale) == float(torch.tensor(1.3) / 15) and int(inc.zero_point) == -8
    fmin = quantize(x, QuantConfig(bits=4, mode="asymmetric", zero_point="float_min"))
    s = (torch.tensor(1.3) - torch.tensor(0.7)) / 15
    assert float(fmin.scale) == float(s)
    assert float(fmin.offset) == float(torch.tensor(0.7) + s * 8)  # about 1.02
    course = quantize(x, QuantConfig(bits=4, mode="asymmetric", zero_point="course_clamp"))
    assert int(course.zero_point) == -8 and float(course.scale) == float(s)
    torch.testing.assert_close(course.dequantize(), torch.full((3,), 0.6), rtol=1e-6, atol=0)


def test_per_group_scale_shape_and_order():
    # [2, 3, 8] with groups of 4: scale [2, 3, 2], flattened row by row; group maxima are
    # 1..12 by construction, so the flattened scales are (1..12) / 127
    x = torch.zeros(2, 3, 8)
    for i in range(12):
        x.view(12, 4)[i, i % 4] = float(i + 1)
    qt = quantize(x, QuantConfig(granularity=PerGroup(4)))
    assert qt.scale.shape == (2, 3, 2)
    expected = torch.arange(1, 13, dtype=torch.float32) / 127
    assert torch.equal(qt.scale.flatten(), expected)


@pytest.mark.parametrize(
    ("gran", "scale_shape"),
    [(PerTensor(), ()), (PerChannel(0), (4,)), (PerChannel(1), (6,)), (PerChannel(-1), (6,)),
     (PerGroup(3), (4, 2))],
    ids=["per-tensor", "axis0", "axis1", "axis-1", "g3"],
)  # fmt: skip
def test_scale_and_zero_point_shapes_follow_the_granularity_docstrings(gran, scale_shape):
    qt = quantize(torch.randn(4, 6), QuantConfig(mode="asymmetric", granularity=gran))
    assert qt.scale.shape == scale_shape and qt.zero_point.shape == scale_shape
    assert qt.scale.dtype == torch.float32 and qt.zero_point.dtype == torch.int32
    assert qt.dequantize().shape == (4, 6) and qt.dequantize().dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes_quantize_and_dequantize_to_float32(dtype):
    x = torch.tensor([[1.0, -2.0], [0.5, 4.0]], dtype=dtype)
    qt = quantize(x, QuantConfig())
    assert qt.input_dtype == dtype
    ref = quantize(x.float(), QuantConfig())
    assert torch.equal(qt.codes, ref.codes)
    assert qt.dequantize().dtype == torch.float32


def test_fp16_scale_is_rounded_to_fp16():
    # s = 1/127 is not an fp16 value; stored, it is fp16(1/127)
    qt = quantize(torch.tensor([1.0, -0.5]), QuantConfig(scale_dtype=ScaleDtype.FP16))
    assert float(qt.scale) == float(torch.tensor(1 / 127, dtype=torch.float16))


# -- storage ---------------------------------------------------------------------------------


def test_storage_int4_asym_g128_fp16_scales():
    # 4096 * 4096 codes of 4 bits, one fp16 scale and one 4-bit zero point per 128 codes
    cfg = QuantConfig(bits=4, mode="asymmetric", granularity=PerGroup(128), scale_dtype="fp16")
    r = storage_cost((4096, 4096), cfg)
    n = 4096 * 4096
    assert r.bits_per_element == 4 + 16 / 128 + 4 / 128
    assert (r.n_elements, r.n_scales, r.n_zero_points) == (n, n // 128, n // 128)
    assert r.total_bits == n * 4 + (n // 128) * (16 + 4)
    assert r.total_bytes == math.ceil(r.total_bits / 8)
    assert (r.fp32_bytes, r.fp16_bytes) == (4 * n, 2 * n)
    assert r.ratio_vs_fp32 == pytest.approx(32 / (4 + 20 / 128))
    assert r.ratio_vs_fp16 == pytest.approx(16 / (4 + 20 / 128))


@pytest.mark.parametrize(
    ("shape", "cfg", "bits_per_element"),
    [
        ((10, 10), QuantConfig(bits=8), 8 + 32 / 100),  # one fp32 scale, no zero point
        ((10, 10), QuantConfig(bits=8, mode="asymmetric"), 8 + 40 / 100),
        ((16, 64), QuantConfig(format="nf4", granularity=PerGroup(64), scale_dtype="bf16"),
         4 + 16 / 64),
        ((6, 7), QuantConfig(bits=3, granularity=PerChannel(1), scale_dtype="fp16"),
         3 + 7 * 16 / 42),
        ((3, 5), QuantConfig(format="fp8_e5m2"), 8 + 32 / 15),
    ],
    ids=["int8-per-tensor", "int8-asym", "nf4-g64-bf16", "int3-axis1-fp16", "fp8"],
)  # fmt: skip
def test_storage_bits_per_element(shape, cfg, bits_per_element):
    assert storage_cost(shape, cfg).bits_per_element == pytest.approx(bits_per_element)


def test_storage_bytes_round_up():
    # 3 codes of 3 bits + one 32-bit scale = 41 bits -> 6 bytes
    r = storage_cost((3,), QuantConfig(bits=3))
    assert (r.total_bits, r.total_bytes) == (41, 6)


# -- error metrics ---------------------------------------------------------------------------


def test_error_metrics_by_hand():
    # d = x - x_hat = [0, 0, 0, -1]: mse 1/4, rmse 1/2, mean|d| 1/4, max|d| 1;
    # sum x^2 = 30, sum d^2 = 1 -> sqnr 10 log10 30; <x, x_hat> = 1 + 4 + 9 + 20 = 34,
    # |x_hat|^2 = 39 -> cosine 34 / sqrt(30 * 39)
    m = error_metrics(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, 2.0, 3.0, 5.0]))
    assert (m.mse, m.rmse, m.mean_abs, m.max_abs) == (0.25, 0.5, 0.25, 1.0)
    assert m.sqnr_db == pytest.approx(10 * math.log10(30), rel=1e-12)
    assert m.cosine == pytest.approx(34 / math.sqrt(30 * 39), rel=1e-12)


@pytest.mark.parametrize(
    ("x", "x_hat", "sqnr", "cosine"),
    [
        ([1.0, -2.0], [1.0, -2.0], math.inf, 1.0),  # exact
        ([0.0, 0.0], [0.0, 0.0], math.inf, 1.0),  # both zero
        ([0.0, 0.0], [1.0, 0.0], -math.inf, 0.0),  # no signal, some error
        ([1.0, 0.0], [0.0, 1.0], 10 * math.log10(1 / 2), 0.0),  # orthogonal
        ([1.0, 1.0], [-1.0, -1.0], 10 * math.log10(2 / 8), -1.0),  # opposite
    ],
    ids=["exact", "both-zero", "zero-signal", "orthogonal", "opposite"],
)
def test_error_metrics_edge_cases(x, x_hat, sqnr, cosine):
    m = error_metrics(torch.tensor(x), torch.tensor(x_hat))
    assert m.sqnr_db == pytest.approx(sqnr) if math.isfinite(sqnr) else m.sqnr_db == sqnr
    assert m.cosine == pytest.approx(cosine)


def test_error_metrics_flatten_and_mixed_dtypes():
    x = torch.tensor([[3.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    x_hat = torch.tensor([[3.0, 0.0], [0.0, 0.0]], dtype=torch.float16)
    m = error_metrics(x, x_hat)
    assert (m.mse, m.max_abs) == (4.0, 4.0)  # 16 / 4
    assert m.cosine == pytest.approx(3 / 5)  # <x, x_hat> = 9, |x| = 5, |x_hat| = 3
    assert m.sqnr_db == pytest.approx(10 * math.log10(25 / 16))


# -- research quantizers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "bits", "codes", "levels"),
    [
        ([0.0, 1.0, 2.0, 3.0], 2, [0, 1, 2, 3], [0.0, 1.0, 2.0, 3.0]),  # step 1
        # step 3/3 = 1: (x + 1) = 0, 1.2, 1.5, 3 -> codes 0, 1, 2 (1.5 to even), 3
        ([-1.0, 0.2, 0.5, 2.0], 2, [0, 1, 2, 3], [-1.0, 0.0, 1.0, 2.0]),
        # 1 bit: levels min and max; 0.4/1 -> 0, 0.6/1 -> 1
        ([0.0, 0.4, 0.6, 1.0], 1, [0, 0, 1, 1], [0.0, 1.0]),
        # 3 bits on [0, 7]: step 1; 3.5 -> 4 (even), 2.5 -> 2 (even)
        ([0.0, 3.5, 2.5, 7.0], 3, [0, 4, 2, 7], [float(i) for i in range(8)]),
        # constant: step 0, every code 0, every level the constant
        ([2.5, 2.5], 2, [0, 0], [2.5] * 4),
    ],
    ids=["2bit-identity", "2bit-ties", "1bit", "3bit-ties", "constant"],
)
def test_minmax_levels_quantize_by_hand(x, bits, codes, levels):
    r = minmax_levels_quantize(torch.tensor(x), bits)
    assert r.codes.tolist() == codes
    assert r.levels.tolist() == levels
    assert r.dequantized.tolist() == [levels[c] for c in codes]


def test_minmax_levels_top_level_is_max_exactly():
    x = torch.tensor([0.1, 0.7, 0.3])
    r = minmax_levels_quantize(x, 3)
    assert float(r.levels[0]) == float(x.min()) and float(r.levels[-1]) == float(x.max())


def test_dorefa_by_hand():
    # tanh(w) / (2 tanh(1)) + 1/2: w = 0 -> 0.5, 0.5 -> 0.80339, -1 -> 0, 1 -> 1.
    # k = 2 (n = 3): round(1.5) = 2, round(2.41) = 2, 0, 3 -> w_q = 2q/3 - 1 = 1/3, 1/3, -1, 1.
    # k = 1 (n = 1): round(0.5) = 0 (even), round(0.80) = 1, 0, 1 -> -1, 1, -1, 1.
    w = torch.tensor([0.0, 0.5, -1.0, 1.0])
    r2 = dorefa_quantize_weights(w, 2)
    assert r2.codes.tolist() == [2, 2, 0, 3]
    torch.testing.assert_close(r2.dequantized, torch.tensor([1 / 3, 1 / 3, -1.0, 1.0]))
    assert r2.scale == 1.0
    r1 = dorefa_quantize_weights(w, 1)
    assert r1.codes.tolist() == [0, 1, 0, 1]
    assert r1.dequantized.tolist() == [-1.0, 1.0, -1.0, 1.0]


def test_dorefa_rescale_multiplies_by_max_abs():
    w = torch.tensor([0.0, 0.5, -2.0, 1.0])
    plain, scaled = dorefa_quantize_weights(w, 3), dorefa_quantize_weights(w, 3, rescale=True)
    assert scaled.scale == 2.0
    assert torch.equal(scaled.dequantized, plain.dequantized * 2.0)
    assert torch.equal(plain.codes, scaled.codes)


@pytest.mark.parametrize(
    "cfg",
    [QuantConfig(mode="asymmetric", granularity=PerChannel(1)),
     QuantConfig(bits=4, granularity=PerGroup(4), rounding="stochastic"),
     QuantConfig(format="nf4"), QuantConfig(format="fp8_e5m2", range_method="mse"),
     QuantConfig(bits=6, range_method="percentile", percentile=99.0)],
    ids=["int8-asym-axis1", "int4-g4-stoch", "nf4", "fp8-mse", "int6-p99"],
)  # fmt: skip
def test_results_stay_on_the_input_device(device, cfg):
    x = torch.randn(8, 12).to(device)
    qt = quantize(x, cfg)
    for t in (qt.codes, qt.scale, qt.zero_point, qt.dequantize(), qt.levels(0)):
        assert t.device.type == device.type
