"""The compiled kernels (quant_core.kernels) against the eager path: equal bit for bit, no
recompiles when shapes and bit widths change, and a quiet fallback where compiling fails.

"Bit for bit" compares every value's bits (so ``-0.0`` differs from ``+0.0`` and NaNs must
match too), dtypes and shapes: codes, scales, zero points, offsets, chosen ranges and the
dequantized tensor. The error metrics are sums, which the compiled pass adds up in another
order: they agree to float64 rounding (see ``test_error_metrics_agree``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import threading
import time

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch._dynamo.utils import counters

from quant_core import (
    Backend,
    BlockRange,
    Format,
    Mode,
    PerBlock,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    QuantizedTensor,
    RangeMethod,
    Rounding,
    ScaleDtype,
    ZeroPoint,
    active_backend,
    clip_stats,
    codebook_for,
    error_metrics,
    kernels,
    quantize,
    quantize_dequantize,
    set_backend,
    use_backend,
    warm_up,
    warm_up_in_background,
)
from quant_core.encode import encode_codebook
from quant_core.formats.registry import preset_names
from quant_core.kernels.bodies import (
    _minifloat,
    _minifloat_encoder,
    _minifloat_for_table,
    _sign_magnitude,
    _sign_magnitude_encoder,
)
from quant_core.mixed import ALL_CANDIDATES, measure_tensor

FORCED_EAGER = kernels.backend_from_env() is Backend.EAGER
needs_compiled = pytest.mark.skipif(FORCED_EAGER, reason="QLAB_COMPILE=0 forces the eager path")

# ABSMEAN (BitNet's absmean) is symmetric-only; its own tests cover it.
ANY_MODE_RANGES = [m for m in RangeMethod if m is not RangeMethod.ABSMEAN]


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a tensor (floats as same-width integers)."""
    t = t.contiguous()
    if t.is_floating_point():
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    return t


def assert_same(a: torch.Tensor | None, b: torch.Tensor | None, what: str) -> None:
    if a is None or b is None:
        assert a is b, f"{what}: one is None"
        return
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} vs {b.dtype}"
    assert a.shape == b.shape, f"{what}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
    assert torch.equal(_bits(a), _bits(b)), f"{what}: values differ"


def both_paths(
    x: torch.Tensor, cfg: QuantConfig, seed: int | None = None, **kwargs: object
) -> tuple[QuantizedTensor, torch.Tensor, QuantizedTensor, torch.Tensor]:
    """``quantize`` + ``dequantize`` compiled (every size) and eager; with ``seed``, each
    path gets its own generator seeded alike."""
    results = []
    for backend in (Backend.COMPILED, Backend.EAGER):
        gen = None if seed is None else torch.Generator().manual_seed(seed)
        with use_backend(backend, min_elements=1):
            qt = quantize(x, cfg, gen, **kwargs)
            results += [qt, qt.dequantize()]
    return tuple(results)  # type: ignore[return-value]


def assert_paths_agree(x: torch.Tensor, cfg: QuantConfig, seed: int | None = None, **kw) -> None:
    fast, fast_hat, ref, ref_hat = both_paths(x, cfg, seed, **kw)
    name = cfg.describe()
    assert_same(fast.codes, ref.codes, f"{name} codes")
    assert_same(fast.scale, ref.scale, f"{name} scales")
    assert_same(fast.zero_point, ref.zero_point, f"{name} zero points")
    assert_same(fast.offset, ref.offset, f"{name} offsets")
    assert fast.chosen_range is not None and ref.chosen_range is not None
    assert_same(fast.chosen_range.lo, ref.chosen_range.lo, f"{name} range lo")
    assert_same(fast.chosen_range.hi, ref.chosen_range.hi, f"{name} range hi")
    assert_same(fast_hat, ref_hat, f"{name} dequantized")


# -- equal bit for bit -------------------------------------------------------------------


GRANULARITIES = [PerTensor(), PerChannel(0), PerChannel(-1), PerGroup(4)]
CODEBOOKS = [Format.NF4, Format.FP4_E2M1, Format.FP8_E4M3, Format.FP8_E5M2]


@st.composite
def matrices(draw) -> torch.Tensor:
    """Float32 ``[R, C]`` (C a multiple of 4) of mixed magnitudes, subnormals and signed
    zeros included; sometimes all positive, all negative or constant."""
    rows = draw(st.integers(1, 6))
    cols = 4 * draw(st.integers(1, 8))
    elements = st.floats(-1e6, 1e6, width=32, allow_nan=False, allow_infinity=False)
    arr = draw(hnp.arrays(np.float32, (rows, cols), elements=elements | st.sampled_from([-0.0])))
    x = torch.from_numpy(arr)
    kind = draw(st.sampled_from(["plain", "plain", "positive", "negative", "constant"]))
    if kind == "positive":
        x = x.abs() + 1e3
    elif kind == "negative":
        x = -x.abs() - 50.0
    elif kind == "constant":
        x = torch.full_like(x, draw(st.sampled_from([0.0, -0.0, 1.25, -3e-40, 3e38])))
    return x


