"""Properties that must hold for every input, checked with Hypothesis.

Float slack, derived once (``u = 2^-24``, float32's unit roundoff). quantize computes
``v_c = fl(fl(r/s) + z)``, so ``|v_c - (r/s + z)| <= u|r/s| + u|v_c|`` (+ ``2^-150`` when a
quotient is subnormal); clamping cannot move a code away from an in-range ``r/s + z``, so
``|q - (r/s + z)| <= 1/2 + u|r/s| + u|v_c|``. Dequantization ``fl(s (q - z))`` adds
``u|r_hat|`` (+ ``2^-150``). With ``r = s (r/s)`` that gives

    |r - r_hat| <= s/2 + u (|r| + s (|q| + |z| + 1) + |r_hat|) + 2^-148

for every ``r`` whose exact ``r/s + z`` lies in ``[qmin, qmax]`` (the representable range).
Under ``ZeroPoint.FLOAT_MIN`` (``z = 0``) quantize computes ``v_c = fl(fl(r - m) / s)``,
``|v_c - (r - m)/s| <= u|r - m|/s + u|v_c|``, and ``r_hat = fl(fl(s q) + m)`` adds
``u s|q| + u|r_hat|``; with ``|v_c| <= |q| + 1/2`` the bound gains ``u (|m| + s|q|)``.
"""

from __future__ import annotations

import dataclasses
import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from quant_core import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    Rounding,
    ScaleDtype,
    ZeroPoint,
    codebook_for,
    minmax_levels_quantize,
    pack,
    packed_size,
    quantize,
    unpack,
)
from quant_core.encode import codebook_scaled

# Every test here runs on both backends (see conftest.backend).
pytestmark = pytest.mark.usefixtures("backend")

U = 2.0**-24
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies ----------------------------------------------------------------------------

GRANULARITIES = st.sampled_from([PerTensor(), PerChannel(0), PerChannel(-1), PerGroup(4)])

# ABSMEAN (BitNet's absmean) is symmetric-only; its own tests cover it.
ANY_MODE_RANGES = [m for m in RangeMethod if m is not RangeMethod.ABSMEAN]


def finite_f32(max_abs: float = 1e6, subnormal: bool = True) -> st.SearchStrategy[float]:
    return st.floats(
        -max_abs, max_abs, width=32, allow_nan=False, allow_infinity=False,
        allow_subnormal=subnormal,
    )  # fmt: skip


@st.composite
def matrices(draw, max_abs: float = 1e6, subnormal: bool = True) -> torch.Tensor:
    """Float32 matrices ``[R, C]`` with C a multiple of 4, values of mixed magnitude."""
    rows = draw(st.integers(1, 5))
    cols = 4 * draw(st.integers(1, 6))
    arr = draw(hnp.arrays(np.float32, (rows, cols), elements=finite_f32(max_abs, subnormal)))
    offset = draw(st.sampled_from([0.0, 0.0, 1e3, -50.0]))  # some all-positive/negative
    return torch.from_numpy(arr) + offset


@st.composite
def int_configs(draw, rounding: Rounding = Rounding.NEAREST) -> QuantConfig:
    return QuantConfig(
        bits=draw(st.integers(2, 16)),
        mode=draw(st.sampled_from(Mode)),
        granularity=draw(GRANULARITIES),
        range_method=draw(st.sampled_from(ANY_MODE_RANGES)),
        scale_dtype=draw(st.sampled_from(ScaleDtype)),
        rounding=rounding,
        zero_point=draw(st.sampled_from(ZeroPoint)),
    )


def _per_element(qt, t: torch.Tensor) -> torch.Tensor:
    """Broadcast a per-block tensor (scale or zero point) to the codes' shape."""
    return qt.layout.expand(t.reshape(-1))


# -- codes, error bound, exact grid values ---------------------------------------------------


