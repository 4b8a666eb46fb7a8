"""quant_core against independent references: PyTorch's own quantizers, a slow loop, native
float8 casts, and the reference numbers of the issue.

Tie window. quant_core computes ``v = fl(fl(r / s) + z)``; PyTorch computes
``fl(fl(r * fl(1/s)) + z)``. With ``u = 2^-24`` (float32's unit roundoff) and ``t = r / s``,
each lies within ``delta = 2u|t| + u|t + z| + u^2|t|`` of the exact ``t + z``, so both round
to the same integer unless the exact value is within ``delta`` of a half-integer. Only those
elements may differ, and then by exactly one step (one code, ``s`` after dequantization).
The test computes the exact value in float64 and uses ``3u (|t| + |z|) + 2^-40``, which
covers ``delta``; no element outside that window may differ at all.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from quant_core import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    ZeroPoint,
    codebook_for,
    quantize,
)

# Every test here runs on both backends (see conftest.backend).
pytestmark = pytest.mark.usefixtures("backend")

U = 2.0**-24  # float32 unit roundoff
MODES = [Mode.SYMMETRIC, Mode.ASYMMETRIC]
MODE_IDS = ["sym", "asym"]


def _exact_v(x: torch.Tensor, scale: torch.Tensor, zp: torch.Tensor) -> torch.Tensor:
    """``r / s + z`` in float64 (exact to ~1e-16 relative), broadcasting scale/zp."""
    return x.double() / scale.double() + zp.double()


def _near_tie(x: torch.Tensor, scale: torch.Tensor, zp: torch.Tensor) -> torch.Tensor:
    """Elements whose ``r/s + z`` lies within the derived window of a .5 tie."""
    v = _exact_v(x, scale, zp)
    t = x.double() / scale.double()
    window = 3 * U * (t.abs() + zp.double().abs()) + 2.0**-40
    return ((v - v.floor()) - 0.5).abs() <= window


def _check_against(
    ours: torch.Tensor, ref: torch.Tensor, near: torch.Tensor, step: torch.Tensor
) -> None:
    """Equal (bitwise) away from ties; at most one ``step`` apart near them.

    Two dequantized values one code apart, ``fl(s (q - z))`` and ``fl(s (q +- 1 - z))``,
    differ from ``s`` by at most their two rounding errors, ``u (|a| + |b|)``.
    """
    far = ~near
    assert torch.equal(ours[far], ref[far]), "differs away from any rounding tie"
    a, b = ours[near].double(), ref[near].double()
    one_step = ((a - b).abs() - step.expand_as(ours)[near].double()).abs()
    assert bool(((a == b) | (one_step <= U * (a.abs() + b.abs()))).all())
    assert int(near.sum()) <= max(8, ours.numel() // 50), "the tie window excluded too much"


def _data(gen: torch.Generator, shape: tuple[int, ...], offset: float = 0.0) -> torch.Tensor:
    return torch.randn(shape, generator=gen) * 3.0 + offset


# quantize works over cache-sized pieces on CPU (quant_core.chunks): the large shapes span
# many pieces, whole rows per piece and (for rows longer than a piece) parts of a row.
LARGE = [(200_000,), (300, 1000)]


@pytest.mark.parametrize("bits", [2, 4, 8, 16], ids=lambda b: f"int{b}")
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize(
    ("shape", "offset"),
    [((64, 96), 0.0), ((64, 96), 2.0), *((shape, 1.0) for shape in LARGE)],
    ids=["centred", "shifted", "large-1d", "large-2d"],
)
def test_per_tensor_matches_fake_quantize_per_tensor_affine(gen, device, bits, mode, shape, offset):
    x = _data(gen, shape, offset).to(device)
    qt = quantize(x, QuantConfig(bits=bits, mode=mode))
    s, z = float(qt.scale), int(qt.zero_point)
    ref = torch.fake_quantize_per_tensor_affine(x, s, z, qt.config.qmin, qt.config.qmax)
    near = _near_tie(x, qt.scale, qt.zero_point)
    _check_against(qt.dequantize(), ref, near, qt.scale)


@pytest.mark.parametrize(
    ("shape", "axis"),
    [
        ((48, 80), 0),
        ((48, 80), 1),
        ((48, 80), -1),
        ((6, 10, 12), 1),
        ((6, 10, 12), -3),
        ((300, 1000), 0),
        ((300, 1000), 1),
        ((2, 70_000), 0),
    ],
    ids=[
        "2d-axis0",
        "2d-axis1",
        "2d-axis-1",
        "3d-axis1",
        "3d-axis-3",
        "large-axis0",
        "large-axis1",
        "long-rows",
    ],
)
@pytest.mark.parametrize("bits", [4, 8], ids=lambda b: f"int{b}")
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_per_channel_matches_fake_quantize_per_channel_affine(gen, device, shape, axis, bits, mode):
    x = _data(gen, shape, 1.0).to(device)
    qt = quantize(x, QuantConfig(bits=bits, mode=mode, granularity=PerChannel(axis)))
    ax = axis % x.dim()
    assert qt.scale.shape == (shape[ax],)
    ref = torch.fake_quantize_per_channel_affine(
        x, qt.scale, qt.zero_point, ax, qt.config.qmin, qt.config.qmax
    )
    bshape = [1] * x.dim()
    bshape[ax] = -1
    s, z = qt.scale.reshape(bshape), qt.zero_point.reshape(bshape)
    _check_against(qt.dequantize(), ref, _near_tie(x, s, z), s)


# torch's quantized tensors are deprecated; they remain a useful independent reference.
DEPRECATED = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")


@DEPRECATED
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_per_tensor_codes_match_quantize_per_tensor_int_repr(gen, mode):
    x = _data(gen, (40, 50), 1.5)
    qt = quantize(x, QuantConfig(bits=8, mode=mode))
    ref = torch.quantize_per_tensor(x, float(qt.scale), int(qt.zero_point), torch.qint8)
    near = _near_tie(x, qt.scale, qt.zero_point)
    _check_against(qt.codes, ref.int_repr(), near, torch.ones(()))


@DEPRECATED
@pytest.mark.parametrize("axis", [0, 1], ids=lambda a: f"axis{a}")
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_per_channel_codes_match_quantize_per_channel_int_repr(gen, axis, mode):
    x = _data(gen, (40, 50), -1.0)
    qt = quantize(x, QuantConfig(bits=8, mode=mode, granularity=PerChannel(axis)))
    ref = torch.quantize_per_channel(
        x, qt.scale.double(), qt.zero_point.long(), axis, torch.qint8
    ).int_repr()
    bshape = [1, 1]
    bshape[axis] = -1
    near = _near_tie(x, qt.scale.reshape(bshape), qt.zero_point.reshape(bshape))
    _check_against(qt.codes, ref, near, torch.ones(()))


def _loop_reference(x: torch.Tensor, bits: int, mode: Mode, g: int, zp: ZeroPoint):
    """Per-group quantization written out element by element, in float32 (numpy scalars).
    Returns scales, zero points, offsets (FLOAT_MIN; else zeros), codes, dequantized."""
    f32 = np.float32
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    rows = x.reshape(-1, x.shape[-1]).numpy()
    scales, zps, offsets = [], [], []
    codes, deq = np.zeros(rows.shape, np.int64), np.zeros(rows.shape, f32)
    for r in range(rows.shape[0]):
        for start in range(0, rows.shape[1], g):
            group = [f32(v) for v in rows[r, start : start + g]]
            lo, hi = min(group), max(group)
            m = f32(0)
            if mode is Mode.SYMMETRIC:
                a = max(abs(lo), abs(hi))
                s = f32(a / f32(qmax)) if a > 0 else f32(1)
                z = 0
            elif zp is ZeroPoint.FLOAT_MIN:
                s = f32(f32(hi - lo) / f32(qmax - qmin)) if hi > lo else f32(1)
                m = f32(lo + f32(s * f32(-qmin))) if hi > lo else lo  # the value of code 0
                z = 0
            else:
                if zp is ZeroPoint.INCLUDE_ZERO or hi <= lo:  # widen to include zero
                    lo, hi = min(lo, f32(0)), max(hi, f32(0))
                s = f32(f32(hi - lo) / f32(qmax - qmin)) if hi > lo else f32(1)
                if zp is ZeroPoint.INCLUDE_ZERO:  # torchao: qmin - round(lo / s)
                    z = int(min(max(qmin - np.round(f32(lo / s)), qmin), qmax))
                else:
                    z = int(min(max(np.round(f32(f32(qmin) - f32(lo / s))), qmin), qmax))
            scales.append(s)
            zps.append(z)
            offsets.append(m)
            for j, v in enumerate(group):
                if zp is ZeroPoint.FLOAT_MIN and mode is Mode.ASYMMETRIC:
                    q = f32(f32(v - m) / s)
                else:
                    q = f32(v / s)
                    if mode is Mode.ASYMMETRIC:
                        q = f32(q + f32(z))
                q = int(min(max(np.round(q), qmin), qmax))  # np.round: half to even
                codes[r, start + j] = q
                deq[r, start + j] = f32(f32(f32(q - z) * s) + m)
    return (
        np.array(scales, f32),
        np.array(zps),
        np.array(offsets, f32),
        codes.reshape(x.shape),
        deq.reshape(x.shape),
    )


@pytest.mark.parametrize(
    ("shape", "g"),
    [((6, 32), 8), ((3, 4, 24), 6), ((40,), 5), ((2, 16), 16), ((4, 9), 1)],
    ids=["2d-g8", "3d-g6", "1d-g5", "whole-row", "g1"],
)
@pytest.mark.parametrize("bits", [3, 8], ids=lambda b: f"int{b}")
@pytest.mark.parametrize(
    ("mode", "zp"),
    [(Mode.SYMMETRIC, ZeroPoint.INCLUDE_ZERO), *((Mode.ASYMMETRIC, zp) for zp in ZeroPoint)],
    ids=["sym", "asym-include-zero", "asym-float-min", "asym-course-clamp"],
)
def test_per_group_matches_slow_loop_reference(gen, shape, g, bits, mode, zp):
    x = _data(gen, shape, 0.5)
    x.view(-1)[:g] = 1.25  # one constant group
    cfg = QuantConfig(bits=bits, mode=mode, granularity=PerGroup(g), zero_point=zp)
    qt = quantize(x, cfg)
    scales, zps, offsets, codes, deq = _loop_reference(x, bits, mode, g, zp)
    assert qt.scale.shape == (*shape[:-1], shape[-1] // g)
    assert torch.equal(qt.scale.flatten(), torch.from_numpy(scales))
    assert torch.equal(qt.zero_point.flatten(), torch.from_numpy(zps).to(torch.int32))
    if cfg.float_offset:
        assert qt.offset is not None
        assert torch.equal(qt.offset.flatten(), torch.from_numpy(offsets))
    else:
        assert qt.offset is None
    assert torch.equal(qt.codes.long(), torch.from_numpy(codes))
    assert torch.equal(qt.dequantize(), torch.from_numpy(deq))


@pytest.mark.parametrize(
    ("shape", "g"), [((300, 1024), 128), ((4, 50_000), 25_000), ((64, 96), 32)],
    ids=["large-g128", "groups-longer-than-a-piece", "small-g32"],
)  # fmt: skip
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_per_group_matches_fake_quantize_on_a_groups_view(gen, device, shape, g, mode):
    """Groups are channels of the ``[n_groups, g]`` view: fake_quantize_per_channel_affine on
    that view is an independent reference at any size."""
    x = _data(gen, shape, 0.5).to(device)
    qt = quantize(x, QuantConfig(bits=8, mode=mode, granularity=PerGroup(g)))
    view = x.reshape(-1, g)
    s, z = qt.scale.reshape(-1), qt.zero_point.reshape(-1)
    ref = torch.fake_quantize_per_channel_affine(view, s, z, 0, -128, 127)
    near = _near_tie(view, s[:, None], z[:, None])
    _check_against(qt.dequantize().reshape(-1, g), ref, near, s[:, None])


REFERENCE_X = [[191.6, -13.5, 728.6], [92.14, 295.5, -184.0], [0.0, 684.6, 245.5]]


def test_reference_numbers_symmetric_per_channel():
    qt = quantize(torch.tensor(REFERENCE_X), QuantConfig(bits=8, granularity=PerChannel(0)))
    expected = torch.tensor([5.7370, 2.3268, 5.3906])
    torch.testing.assert_close(qt.scale.flatten(), expected, rtol=0, atol=5e-5)
    assert torch.equal(qt.zero_point, torch.zeros(3, dtype=torch.int32))
    # the largest |r| of each row maps to +-qmax
    assert qt.codes.abs().amax(dim=1).tolist() == [127, 127, 127]


def test_reference_numbers_asymmetric_per_tensor():
    qt = quantize(torch.tensor(REFERENCE_X), QuantConfig(bits=8, mode="asymmetric"))
    assert abs(float(qt.scale) - 3.5788) < 5e-5
    assert int(qt.zero_point) == -77
    assert int(qt.codes.min()) == -128  # r_min = -184.0 -> round(-51.41 - 77) = -128
    assert int(qt.codes.max()) == 127


def test_reference_numbers_mode_string_equals_enum():
    x = torch.tensor(REFERENCE_X)
    a = quantize(x, QuantConfig(mode="asymmetric"))
    b = quantize(x, QuantConfig(mode=Mode.ASYMMETRIC))
    assert torch.equal(a.codes, b.codes) and torch.equal(a.scale, b.scale)


FP8 = [(Format.FP8_E4M3, torch.float8_e4m3fn), (Format.FP8_E5M2, torch.float8_e5m2)]


def _fp8_data(gen: torch.Generator) -> torch.Tensor:
    """6400 magnitudes over many binades (subnormals of the format included), both signs, zeros."""
    mag = torch.exp2(torch.empty(6400).uniform_(-24, 0, generator=gen))
    sign = torch.where(torch.rand(6400, generator=gen) < 0.5, -1.0, 1.0)
    x = mag * sign
    x[:4] = torch.tensor([1.0, -0.0, 0.0, -1.0])
    return x


@pytest.mark.parametrize(("fmt", "dtype"), FP8, ids=["e4m3", "e5m2"])
@pytest.mark.parametrize("gran", [PerTensor(), PerGroup(64)], ids=["per-tensor", "g64"])
def test_fp8_codes_match_native_cast(gen, device, fmt, dtype, gran):
    x = _fp8_data(gen).to(device)
    qt = quantize(x, QuantConfig(format=fmt, granularity=gran))
    s = qt.scale.reshape(-1, 1)
    v = (qt.layout.to_blocks(x) / s).reshape(x.shape)  # the same division quantize does
    native = v.to(dtype)
    assert torch.equal(qt.codes, native.view(torch.uint8))
    expected = qt.layout.from_blocks(qt.layout.to_blocks(native.float()) * s)
    assert torch.equal(qt.dequantize(), expected)


@pytest.mark.parametrize(("fmt", "dtype"), FP8, ids=["e4m3", "e5m2"])
def test_fp8_exact_ties_round_to_even_like_native_cast(fmt, dtype):
    cb = codebook_for(fmt)
    values = cb.values.double()
    mids = ((values[1:] + values[:-1]) / 2).float()  # exact: fp8 values have short mantissas
    top = cb.max_abs
    x = torch.cat([torch.tensor([top, -top]), mids])  # absmax = top, so s = 1
    qt = quantize(x, QuantConfig(format=fmt))
    assert float(qt.scale) == 1.0
    assert torch.equal(qt.codes, x.to(dtype).view(torch.uint8))