@st.composite
def configs(draw) -> QuantConfig:
    fmt = draw(st.sampled_from([Format.INT, Format.INT, *CODEBOOKS]))
    if fmt is not Format.INT:
        return QuantConfig(
            format=fmt,
            granularity=draw(st.sampled_from(GRANULARITIES)),
            range_method=draw(st.sampled_from(ANY_MODE_RANGES)),
            scale_dtype=draw(st.sampled_from(ScaleDtype)),
            rounding=draw(st.sampled_from(Rounding)),
        )
    return QuantConfig(
        bits=draw(st.integers(2, 16)),
        mode=draw(st.sampled_from(Mode)),
        granularity=draw(st.sampled_from(GRANULARITIES)),
        range_method=draw(st.sampled_from(ANY_MODE_RANGES)),
        scale_dtype=draw(st.sampled_from(ScaleDtype)),
        rounding=draw(st.sampled_from(Rounding)),
        zero_point=draw(st.sampled_from(ZeroPoint)),
    )


@needs_compiled
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(x=matrices(), cfg=configs(), seed=st.integers(0, 2**31))
def test_compiled_equals_eager_bit_for_bit(x, cfg, seed):
    assert_paths_agree(x, cfg, seed)


# Shapes the eager path splits into many cache-sized pieces (rows, and parts of rows).
LARGE = [
    ((300, 1000), PerChannel(0)),
    ((300, 1000), PerChannel(1)),
    ((300, 1000), PerGroup(100)),
    ((2, 300_000), PerChannel(0)),
    ((600_000,), PerTensor()),
    ((6, 50, 40), PerChannel(1)),  # a moved middle axis: a copied block view
]


@needs_compiled
@pytest.mark.parametrize(("shape", "gran"), LARGE, ids=lambda v: str(v))
@pytest.mark.parametrize("bits", [3, 8, 12], ids=lambda b: f"int{b}")
@pytest.mark.parametrize(
    ("mode", "zp"),
    [(Mode.SYMMETRIC, ZeroPoint.INCLUDE_ZERO), *((Mode.ASYMMETRIC, zp) for zp in ZeroPoint)],
    ids=["sym", "include-zero", "float-min", "course-clamp"],
)
def test_large_tensors_equal_bit_for_bit(gen, shape, gran, bits, mode, zp):
    x = torch.randn(shape, generator=gen) * 2.0 + 0.3
    cfg = QuantConfig(bits, mode, gran, zero_point=zp)
    assert_paths_agree(x, cfg)
    assert_paths_agree(x, dataclasses.replace(cfg, rounding=Rounding.STOCHASTIC), seed=5)


@needs_compiled
@pytest.mark.parametrize(
    "values",
    [
        [0.0, -0.0, 0.0, -0.0],  # signed zeros only: the extremes' zero sign
        [-0.0, 0.0, -0.0, 0.0],
        [2.0**-149, -(2.0**-149), 0.0, 2.0**-148],  # a range that underflows the scale
        [3.4e38, -3.4e38, 1.0, 0.0],  # wider than float32's max
        [0.5, 1.5, 2.5, -0.5],  # exact ties at s = 1 in symmetric int2..
        [1.25, 1.25, 1.25, 1.25],  # constant
    ],
    ids=["zeros", "zeros-neg-first", "subnormal", "huge", "ties", "constant"],
)
@pytest.mark.parametrize(
    "cfg",
    [
        QuantConfig(3, Mode.SYMMETRIC, PerGroup(4)),
        QuantConfig(3, Mode.ASYMMETRIC, PerGroup(4)),
        QuantConfig(3, Mode.ASYMMETRIC, PerGroup(4), zero_point=ZeroPoint.FLOAT_MIN),
        QuantConfig(16, Mode.ASYMMETRIC, PerGroup(4), zero_point=ZeroPoint.COURSE_CLAMP),
        QuantConfig(8, Mode.ASYMMETRIC, PerTensor(), scale_dtype=ScaleDtype.FP16),
        QuantConfig(4, Mode.SYMMETRIC, PerChannel(1), scale_dtype=ScaleDtype.BF16),
    ],
    ids=lambda c: c.describe(),
)
def test_edge_values_equal_bit_for_bit(values, cfg):
    x = torch.tensor(values).repeat(3, 2)
    assert_paths_agree(x, cfg)