@FAST
@given(x=matrices(), cfg=int_configs(), stochastic=st.booleans())
def test_codes_lie_in_qmin_qmax(x, cfg, stochastic):
    if stochastic:
        cfg = dataclasses.replace(cfg, rounding=Rounding.STOCHASTIC)
    qt = quantize(x, cfg)
    assert qt.codes.shape == x.shape
    assert qt.codes.dtype == (torch.int8 if cfg.bits <= 8 else torch.int16)
    assert int(qt.codes.min()) >= cfg.qmin and int(qt.codes.max()) <= cfg.qmax
    assert bool(torch.isfinite(qt.dequantize()).all())
    assert bool((qt.scale > 0).all())


@FAST
@given(x=matrices(), cfg=int_configs())
def test_error_at_most_half_a_step_inside_the_representable_range(x, cfg):
    qt = quantize(x, cfg)
    x_hat = qt.dequantize().double()
    s = _per_element(qt, qt.scale).double()
    z = _per_element(qt, qt.zero_point).double()
    m = torch.zeros_like(s) if qt.offset is None else _per_element(qt, qt.offset).double()
    q = qt.codes.double()
    xd = x.double()
    v = (xd - m) / s + z  # exact enough in float64
    inside = (v >= cfg.qmin) & (v <= cfg.qmax)
    bound = s / 2 + U * (xd.abs() + s * (q.abs() + z.abs() + 1) + x_hat.abs()) + 2.0**-148
    if qt.offset is not None:
        bound = bound + U * (m.abs() + s * q.abs())
    err = (xd - x_hat).abs()
    assert bool((err[inside] <= bound[inside]).all())


@st.composite
def grid_tensors(draw):
    """A tensor whose every value is on its blocks' grid, with power-of-two scales."""
    bits = draw(st.integers(2, 16))
    mode = draw(st.sampled_from(Mode))
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    n_blocks, block_len = draw(st.integers(1, 4)), draw(st.integers(2, 12))
    rows = []
    scales, zps = [], []
    for _ in range(n_blocks):
        e = draw(st.integers(-20, 10))
        low = -qmax if mode is Mode.SYMMETRIC else qmin  # symmetric: keep max|r| = qmax s
        codes = draw(st.lists(st.integers(low, qmax), min_size=block_len, max_size=block_len))
        if mode is Mode.SYMMETRIC:
            codes[0] = draw(st.sampled_from([qmax, -qmax]))  # max|r| = qmax * 2^e: s = 2^e
            z = 0
        else:
            codes[0], codes[1] = qmin, qmax  # r_max - r_min = (qmax - qmin) 2^e: s = 2^e
            z = draw(st.integers(qmin, qmax))
        rows.append([(c - z) * 2.0**e for c in codes])
        scales.append(2.0**e)
        zps.append(z)
    perm = draw(st.permutations(range(block_len)))
    x = torch.tensor(rows, dtype=torch.float32)[:, list(perm)]
    return bits, mode, x, torch.tensor(scales), torch.tensor(zps, dtype=torch.int32)


@FAST
@given(case=grid_tensors())
def test_values_on_the_grid_survive_exactly(case):
    bits, mode, x, scales, zps = case
    qt = quantize(x, QuantConfig(bits=bits, mode=mode, granularity=PerChannel(0)))
    assert torch.equal(qt.scale, scales)
    assert torch.equal(qt.zero_point, zps)
    assert torch.equal(qt.dequantize(), x)
    expected_codes = (x / scales[:, None] + zps[:, None]).to(qt.codes.dtype)
    assert torch.equal(qt.codes, expected_codes)


