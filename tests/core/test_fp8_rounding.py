"""FP8's fused codes-and-values pass (``kernels.bodies.fp8_rounding_encoder``, used by
``kernels.encode_codebook_values`` for MXFP8): codes by rounding the float32 bits instead
of the float8 cast, equal to the cast's codes on every float32 pattern class, and
``quantize_dequantize`` equal bit for bit to ``quantize`` then ``dequantize`` on the
eager path, with the fused pass on and off."""

from __future__ import annotations

import pytest
import torch

from quant_core import (
    Backend,
    Format,
    QuantConfig,
    codebook_for,
    kernels,
    quantize,
    quantize_dequantize,
    use_backend,
)
from quant_core.kernels import passes
from quant_core.kernels.bodies import _codebook_encoder, _decode_table, fp8_rounding_encoder

FP8 = [Format.FP8_E4M3, Format.FP8_E5M2]
FORCED_EAGER = kernels.backend_from_env() is Backend.EAGER
needs_compiled = pytest.mark.skipif(FORCED_EAGER, reason="QLAB_COMPILE=0 forces the eager path")


def _probes(gen: torch.Generator) -> torch.Tensor:
    """Random float32 bit patterns (every binade, subnormals, Inf, NaNs), the values just
    around FP8's levels and midpoints, zeros: both signs, in rows of 64."""
    bits = torch.randint(-(1 << 31), 1 << 31, (1 << 15,), generator=gen, dtype=torch.int64)
    random = bits.to(torch.int32).view(torch.float32)
    levels = torch.arange(256, dtype=torch.uint8)
    edges = []
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        v = levels.view(dtype).to(torch.float32)
        v = v[torch.isfinite(v)].sort().values
        mids = (v[1:] + v[:-1]) / 2
        edges += [v, mids, mids.nextafter(v[1:]), mids.nextafter(v[:-1])]
    odd = torch.tensor([0.0, 1e-45, 1e-40, 3e38, 6e4, 5e4, 449.0, 464.0, float("inf")])
    x = torch.cat([random, *edges, odd, torch.tensor([float("nan")])])
    x = torch.cat([x, -x])
    return x[: len(x) // 64 * 64].reshape(-1, 64)


@pytest.mark.parametrize("fmt", FP8, ids=lambda f: f.value)
@pytest.mark.parametrize("multiply", [False, True], ids=["divide", "multiply"])
def test_fp8_rounding_codes_equal_the_cast(fmt, multiply):
    """Eagerly (the body's plain torch code): the rounded codes are the float8 cast's on
    every probe, NaN's ``0x7F | sign`` and ``-0``'s ``0x80`` included."""
    x = _probes(torch.Generator().manual_seed(5))
    s = torch.ones(x.shape[0], 1)
    s[::3] = 0.5  # an exact power of two, as MX scales
    ref = _codebook_encoder(fmt, multiply=multiply, raw=True)(x, s)
    got = fp8_rounding_encoder(fmt, multiply)(x, s)
    assert got.dtype == torch.int32
    assert torch.equal(got, ref), f"{(got != ref).sum()} codes differ"


@needs_compiled
@pytest.mark.parametrize("fmt", FP8, ids=lambda f: f.value)
def test_fp8_fused_pass_equals_eager_encode_then_decode(fmt):
    """Compiled: ``encode_codebook_values``' codes are the eager float8 cast's and its
    values the eager decode's (``table[code] s``, clamped), bit for bit. (The compiled
    cast itself sets the sign bit of a positive NaN's code, 0xFF for eager's 0x7F: the
    fused pass keeps eager's; ``quantize`` refuses NaN before either runs.)"""
    cb = codebook_for(fmt)
    x = _probes(torch.Generator().manual_seed(6))
    s = torch.ones(x.shape[0], 1)
    s[::3] = 0.5
    with use_backend(Backend.COMPILED, min_elements=1):
        both = kernels.encode_codebook_values(x, s, cb, None, s)
    assert both is not None
    codes = _codebook_encoder(fmt)(x, s)
    values = _decode_table(codes, cb.decode_table, s)
    assert torch.equal(both[0], codes)
    assert torch.equal(both[1].view(torch.int32), values.view(torch.int32))


@pytest.mark.parametrize("name", ["MXFP8_E4M3", "MXFP8_E5M2"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
def test_mxfp8_round_trip_is_quantize_then_dequantize(name, fused):
    """``quantize_dequantize`` (compiled where available, fused or not) against eager
    ``quantize(x).dequantize()``: the same codes, scales and values, bit for bit, on
    blocks across 60 binades, zeros, ``-0`` and values near float32's max."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(256, 1024, generator=gen) * torch.exp(torch.randn(256, 1, generator=gen) * 8)
    x[0, :64] = 0.0
    x[1, :32] = -0.0
    x[2, :] = torch.logspace(-40, 38, 1024)
    x[3, :] = -3.4e38
    cfg = QuantConfig.from_name(name)
    with use_backend(Backend.EAGER):
        ref = quantize(x, cfg)
        ref_values = ref.dequantize()
    old = passes._FP8_ROUNDING
    passes._FP8_ROUNDING = fused
    try:
        with use_backend(Backend.COMPILED, min_elements=1):
            rt = quantize_dequantize(x, cfg)
    finally:
        passes._FP8_ROUNDING = old
    assert torch.equal(rt.quantized.codes, ref.codes)
    assert torch.equal(rt.quantized.scale.view(torch.int32), ref.scale.view(torch.int32))
    assert torch.equal(rt.values.view(torch.int32), ref_values.view(torch.int32))