# every codebook: the sign-magnitude encoders (FP4, FP6), the index ones (NF4, IQ4_NL,
# ternary) and FP8's cast; the select-tree decoders (up to 64 entries) and FP8's gather
ALL_CODEBOOKS = [
    *CODEBOOKS,
    Format.FP6_E3M2,
    Format.FP6_E2M3,
    Format.IQ4_NL,
    Format.TERNARY,
]
MINIFLOAT_CODEBOOKS = [
    Format.FP4_E2M1,
    Format.FP6_E2M3,
    Format.FP6_E3M2,
    Format.FP8_E4M3,
    Format.FP8_E5M2,
]


@needs_compiled
@pytest.mark.parametrize("fmt", ALL_CODEBOOKS, ids=lambda f: f.value)
def test_codebook_midpoints_and_tiny_values_equal_bit_for_bit(fmt):
    """Every midpoint between neighbouring values (ties), each nudged one float32 step
    either way, and values around the smallest nonzero entry, both signs, at ``s = 1``."""
    values = codebook_for(fmt).values
    mids = (values[1:] + values[:-1]) / 2
    near = torch.cat([mids, mids.nextafter(mids - 1), mids.nextafter(mids + 1)])
    tiny = float(values[values > 0].min())
    small = torch.tensor([tiny / 2, tiny / 4, tiny * 0.75, 1e-30, 0.0]) * torch.tensor([[1], [-1]])
    top = values.abs().max().reshape(1)
    x = torch.cat([top, near, small.reshape(-1), -top])  # absmax = top: s = 1
    cfg = QuantConfig(format=fmt)
    fast, _, _, _ = both_paths(x, cfg)
    assert float(fast.scale) == 1.0
    assert_paths_agree(x, cfg)
    assert_paths_agree(x * 0.37, cfg)
    assert_paths_agree(
        x.reshape(1, -1).repeat(3, 1), QuantConfig(format=fmt, granularity=PerChannel(1))
    )


@needs_compiled
@pytest.mark.parametrize("fmt", ALL_CODEBOOKS, ids=lambda f: f.value)
def test_every_code_decodes_bit_for_bit(fmt):
    """Every finite code of the table (``-0`` included) on scales of both signs, zero, a
    subnormal and one that saturates, on both paths, into ``out`` and into a new tensor;
    and the compiled encoders of both divisions and reciprocals on values past the ends."""
    cb = codebook_for(fmt)
    valid = torch.isfinite(cb.decode_table).nonzero().flatten().to(torch.uint8)
    codes = valid.repeat(8, 4)[:, :64] if len(valid) < 64 else valid[:64].repeat(8, 1)
    s = torch.tensor([1.0, -0.75, 0.0, 1e-40, 3e38, 2.0**-126, 0.3, -5.0]).reshape(8, 1)
    ref = (cb.decode_table[codes.long()] * s).clamp(-3.4028234663852886e38, 3.4028234663852886e38)
    with use_backend(Backend.COMPILED, min_elements=1):
        fast = kernels.decode_codebook(codes, s, cb.decode_table)
        into = kernels.decode_codebook(codes, s, cb.decode_table, out=torch.empty(codes.shape))
        fast_t = kernels.decode_codebook(codes.t().contiguous().t(), s, cb.decode_table)
    assert_same(fast, ref, f"{fmt.value} decoded")
    assert_same(into, ref, f"{fmt.value} decoded into out")
    assert_same(fast_t, ref, f"{fmt.value} decoded, column-major codes")
    top = float(cb.values.abs().max())
    x = torch.cat([cb.values, -cb.values, torch.tensor([top * 1.5, -top * 4, 3e38, -3e38])])
    x = x.repeat(2, 1)
    cfg = QuantConfig(format=fmt)
    for s_enc, inverse in ((torch.ones(2, 1), None), (torch.ones(2, 1), torch.ones(2, 1) * 0.5)):
        with use_backend(Backend.COMPILED, min_elements=1):
            fast = kernels.encode_codebook(x, s_enc, cb, inverse)
        with use_backend(Backend.EAGER):
            ref = encode_codebook(x, s_enc, cb, cfg, None, inverse)
        assert_same(fast, ref, f"{fmt.value} codes")


@needs_compiled
@pytest.mark.parametrize("fmt", MINIFLOAT_CODEBOOKS, ids=lambda f: f.value)
def test_float_formats_decode_every_code_from_its_bits(fmt):
    """FP4, FP6 and FP8 decode from the code's bits (no table in the kernel): all of
    their codes, both signs, subnormals, ``-0`` and FP8's Inf/NaN codes (the table's
    NaN), bit for bit as the table's gather, row- and column-major, on scales of both
    signs, zero, a subnormal and one that saturates."""
    cb = codebook_for(fmt)
    n = cb.decode_table.shape[0]
    assert _minifloat(fmt) is not None
    codes = torch.arange(n, dtype=torch.int32).to(torch.uint8).repeat(8, 1)
    s = torch.tensor([1.0, -0.75, 0.0, 1e-40, 3e38, 2.0**-126, 0.3, -5.0]).reshape(8, 1)
    ref = (cb.decode_table[codes.long()] * s).clamp(-3.4028234663852886e38, 3.4028234663852886e38)
    with use_backend(Backend.COMPILED, min_elements=1):
        fast = kernels.decode_codebook(codes, s, cb.decode_table)
        fast_t = kernels.decode_codebook(codes.t().contiguous().t(), s, cb.decode_table)
    assert_same(fast, ref, f"{fmt.value} decoded")
    assert_same(fast_t, ref, f"{fmt.value} decoded, column-major codes")