# -- more bits ------------------------------------------------------------------------------
#
# "More bits never gives a larger min-max MSE" is false as stated, in both modes:
# test_more_bits_can_increase_error shows it. The grid of ``b`` bits is not a subset of the
# grid of ``b + 1`` bits, so a value on the coarse grid can fall between points of the finer
# one. What holds is the nested case. Symmetric levels are multiples of ``a / qmax_b`` with
# ``qmax_b = 2^(b-1) - 1``; ``2^m - 1`` divides ``2^n - 1`` iff ``m`` divides ``n``, so the
# ``b``-bit grid (on ``[-a, a]``) lies inside the ``b'``-bit grid iff ``(b-1) | (b'-1)``.
# Asymmetric levels are multiples of ``s_b = R / (2^b - 1)`` inside a window of width ``R``
# that starts at the multiple of ``s_b`` nearest ``r_min``; with ``b | b'`` the coarse
# multiples are fine multiples, and a coarse level outside the fine window is farther from
# every input than the fine window's end, so each input's nearest fine level is at least as
# close as its nearest coarse level. This holds under every zero-point convention: under
# ``INCLUDE_ZERO`` the range is first widened to contain 0, the same for both widths;
# ``FLOAT_MIN`` levels are ``r_min + k s_b``, ``k = 0..2^b - 1``, a window of width ``R``
# starting at ``r_min`` itself; the course's clamp of ``z`` acts only when ``r_min > 0``
# (then ``z = qmin`` at every width, window ``[0, R]``) or ``r_max < 0`` (``z = qmax``,
# window ``[-R, 0]``), identically for both widths.
#
# Float slack: each computed level is within ``3u max|r|`` of its exact value and a rounding
# decision near a tie can pick the other neighbour (``2u max|r|``); with both widths, the
# pointwise slack is below ``10u max(|r_min|, |r_max|, R)`` (+ a few subnormal ulps). This
# needs normal scales: a subnormal scale carries an absolute error of up to 2^-150, so
# grids computed at two widths no longer nest (blocks of tiny values are left out).

TINY_NORMAL = float(torch.finfo(torch.float32).tiny)


def _scales_are_normal(x: torch.Tensor, gran) -> bool:
    """Every block's ``max|r|`` and ``r_max - r_min`` is 0 or >= 2^17 * smallest normal, so
    its scale at any width up to 16 bits is a normal float32."""
    from quant_core import layout_for

    blocks = layout_for(x.shape, gran).to_blocks(x.double())
    for stat in (blocks.abs().amax(1), blocks.amax(1) - blocks.amin(1)):
        if bool(((stat > 0) & (stat < 2**17 * TINY_NORMAL)).any()):
            return False
    return True


def _nested_pairs(mode: Mode) -> list[tuple[int, int]]:
    if mode is Mode.SYMMETRIC:
        return [(b, c) for b in range(2, 17) for c in range(b + 1, 17) if (c - 1) % (b - 1) == 0]
    return [(b, c) for b in range(2, 17) for c in range(b + 1, 17) if c % b == 0]


def _assert_no_larger_error(
    x: torch.Tensor, coarse: torch.Tensor, fine: torch.Tensor, slack: torch.Tensor
) -> None:
    """Pointwise ``|x - fine| <= |x - coarse| + slack``, and the MSE bound that follows."""
    err_a = (x.double() - coarse.double()).abs()
    err_b = (x.double() - fine.double()).abs()
    assert bool((err_b <= err_a + slack).all())
    assert err_b.square().mean() <= err_a.square().mean() + 2 * (err_a * slack).mean() + (
        slack.square().mean()
    )


@FAST
@given(x=matrices(max_abs=1e4), data=st.data())
@pytest.mark.parametrize(
    ("mode", "zp"),
    [(Mode.SYMMETRIC, ZeroPoint.INCLUDE_ZERO), *((Mode.ASYMMETRIC, zp) for zp in ZeroPoint)],
    ids=["sym", "asym-include-zero", "asym-float-min", "asym-course-clamp"],
)
def test_more_bits_never_increases_error_when_grids_nest(x, data, mode, zp):
    coarse, fine = data.draw(st.sampled_from(_nested_pairs(mode)), label="bits")
    gran = data.draw(GRANULARITIES, label="granularity")
    assume(_scales_are_normal(x, gran))
    a = quantize(x, QuantConfig(bits=coarse, mode=mode, granularity=gran, zero_point=zp))
    b = quantize(x, QuantConfig(bits=fine, mode=mode, granularity=gran, zero_point=zp))
    blocks = a.layout.to_blocks(x.double())
    span = torch.maximum(blocks.abs().amax(1), blocks.amax(1) - blocks.amin(1))
    slack = a.layout.expand(10 * U * span) + 2.0**-146
    _assert_no_larger_error(x, a.dequantize(), b.dequantize(), slack)


# -- finer groups ---------------------------------------------------------------------------
#
# Under INCLUDE_ZERO a block's levels are the multiples ``k S`` of its step ``S = R / n``
# (``R`` the width of its range widened to contain 0, ``n = qmax - qmin``) in a window of
# width ``R`` holding 0, whose ends lie within ``S/2`` of the range's ends. Split a block
# into two halves: each half's widened range lies inside the whole's, ``R_i <= R``. When
# ``R / R_i`` is an integer ``d_i``, every level of the whole (``k S = k d_i s_i``) is a
# level of the half's grid or lies outside the half's window; a level outside is farther
# from any input of the half than the window's nearest end (the end is a multiple of
# ``s_i`` and an input lies within ``s_i/2`` beyond it at most). So each input's error in
# its half is at most its error in the whole, up to the float slack of computing two grids
# (as above, ``10u max(|r|, R)``). Without that divisibility it is false: a coarse level
# can sit on an input that falls between two levels of the finer grid.


@st.composite
def nested_group_pairs(draw):
    """``[rows, 2g]``: each row's halves have widened ranges ``R`` and ``R / d`` (d integer)."""
    rows, g = draw(st.integers(1, 4)), draw(st.integers(2, 6))
    e = draw(st.integers(-6, 6))
    out = []
    for _ in range(rows):
        width = draw(st.integers(1, 40))  # R in units of 2^e
        d = draw(st.sampled_from([1, 2, 3, 4, 5, 8]))
        big_lo = draw(st.integers(-width, 0))  # the whole's range [big_lo, big_lo + width]
        small_w = width / d
        small_lo = draw(st.floats(max(big_lo, -small_w), min(0.0, big_lo + width - small_w)))
        halves = []
        for lo, w in ((float(big_lo), float(width)), (small_lo, small_w)):
            # the half's widened range is [lo, lo + w] (it holds 0): put both ends in it
            vals = [lo, lo + w] + [
                draw(st.floats(lo, lo + w, allow_subnormal=False)) for _ in range(g - 2)
            ]
            halves.extend(draw(st.permutations(vals)))
        out.append(halves)
    return torch.tensor(out, dtype=torch.float64).mul(2.0**e).float(), g


@FAST
@given(case=nested_group_pairs(), bits=st.integers(2, 8))
def test_finer_groups_never_increase_error_under_include_zero_when_grids_nest(case, bits):
    x, g = case
    # float32 rounding moves each half's range by a few ulps: its width stays R/d up to
    # 4u R, within the slack below
    cfg = QuantConfig(bits=bits, mode=Mode.ASYMMETRIC, zero_point=ZeroPoint.INCLUDE_ZERO)
    whole = quantize(x, QuantConfig(**{**cfg.__dict__, "granularity": PerGroup(2 * g)}))
    halves = quantize(x, QuantConfig(**{**cfg.__dict__, "granularity": PerGroup(g)}))
    blocks = whole.layout.to_blocks(x.double())
    span = torch.maximum(blocks.abs().amax(1), blocks.amax(1).clamp(min=0) - blocks.amin(1))
    slack = whole.layout.expand(10 * U * span) + 2.0**-146
    _assert_no_larger_error(x, whole.dequantize(), halves.dequantize(), slack)


def test_finer_groups_can_increase_error_without_nesting():
    """A counterexample when R / R_i is not an integer: 2 bits, whole [0, 3] (s = 1, the
    value 1 exact), one half [0, 1.5] has s = 0.5 (1 exact too), the other [0, 2] has
    s = 2/3, between whose levels 2/3 and 4/3 the value 1 falls."""
    x = torch.tensor([[3.0, 0.0, 2.0, 1.0]])
    cfg = dict(bits=2, mode=Mode.ASYMMETRIC)
    whole = quantize(x, QuantConfig(**cfg, granularity=PerGroup(4))).dequantize()
    halves = quantize(x, QuantConfig(**cfg, granularity=PerGroup(2))).dequantize()
    assert torch.equal(whole, x)
    assert float((halves - x).abs().max()) > 0