@needs_compiled
@pytest.mark.parametrize("fmt", [Format.FP6_E2M3, Format.FP6_E3M2], ids=lambda f: f.value)
def test_fp6_rounding_encoder_equals_the_midpoint_count(fmt, gen):
    """FP6 encodes by rounding the float's bits (``_minifloat_encoder``): the same codes as
    counting midpoints (``_sign_magnitude_encoder``), eagerly and compiled, on every
    magnitude, midpoint and their float32 neighbours, values across 30 binades (the
    subnormal codes included), zeros, NaN and Inf, both signs."""
    cb = codebook_for(fmt)
    sm = _sign_magnitude(cb)
    rounding = _minifloat_encoder(_minifloat(fmt), sm, False)
    counting = _sign_magnitude_encoder(sm, False)
    m = torch.tensor(sm.mags)
    mids = (m[1:] + m[:-1]) / 2
    edges = torch.cat([m, mids, m * 1.0001])
    edges = torch.cat([edges, edges.nextafter(edges + 1), edges.nextafter(edges - 1)])
    odd = torch.tensor([0.0, 1e-45, 1e-40, 1e-30, 3e38, float("nan"), float("inf")])
    spread = torch.randn(1 << 14, generator=gen) * torch.exp2(
        torch.randint(-20, 10, (1 << 14,), generator=gen).float()
    )
    x = torch.cat([edges, odd, spread])
    x = torch.cat([x, -x])
    x = x[: len(x) // 64 * 64].reshape(-1, 64)
    s = torch.ones(x.shape[0], 1)
    ref = counting(x, s, cb.codes)
    assert_same(rounding(x, s, cb.codes), ref, f"{fmt.value} rounded codes, eager")
    with use_backend(Backend.COMPILED, min_elements=1):
        fast = kernels.encode_codebook(x, s, cb)
    assert_same(fast, ref, f"{fmt.value} rounded codes, compiled")


@needs_compiled
@pytest.mark.parametrize(
    "cfg",
    [
        QuantConfig.from_name("FP8_BLOCK"),
        QuantConfig(format=Format.FP8_E5M2, granularity=PerBlock(32, 64)),
        QuantConfig(format=Format.NF4, granularity=PerBlock(64, 32)),
        QuantConfig(format=Format.FP6_E3M2, granularity=PerBlock(16, 16)),
    ],
    ids=lambda c: c.describe(),
)
def test_codebook_tiles_on_the_matrix_layout_equal_bit_for_bit(cfg, gen):
    """Codebook formats in ``PerBlock`` tiles quantize and dequantize on the matrix's own
    layout (tile extremes and the encoder on a ``[R/r, r, C/c, c]`` view, scales
    broadcast): the eager path's codes, scales, ranges and values, zero tiles, ``-0``
    and values across 20 binades included, into ``out`` too."""
    x = torch.randn(256, 384, generator=gen) * torch.exp2(
        torch.randint(-10, 10, (256, 384), generator=gen).float()
    )
    x[:128, :128] = 0.0
    x[200, :7] = -0.0
    assert_paths_agree(x, cfg)
    with use_backend(Backend.COMPILED, min_elements=1):
        qt = quantize(x, cfg)
        out = torch.full_like(x, float("nan"))
        assert qt.dequantize(out=out) is out
    with use_backend(Backend.EAGER):
        ref = quantize(x, cfg).dequantize()
    assert_same(out, ref, f"{cfg.describe()} into out")


def test_float_formats_are_recognised():
    """The float formats' tables are their bits' values; NF4, IQ4_NL, ternary are not."""
    for fmt in MINIFLOAT_CODEBOOKS:
        assert _minifloat_for_table(codebook_for(fmt).decode_table) is fmt
    for fmt in (Format.NF4, Format.IQ4_NL, Format.TERNARY):
        assert _minifloat(fmt) is None
        assert _minifloat_for_table(codebook_for(fmt).decode_table) is None


def test_sign_magnitude_codebooks_are_recognised():
    """FP4 and FP6 take the sign-magnitude encoder (no lookup table in the kernel); FP8
    has the same structure but casts to float8 instead; NF4, IQ4_NL and ternary, whose
    codes are not a sign over a magnitude, do not."""
    found = {fmt: _sign_magnitude(codebook_for(fmt)) for fmt in ALL_CODEBOOKS}
    fp4 = found[Format.FP4_E2M1]
    assert fp4 is not None and fp4.sign == 8
    assert fp4.mags == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    assert fp4.tie_up == (False, True, False, True, False, True, False)  # to the even code
    assert found[Format.FP6_E3M2] is not None and found[Format.FP6_E3M2].sign == 32
    assert found[Format.FP6_E2M3] is not None and found[Format.FP6_E2M3].sign == 32
    assert found[Format.FP8_E4M3] is not None and found[Format.FP8_E4M3].sign == 128
    for fmt in (Format.NF4, Format.IQ4_NL, Format.TERNARY):
        assert found[fmt] is None, fmt


@needs_compiled
def test_given_ranges_and_masks_equal_bit_for_bit(gen):
    x = torch.randn(64, 96, generator=gen)
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerChannel(0))
    lo = torch.full((64, 1), -1.0)
    assert_paths_agree(x, cfg, ranges=BlockRange(lo, -lo * 0.5))
    assert_paths_agree(x, cfg, range_mask=torch.rand(64, 96, generator=gen) < 0.7)