@pytest.mark.parametrize(
    ("mode", "x", "bits"),
    [
        (Mode.SYMMETRIC, [3.0, 1.0], (3, 4)),  # s = 1 (exact) vs 3/7: 1 falls between levels
        (Mode.ASYMMETRIC, [0.0, 1.0, 3.0], (2, 3)),  # s = 1, z = -2 (exact) vs s = 3/7
    ],
    ids=["sym-3-to-4-bits", "asym-2-to-3-bits"],
)
def test_more_bits_can_increase_error(mode, x, bits):
    """The counterexamples to the unrestricted claim: exact at b bits, not at b + 1."""
    x = torch.tensor(x)
    low, high = (quantize(x, QuantConfig(bits=b, mode=mode)).dequantize() for b in bits)
    assert torch.equal(low, x)
    assert float((high - x).square().mean()) > 0


# -- stochastic rounding -------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(frac=st.floats(0.0, 1.0, exclude_max=True), base=st.integers(-100, 90))
def test_stochastic_rounding_is_unbiased(frac, base):
    """Codes of ``r/s = v`` are ``floor(v) + Bernoulli(p)``, ``p = v - floor(v)``, so the
    number K of codes rounded up among N is Binomial(N, p). Bernstein's inequality gives
    ``P(|K - Np| >= 6 sigma + 10) < 1e-6`` (``sigma^2 = N p (1 - p)``), also for tiny ``p``,
    where a normal approximation fails; the generator is seeded, so a pass is reproducible."""
    n = 8192
    s = 2.0**-4
    x = torch.full((n + 1,), (base + frac) * s)  # float32: v is what that rounds to
    x[0] = 127 * s  # max|r| = 127 s: the scale is s exactly
    v = float(x[1]) / s
    p = v - math.floor(v)
    qt = quantize(x, QuantConfig(bits=8, rounding="stochastic", seed=7))
    assert float(qt.scale) == s
    codes = qt.codes[1:].long()
    assert set(codes.unique().tolist()) <= {math.floor(v), math.floor(v) + 1}
    k = int((codes == math.floor(v) + 1).sum())
    assert abs(k - n * p) <= 6 * math.sqrt(n * p * (1 - p)) + 10


@pytest.mark.parametrize("fmt", [Format.INT, Format.NF4, Format.FP8_E4M3], ids=lambda f: f.value)
def test_stochastic_rounding_reproducible(gen, fmt):
    x = torch.randn(64, 32, generator=gen)
    cfg = QuantConfig(format=fmt, rounding="stochastic", granularity=PerGroup(16), seed=11)
    a, b = quantize(x, cfg), quantize(x, cfg)
    assert torch.equal(a.codes, b.codes)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(quantize(x, cfg, g1).codes, quantize(x, cfg, g2).codes)
    other = quantize(x, QuantConfig(**{**cfg.__dict__, "seed": 12}))
    assert not torch.equal(a.codes, other.codes)


def test_stochastic_codebook_rounding_is_unbiased():
    """NF4 value between two levels: rounds up with probability = its relative position."""
    n = 8192
    lo_v, hi_v = 0.33791524171829224, 0.44070982933044434  # NF4 codes 11 and 12
    v = lo_v + 0.3 * (hi_v - lo_v)
    x = torch.full((n + 1,), v)
    x[0] = 1.0  # absmax 1: s = 1
    qt = quantize(x, QuantConfig(format="nf4", rounding="stochastic", seed=3))
    out = qt.dequantize()[1:].double()
    assert set(qt.codes[1:].unique().tolist()) == {11, 12}
    p = (float(torch.tensor(v)) - lo_v) / (hi_v - lo_v)
    k = int((qt.codes[1:] == 12).sum())
    assert abs(k - n * p) <= 6 * math.sqrt(n * p * (1 - p)) + 10  # Bernstein, as above
    assert abs(float(out.mean()) - v) <= (hi_v - lo_v) * (6 * math.sqrt(p * (1 - p) / n) + 10 / n)