@needs_compiled
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(x=matrices(), cfg=configs(), shrink=st.sampled_from([0.25, 0.5, 1.0]))
def test_clip_counts_equal_on_both_paths(x, cfg, shrink):
    """Clipping counts: the compiled path counts every cell beyond its block's bound, the
    eager path only the cells holding an end code; static ranges narrower than the data
    (``shrink`` < 1) make inputs clip, so the two must agree on nonzero counts too."""
    stats = []
    for backend in (Backend.COMPILED, Backend.EAGER):
        with use_backend(backend, min_elements=1):
            rng = quantize(x, cfg).chosen_range
            assert rng is not None
            narrow = BlockRange(rng.lo * shrink, rng.hi * shrink)
            stats.append(clip_stats(x, quantize(x, cfg, ranges=narrow)))
    assert stats[0] == stats[1]


def test_clip_counts_of_a_hand_made_case_on_both_paths():
    # int4 sym (codes -8..7), static range [-1, 1]: s = 1/7, so the grid spans [-8/7, 1]
    # and the clip bounds are half a step beyond: [-8/7 - 1/14, 1 + 1/14] = [-1.2143,
    # 1.0714]. 1.07 and -1.21 lie inside (not clipped); 1.08, 3.0, -1.22 and -2.0 beyond.
    x = torch.tensor([[3.0, -2.0, 1.07, 1.08, -1.21, -1.22, 0.3, 0.0]]).repeat(8, 8)
    cfg = QuantConfig(4, Mode.SYMMETRIC, PerTensor())
    ranges = BlockRange(torch.tensor([[-1.0]]), torch.tensor([[1.0]]))
    for backend in (Backend.COMPILED, Backend.EAGER):
        with use_backend(backend, min_elements=1):
            st_ = clip_stats(x, quantize(x, cfg, ranges=ranges))
        assert (st_.n_clipped_low, st_.n_clipped_high) == (128, 128), backend


@needs_compiled
@pytest.mark.parametrize(
    "context", [torch.inference_mode, torch.no_grad, torch.enable_grad],
    ids=["inference-mode", "no-grad", "grad"],
)  # fmt: skip
def test_any_grad_mode_equal_and_plain(gen, context):
    w = torch.nn.Parameter(torch.randn(96, 128, generator=gen))
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(32))
    with use_backend(Backend.EAGER):
        ref = quantize(w, cfg)
        ref_hat = ref.dequantize()
    with context(), use_backend(Backend.COMPILED, min_elements=1):
        inner = torch.randn(96, 128, generator=gen)  # an inference tensor in inference mode
        qt = quantize(w, cfg)
        x_hat = qt.dequantize()
        quantize(inner, cfg).dequantize()
    assert_same(qt.codes, ref.codes, "codes")
    assert_same(x_hat, ref_hat, "dequantized")
    assert not x_hat.requires_grad and not qt.scale.requires_grad
    x_hat.add_(1.0)  # a plain tensor: writable outside inference mode