# -- codebook formats ------------------------------------------------------------------------

CODEBOOK_FORMATS = [Format.NF4, Format.FP4_E2M1, Format.FP8_E4M3, Format.FP8_E5M2]


@FAST
@given(x=matrices(max_abs=1e3), fmt=st.sampled_from(CODEBOOK_FORMATS), gran=GRANULARITIES)
# a block of float32 subnormals: NF4 scales by bitsandbytes' 1 / max(s, 1e-38), not 1 / s
@example(x=torch.full((1, 4), 6.8664e-44), fmt=Format.NF4, gran=PerTensor())
@example(x=torch.full((2, 4), 1e-39), fmt=Format.NF4, gran=PerTensor())
def test_codebook_formats_pick_the_nearest_value(x, fmt, gran):
    qt = quantize(x, QuantConfig(format=fmt, granularity=gran))
    cb = codebook_for(fmt)
    s = qt.layout.to_blocks(torch.ones_like(x)) * qt.scale.reshape(-1, 1)
    v = codebook_scaled(qt.layout.to_blocks(x), s, cb)  # the value quantize looks up
    chosen = cb.decode_table[qt.layout.to_blocks(qt.codes).long()].double()
    dist = (v.double().unsqueeze(-1) - cb.values.double()).abs().amin(-1)
    # NF4 midpoints are rounded to float32: a value within u|mid| of one may go either way
    slack = 2 * U * v.double().abs()
    assert bool(((v.double() - chosen).abs() <= dist + slack).all())
    assert torch.equal(qt.dequantize(), qt.layout.from_blocks(chosen.float() * s))


# -- packing ---------------------------------------------------------------------------------


def _reference_pack(codes: list[int], bits: int) -> bytes:
    """Python big-int packing: code i's low bits at bit offset i * bits, little-endian."""
    acc = 0
    for i, c in enumerate(codes):
        acc |= (c & ((1 << bits) - 1)) << (i * bits)
    return acc.to_bytes(math.ceil(len(codes) * bits / 8), "little")


@st.composite
def code_lists(draw):
    bits = draw(st.integers(1, 16))
    signed = draw(st.booleans())
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    codes = draw(st.lists(st.integers(lo, hi), max_size=300))
    return bits, signed, codes


@settings(max_examples=150, deadline=None)
@given(case=code_lists())
def test_unpack_inverts_pack(case):
    bits, signed, codes = case
    t = torch.tensor(codes, dtype=torch.int64)
    packed = pack(t, bits)
    assert packed.dtype == torch.uint8
    assert packed.numel() == packed_size(len(codes), bits)
    assert bytes(packed.tolist()) == _reference_pack(codes, bits)
    out = unpack(packed, bits, len(codes), signed=signed)
    assert out.tolist() == codes
    assert out.dtype in (torch.int8, torch.int16, torch.int32)
    info = torch.iinfo(out.dtype)
    assert info.min <= min(codes, default=0) and max(codes, default=0) <= info.max


@settings(max_examples=100, deadline=None)
@given(case=code_lists(), piece=st.sampled_from([8, 16, 24, 64]))
def test_packing_in_pieces_gives_the_same_bytes(case, piece):
    """The word paths (``bits < 8``) work in pieces of ``_WORD_PIECE`` codes; with small
    pieces the lists cross many of them, with a last piece of any length."""
    from unittest import mock

    import quant_core.packing as packing

    bits, signed, codes = case
    t = torch.tensor(codes, dtype=torch.int64)
    with mock.patch.object(packing, "_WORD_PIECE", piece):
        packed = pack(t, bits)
        assert bytes(packed.tolist()) == _reference_pack(codes, bits)
        assert unpack(packed, bits, len(codes), signed=signed).tolist() == codes


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32])
@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 6, 7, 8])
def test_packing_takes_every_code_dtype(dtype, bits):
    """Signed codes at their extremes and unsigned at theirs, from every integer dtype
    that holds them, give the reference bytes."""
    lo = -(1 << (bits - 1)) if dtype != torch.uint8 else 0
    hi = (1 << bits) - 1 if dtype != torch.int8 or bits < 8 else 127
    codes = [lo, hi, 0, lo, 1, hi, lo, hi, 0, 1, hi]
    packed = pack(torch.tensor(codes, dtype=dtype), bits)
    assert bytes(packed.tolist()) == _reference_pack(codes, bits)
    back = unpack(packed, bits, len(codes), signed=False).tolist()
    assert back == [c & ((1 << bits) - 1) for c in codes]


@settings(max_examples=30, deadline=None)
@given(x=matrices(max_abs=100.0), bits=st.integers(2, 8))
def test_quantized_codes_survive_packing(x, bits):
    qt = quantize(x, QuantConfig(bits=bits, mode="asymmetric", granularity=PerGroup(4)))
    packed = pack(qt.codes, bits)
    out = unpack(packed, bits, qt.codes.numel()).reshape(qt.codes.shape)
    assert torch.equal(out.to(qt.codes.dtype), qt.codes)


# -- constant tensors -----------------------------------------------------------------------
#
# A constant c with a normal scale and no overflow (|c| <= 2^127): symmetric
# s = fl(|c| / qmax), so c / s rounds to +-qmax (it is qmax within 2u qmax < 1/2) and
# r_hat = fl(s qmax) = c (1 + d1)(1 + d2) with |d| <= u: |r_hat - c| <= (2u + u^2)|c|.
# Asymmetric widens to [min(c, 0), max(c, 0)]; then z = qmin (c > 0) or qmax (c < 0),
# q - z = +-(qmax - qmin) and the same bound holds. The scale is normal when
# |c| >= 2^16 * (smallest normal); smaller constants are checked separately
# (test_tiny_constants).


@FAST
@given(
    c=st.one_of(
        st.just(0.0),
        finite_f32(2.0**127).filter(lambda v: v == 0 or abs(v) >= 2**16 * TINY_NORMAL),
    ),
    cfg=int_configs(),
    shape=st.sampled_from([(8,), (2, 4), (3, 1, 4)]),
)
def test_constant_tensors_dequantize_to_themselves(c, cfg, shape):
    assume(cfg.scale_dtype is ScaleDtype.FP32)  # fp16/bf16 scales round: see below
    x = torch.full(shape, c)
    qt = quantize(x, cfg)
    out = qt.dequantize()
    assert bool(torch.isfinite(out).all()) and bool(torch.isfinite(qt.scale).all())
    assert bool(((out.double() - c).abs() <= (2 * U + U * U) * abs(c)).all())


SCHEMES = [("symmetric", "include_zero"), ("asymmetric", "include_zero"),
           ("asymmetric", "float_min"), ("asymmetric", "course_clamp")]  # fmt: skip
SCHEME_IDS = ["sym", "asym", "asym-float-min", "asym-course-clamp"]


@pytest.mark.parametrize("scale_dtype", ["fp16", "bf16"])
@pytest.mark.parametrize(("mode", "zp"), SCHEMES, ids=SCHEME_IDS)
def test_constant_tensors_with_rounded_scales_stay_within_half_a_step(mode, zp, scale_dtype):
    """fp16/bf16 scales are rounded, so q may saturate; still finite and within s/2 + slack.
    Under FLOAT_MIN, s = 1 and m = c rounded to the scale dtype: the code absorbs the
    rounding, ``q = round(c - m)``, so the error is at most s/2 too (|c - m| < 2^(b-1))."""
    for c in [0.0, 1.0, -3.7, 1234.5]:
        x = torch.full((4, 4), c)
        cfg = QuantConfig(bits=4, mode=mode, scale_dtype=scale_dtype, zero_point=zp)
        qt = quantize(x, cfg)
        out = qt.dequantize()
        assert bool(torch.isfinite(out).all())
        s = float(qt.scale)
        assert float((out.double() - c).abs().max()) <= s / 2 + 8 * U * abs(c)