@pytest.mark.parametrize("backend", [Backend.COMPILED, Backend.EAGER], ids=["compiled", "eager"])
@pytest.mark.parametrize(
    "cfg",
    [
        QuantConfig(4, Mode.ASYMMETRIC, PerGroup(32)),
        QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)),
        QuantConfig(3, Mode.ASYMMETRIC, PerChannel(1)),  # blocks are the matrix's transpose
        QuantConfig(12, Mode.SYMMETRIC, PerTensor()),
        QuantConfig(3, Mode.ASYMMETRIC, PerGroup(32), zero_point=ZeroPoint.FLOAT_MIN),
        QuantConfig(format=Format.NF4, granularity=PerGroup(64)),
    ],
    ids=lambda c: c.describe(),
)
def test_dequantize_into_out_is_dequantize(gen, cfg: QuantConfig, backend: Backend) -> None:
    """``dequantize(out=buf)`` writes ``dequantize()``'s values bit for bit into ``buf`` (old
    contents overwritten) and returns ``buf`` itself, on both paths."""
    x = torch.randn(96, 256, generator=gen) * 3
    with use_backend(backend, min_elements=1):
        qt = quantize(x, cfg)
        ref = qt.dequantize()
        buf = torch.full_like(x, float("nan"))
        got = qt.dequantize(out=buf)
    assert got is buf
    assert_same(buf, ref, "dequantized into out")


def test_dequantize_out_that_does_not_fit_is_refused() -> None:
    qt = quantize(torch.randn(8, 64), QuantConfig(4, Mode.ASYMMETRIC, PerGroup(32)))
    with pytest.raises(TypeError, match=r"out must be a torch\.Tensor, got ndarray"):
        qt.dequantize(out=np.zeros((8, 64), np.float32))
    for bad, named in [
        (torch.empty(8, 63), r"shape \[8, 63\]"),
        (torch.empty(8, 64, dtype=torch.float16), "float16"),
        (torch.empty(64, 8).t(), "non-contiguous"),
    ]:
        with pytest.raises(ValueError, match=named):
            qt.dequantize(out=bad)
    with pytest.raises(ValueError, match="must not require grad"):
        qt.dequantize(out=torch.empty(8, 64, requires_grad=True))


def test_dequantize_into_an_inference_tensor_under_inference_mode() -> None:
    """The compiled kernel cannot write into an inference tensor (it runs outside inference
    mode): the values are made in a buffer of its own and copied, and the compiled path
    stays on."""
    x = torch.randn(64, 256)
    with use_backend(Backend.COMPILED, min_elements=1), torch.inference_mode():
        qt = quantize(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(32)))
        buf = torch.empty(64, 256)
        assert qt.dequantize(out=buf) is buf
        ref = qt.dequantize()
    assert_same(buf, ref, "dequantized into an inference tensor")
    assert kernels.compile_failure() is None


def test_error_metrics_agree(gen):
    """Sums of 2^16 terms in another order: float64's relative error is at most
    ``n u`` with ``u = 2^-53`` (a loose bound for any order); max |d| is exact."""
    x = torch.randn(256, 256, generator=gen)
    x_hat = x + 0.01 * torch.randn(256, 256, generator=gen)
    with use_backend(Backend.COMPILED, min_elements=1):
        fast = error_metrics(x, x_hat)
    with use_backend(Backend.EAGER):
        ref = error_metrics(x, x_hat)
    assert fast.max_abs == ref.max_abs
    tol = x.numel() * 2.0**-53
    for name in ("mse", "mean_abs", "cosine"):
        a, b = getattr(fast, name), getattr(ref, name)
        assert abs(a - b) <= tol * abs(b), name
    assert abs(fast.sqnr_db - ref.sqnr_db) <= 10 / math.log(10) * 2 * tol


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_error_metrics_refuse_nonfinite_on_both_paths(bad):
    x = torch.randn(256, 256)
    y = x.clone()
    y[3, 7] = bad
    messages = []
    for backend in Backend:
        with use_backend(backend, min_elements=1), pytest.raises(ValueError) as info:
            error_metrics(x, y)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "x_hat holds" in messages[0]


def test_nonfinite_input_raises_on_both_paths():
    x = torch.randn(64, 64)
    x[5, 5] = float("nan")
    for backend in Backend:
        with use_backend(backend, min_elements=1), pytest.raises(ValueError, match="1 NaN"):
            quantize(x, QuantConfig(4, granularity=PerGroup(16)))


# -- no recompiles per slider move --------------------------------------------------------


@needs_compiled
def test_shapes_and_bit_widths_reuse_the_warm_kernels():
    """After ``warm_up``, any size, bit width, mode and convention on the warmed layouts
    (per tensor, per channel on either axis, groups) compiles nothing more."""
    report = warm_up()
    assert report.backend is Backend.COMPILED and report.failure is None
    before = counters["stats"]["unique_graphs"]
    gen = torch.Generator().manual_seed(0)
    with use_backend(Backend.COMPILED, min_elements=1):
        for rows, cols in [(64, 96), (100, 128), (512, 256), (7, 1024), (333, 64)]:
            x = torch.randn(rows, cols, generator=gen)
            for bits in (2, 3, 5, 8, 9, 13, 16):
                for gran in (PerTensor(), PerChannel(0), PerChannel(1), PerGroup(32)):
                    for mode, zp in ((Mode.SYMMETRIC, ZeroPoint.INCLUDE_ZERO),
                                     (Mode.ASYMMETRIC, ZeroPoint.FLOAT_MIN)):  # fmt: skip
                        cfg = QuantConfig(bits, mode, gran, zero_point=zp)
                        quantize(x, cfg).dequantize()
                    stochastic = QuantConfig(bits, granularity=gran, rounding="stochastic")
                    quantize(x, stochastic).dequantize()
            error_metrics(x, x * 0.5)
    assert counters["stats"]["unique_graphs"] == before


@needs_compiled
def test_shipped_presets_reuse_the_warm_kernels():
    """After ``warm_up``, every shipped preset (llama.cpp's types, MX, NVFP4, FP8 blocks,
    BitNet, double quantization) quantizes, dequantizes (also by ``quantize_dequantize``),
    writes its GGUF bytes and reads them back at real weight shapes without compiling
    anything: a first pick on a page, or a first GGUF file, does not wait."""
    report = warm_up()
    assert report.backend is Backend.COMPILED and report.failure is None
    before = counters["stats"]["unique_graphs"]
    gen = torch.Generator().manual_seed(0)
    with use_backend(Backend.COMPILED, min_elements=1):
        for rows, cols in [(384, 1536), (1024, 512), (640, 2304)]:
            x = torch.randn(rows, cols, generator=gen)
            for name in preset_names():
                qt = quantize(x, QuantConfig.from_name(name))
                qt.dequantize()
                quantize_dequantize(x, QuantConfig.from_name(name))  # its fused passes
                if qt.config.gguf_type is not None:
                    # and reopened, as a GGUF file's tensor is
                    data = qt.to_ggml_bytes()
                    QuantizedTensor.from_ggml_bytes(data, qt.config.gguf_type, (rows, cols))
    assert counters["stats"]["unique_graphs"] == before


@needs_compiled
def test_the_mixed_table_reuses_the_warm_kernels():
    """After ``warm_up``, the mixed-precision page's table (``measure_tensor`` over every
    candidate, with input importance and without, with held-out inputs and without) at
    the bundled MiniLM's weight shapes compiles nothing: before the warm-up covered it,
    the page's first table compiled its error sums (5 graphs, seconds each cold)."""
    report = warm_up()
    assert report.backend is Backend.COMPILED and report.failure is None
    before = counters["stats"]["unique_graphs"]
    gen = torch.Generator().manual_seed(0)
    for rows, cols in [(1000, 384), (512, 384), (1536, 384), (384, 1536)]:
        w = torch.randn(rows, cols, generator=gen)
        a = torch.rand(cols, generator=gen, dtype=torch.float64)
        held_out = torch.randn(60, cols, generator=gen)
        for importance in (a, None):
            for inputs in (None, held_out):
                measure_tensor("w", w, ALL_CANDIDATES, importance=importance, held_out=inputs)
    assert counters["stats"]["unique_graphs"] == before


@needs_compiled
def test_a_new_layout_compiles_once():
    """A layout class the warm-up skips (groups of one: ``block_len == 1``) compiles its
    kernels once; later shapes and widths reuse them."""
    warm_up()
    with use_backend(Backend.COMPILED, min_elements=1):
        quantize(torch.randn(8, 8), QuantConfig(4, granularity=PerGroup(1))).dequantize()
        before = counters["stats"]["unique_graphs"]
        for shape, bits in [((16, 4), 3), ((5, 40), 6), ((100, 7), 8)]:
            quantize(torch.randn(shape), QuantConfig(bits, granularity=PerGroup(1))).dequantize()
    assert counters["stats"]["unique_graphs"] == before


# -- the switch ------------------------------------------------------------------------------


def test_backend_choice_precedence(monkeypatch):
    monkeypatch.setenv(kernels.ENV_VAR, "1")
    set_backend("eager")
    try:
        assert kernels.switch._requested().backend is Backend.EAGER
        with use_backend(Backend.COMPILED, min_elements=7):
            assert kernels.switch._requested() == kernels.switch._Choice(Backend.COMPILED, 7)
            seen = []
            requested = kernels.switch._requested
            thread = threading.Thread(target=lambda: seen.append(requested().backend))
            thread.start()
            thread.join()
            assert seen == [Backend.EAGER]  # use_backend is this thread's only
    finally:
        set_backend(None)
    assert kernels.switch._requested().backend is Backend.COMPILED  # the default
    # QLAB_COMPILE=0 forces the eager path over every choice made in code
    monkeypatch.setenv(kernels.ENV_VAR, "0")
    with use_backend(Backend.COMPILED) as inside:
        assert inside is Backend.EAGER and active_backend() is Backend.EAGER
        assert kernels.extremes(torch.randn(512, 512)) is None