@pytest.mark.parametrize("mode", ["symmetric", "asymmetric"])
@pytest.mark.parametrize(
    "c", [1e-44, -1e-44, 1e-40, -(2.0**-140)], ids=["1e-44", "-1e-44", "1e-40", "-2^-140"]
)
def test_tiny_constants(mode, c):
    """Subnormal constants. A subnormal scale is off from ``|c| / qmax`` by up to 2^-150, so
    ``|c| / s`` may exceed qmax and clamp: the error is below ``s/2 + qmax 2^-150``. When
    the scale underflows to zero it becomes 2^-149, and c (a multiple of it) is exact."""
    x = torch.full((5,), c)
    cfg = QuantConfig(bits=8, mode=mode)
    qt = quantize(x, cfg)
    out = qt.dequantize()
    s = float(qt.scale)
    assert s > 0
    c32 = float(torch.tensor(c))
    err = float((out.double() - c32).abs().max())
    assert err <= s / 2 + (cfg.qmax + 1) * 2.0**-150
    if abs(c32) < cfg.qmax * 2.0**-150:
        assert s == 2.0**-149 and err == 0


# -- extremes of float32 ---------------------------------------------------------------------

F32_MAX = float(torch.finfo(torch.float32).max)


@FAST
@given(
    x=hnp.arrays(np.float32, st.integers(1, 12), elements=finite_f32(F32_MAX)),
    cfg=int_configs(),
    fmt=st.sampled_from([Format.INT, *CODEBOOK_FORMATS]),
)
def test_any_finite_float32_input_gives_finite_output(x, cfg, fmt):
    x = torch.from_numpy(x)
    if fmt is not Format.INT:
        cfg = QuantConfig(format=fmt, scale_dtype=cfg.scale_dtype)
    elif isinstance(cfg.granularity, PerGroup):
        cfg = dataclasses.replace(cfg, granularity=PerTensor())
    qt = quantize(x, cfg)
    assert bool(torch.isfinite(qt.dequantize()).all())
    lo, hi = qt.representable_range().lo, qt.representable_range().hi
    assert bool(torch.isfinite(lo).all() & torch.isfinite(hi).all())


@pytest.mark.parametrize(("mode", "zp"), SCHEMES, ids=SCHEME_IDS)
@pytest.mark.parametrize("bits", [2, 8, 16], ids=lambda b: f"int{b}")
def test_range_up_to_float32_max_stays_finite(mode, zp, bits):
    """Ranges whose width (or whose top level) overflows float32: finite results, and
    within half a step (plus the slack of a scale stepped down by a few ulps)."""
    for x in ([-F32_MAX, F32_MAX], [0.0, F32_MAX], [-F32_MAX, 1.0, F32_MAX], [-3e38, 3e38]):
        t = torch.tensor(x)
        qt = quantize(t, QuantConfig(bits=bits, mode=mode, zero_point=zp))
        out = qt.dequantize()
        assert bool(torch.isfinite(out).all()), x
        err = (out.double() - t.double()).abs().max()
        assert float(err) <= float(qt.scale) / 2 + 8 * U * F32_MAX, x


def test_minmax_levels_quantize_range_wider_than_float32():
    """max - min overflows float32 here; the levels are computed in float64 instead."""
    x = torch.tensor([-3e38, 3e38, 0.0, 1e38])
    r = minmax_levels_quantize(x, 2)  # step 2e38: levels -3e38, -1e38, 1e38, 3e38
    assert r.codes.tolist() == [0, 3, 2, 2]  # 0 is a tie (1.5 steps): to even, 2
    assert bool(torch.isfinite(r.levels).all())
    assert float(r.levels[0]) == float(x[0]) and float(r.levels[-1]) == float(x[1])
    torch.testing.assert_close(r.levels, torch.tensor([-3e38, -1e38, 1e38, 3e38]))