def test_bad_choices_name_the_value(monkeypatch):
    monkeypatch.setenv(kernels.ENV_VAR, "maybe")
    with pytest.raises(ValueError, match="QLAB_COMPILE='maybe'"):
        active_backend()
    with pytest.raises(ValueError, match="unknown backend 'fast'"):
        set_backend("fast")
    with pytest.raises(TypeError, match="backend must be a Backend or str, got int"):
        set_backend(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_elements must be >= 1, got 0"):
        set_backend(Backend.COMPILED, min_elements=0)


def test_small_tensors_and_other_devices_run_eagerly(device):
    big = torch.randn(512, 512).to(device)
    with use_backend(Backend.COMPILED):
        assert kernels.extremes(torch.randn(4, 4)) is None  # below MIN_ELEMENTS
        if device.type != "cpu" or FORCED_EAGER:
            assert kernels.extremes(big) is None
        else:
            assert kernels.extremes(big) is not None


@needs_compiled
def test_other_threads_run_eagerly_while_the_kernels_warm(monkeypatch):
    monkeypatch.setattr(kernels.switch, "_warming", threading.Thread(target=lambda: None))
    with use_backend(Backend.COMPILED):
        assert kernels.extremes(torch.randn(512, 512)) is None


def test_waiting_for_a_warm_up_elsewhere_ends_when_it_does(monkeypatch):
    other = threading.Thread(target=lambda: None)
    monkeypatch.setattr(kernels.switch, "_warming", other)
    start = time.perf_counter()
    assert not kernels.wait_for_warm_up(0.2)  # still warming after the timeout
    assert time.perf_counter() - start >= 0.2
    threading.Timer(0.2, lambda: setattr(kernels.switch, "_warming", None)).start()
    assert kernels.wait_for_warm_up(30.0)
    monkeypatch.setattr(kernels.switch, "_warming", threading.current_thread())
    assert kernels.wait_for_warm_up(0.0)  # this thread's own warm-up: nothing to wait for


@needs_compiled
def test_warm_up_in_background_runs_once():
    thread = warm_up_in_background()
    assert thread is not None and thread.daemon
    assert warm_up_in_background() is thread
    thread.join(timeout=600)
    assert not thread.is_alive() and kernels.switch._warming is None


def test_warm_up_under_eager_returns_at_once():
    with use_backend(Backend.EAGER):
        report = warm_up()
    assert report.backend is Backend.EAGER and report.graphs == 0


# -- no compiler: eager, with one log line ------------------------------------------------

_FALLBACK_SCRIPT = """
import json, logging, sys, torch
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
import quant_core as qc
PATCH
x = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
cfg = qc.QuantConfig(4, "asymmetric", qc.PerGroup(32))
with qc.use_backend("compiled"):
    fast = qc.quantize(x, cfg)
    fast_hat = fast.dequantize()
    metrics = qc.error_metrics(x, fast_hat)
    again = qc.quantize(x, cfg).dequantize()
    warm = qc.warm_up()
with qc.use_backend("eager"):
    ref = qc.quantize(x, cfg)
    ref_hat = ref.dequantize()
print(json.dumps({
    "backend": qc.active_backend().value,
    "failure": qc.compile_failure(),
    "warm": warm.backend.value,
    "same": bool(torch.equal(fast.codes, ref.codes) and torch.equal(fast_hat, ref_hat)
                 and torch.equal(again, ref_hat)),
}))
"""


@pytest.mark.parametrize(
    ("env", "patch", "reason"),
    [
        ({"CXX": "/nonexistent/g++"}, "", "InvalidCxxCompiler"),
        ({}, "torch.compile = lambda *a, **k: 1 / 0", "ZeroDivisionError"),
    ],
    ids=["no-compiler", "compile-raises"],
)
def test_compile_failure_falls_back_with_one_warning(tmp_path, env, patch, reason):
    script = _FALLBACK_SCRIPT.replace("PATCH", patch)
    run_env = {**os.environ, **env, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    run_env.pop(kernels.ENV_VAR, None)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=run_env, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["backend"] == "eager" and result["warm"] == "eager" and result["same"]
    assert reason in result["failure"]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("WARNING quant_core: compiled kernels unavailable")


def test_nf4_of_a_subnormal_scale_codes_as_bitsandbytes():
    """``1/s`` overflows for a subnormal scale; bitsandbytes (0.50) multiplies by
    ``1 / max(s, 1e-38)`` instead, so the block's values code as 0 (NF4 code 7), zeros
    included: no NaN. Both paths do the same."""
    x = torch.tensor([[2.8026e-45, 0.0, 0.0, -0.0]]).repeat(2, 1)
    for backend in Backend:
        with use_backend(backend, min_elements=1):
            qt = quantize(x, QuantConfig(format=Format.NF4))
        assert qt.codes.tolist() == [[7, 7, 7, 7]] * 2, backend
        assert torch.equal(qt.dequantize(), torch.zeros_like(x)), backend
