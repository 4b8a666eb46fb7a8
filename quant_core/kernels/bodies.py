"""The kernels themselves: plain torch code that Inductor compiles into one loop each,
doing the eager path's IEEE operations in its order (see ``quant_core.kernels``)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from ..config import Format
from ..formats import codebook_for

_F32_MAX = torch.finfo(torch.float32).max


def canonical_zeros(t: torch.Tensor) -> torch.Tensor:
    """``t`` with ``-0`` replaced by ``+0`` (every other value, NaN included, kept). Applied
    to the extremes of both paths, whose zero signs depend on the order of comparison.
    (A ``select``, not ``t + 0``, which a compiler may drop as a no-op.)"""
    return torch.where(t == 0, 0.0, t)


# -- the kernels (plain torch code; Inductor compiles each into one loop) -----------------


def _extremes_kernel(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        canonical_zeros(blocks.amin(dim=1, keepdim=True)),
        canonical_zeros(blocks.amax(dim=1, keepdim=True)),
    )


def _unrounded(
    blocks: torch.Tensor, s: torch.Tensor, z: torch.Tensor, m: torch.Tensor
) -> torch.Tensor:
    """``(r - m) / s + z``: the code before rounding, as the eager path computes it (traced
    into each kernel below, so every kernel keeps the same operations in the same order)."""
    return (blocks - m) / s + z.to(torch.float32)  # int32 zero points convert exactly


def _encode_kernel(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: torch.Tensor,
    qmax: torch.Tensor,
    dtype: torch.dtype,
) -> torch.Tensor:
    return _unrounded(blocks, s, z, m).round().clamp(qmin, qmax).to(dtype)


def _encode_int8(blocks, s, z, m, qmin, qmax):
    return _encode_kernel(blocks, s, z, m, qmin, qmax, torch.int8)


def _encode_int16(blocks, s, z, m, qmin, qmax):
    return _encode_kernel(blocks, s, z, m, qmin, qmax, torch.int16)


def _encode_stochastic_kernel(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: torch.Tensor,
    qmax: torch.Tensor,
    noise: torch.Tensor,
    dtype: torch.dtype,
) -> torch.Tensor:
    return (_unrounded(blocks, s, z, m) + noise).floor().clamp(qmin, qmax).to(dtype)


def _encode_stochastic_int8(blocks, s, z, m, qmin, qmax, noise):
    return _encode_stochastic_kernel(blocks, s, z, m, qmin, qmax, noise, torch.int8)


def _encode_stochastic_int16(blocks, s, z, m, qmin, qmax, noise):
    return _encode_stochastic_kernel(blocks, s, z, m, qmin, qmax, noise, torch.int16)


def _int_squared_error_kernel(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: torch.Tensor,
    qmax: torch.Tensor,
) -> torch.Tensor:
    q = _unrounded(blocks, s, z, m).round().clamp(qmin, qmax)
    x_hat = ((q - z.to(torch.float32)) * s + m).clamp(-_F32_MAX, _F32_MAX)
    d = blocks - x_hat
    return d * d


# Dequantization, in place on the codes already converted to float32, one kernel per
# convention (no zero tensors to make): the eager path's operations in its order.


def _decode_scale(q: torch.Tensor, s: torch.Tensor) -> None:
    q.copy_((q * s).clamp(-_F32_MAX, _F32_MAX))


def _decode_zero_point(q: torch.Tensor, s: torch.Tensor, z: torch.Tensor) -> None:
    q.copy_(((q - z.to(torch.float32)) * s).clamp(-_F32_MAX, _F32_MAX))


def _decode_offset(q: torch.Tensor, s: torch.Tensor, m: torch.Tensor) -> None:
    q.copy_((q * s + m).clamp(-_F32_MAX, _F32_MAX))


def _decode_zero_point_offset(
    q: torch.Tensor, s: torch.Tensor, z: torch.Tensor, m: torch.Tensor
) -> None:
    q.copy_(((q - z.to(torch.float32)) * s + m).clamp(-_F32_MAX, _F32_MAX))


def _decode_table(q: torch.Tensor, table: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Codebook dequantization ``clamp(s * table[q])``."""
    return (table[q.to(torch.int64)] * s).clamp(-_F32_MAX, _F32_MAX)


@functools.cache
def _codebook_encoder(fmt: Format, multiply: bool = False) -> Callable[..., torch.Tensor]:
    """The nearest-rounding encoder of one codebook format, its constants baked in.

    FP8: ``clamp(r / s)`` cast to the native float8 dtype (IEEE round to nearest even,
    subnormals and ``-0`` included), the bits being the code: the codebook's nearest value
    with ties to the even code, which is what the eager path computes. The others (NF4,
    FP4, FP6, IQ4_NL, ternary): the index ``sum_k [v > mid_k]`` (``bucketize`` over the
    midpoints, a tie going to the lower value), moving a tie at ``mid_k`` up where the
    format's rule says (``Codebook.tie_up``); the code by table (NF4 codes are indices),
    ``-0``'s code for a negative ``v`` rounding to zero. NF4 takes ``1/s`` and multiplies,
    as bitsandbytes and the eager path do; ``multiply``: the second argument is a reciprocal
    to multiply by (NF4's ``1/s``, NVFP4's ``(1/t)/sc``), else a scale to divide by."""
    cb = codebook_for(fmt)
    lo, hi = float(cb.values[0]), float(cb.values[-1])
    if fmt in _FLOAT8:
        dtype = _FLOAT8[fmt]

        def encode_fp8(blocks: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            v = blocks * s if multiply else blocks / s
            return v.clamp(lo, hi).to(dtype).view(torch.uint8)

        return encode_fp8
    mids = ((cb.values[1:] + cb.values[:-1]) / 2).tolist()
    nf4 = fmt is Format.NF4
    if nf4 and not torch.equal(cb.codes, torch.arange(len(cb.codes), dtype=torch.uint8)):
        raise ValueError(f"{fmt.value} codes are not the value indices")
    bumps = [mids[k] for k in range(len(mids)) if cb.tie_up[k]]
    neg_zero, zero_index = cb.neg_zero_code, cb.zero_index

    def encode_small(blocks: torch.Tensor, s: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        v = blocks * s if multiply else blocks / s
        c = v.clamp(lo, hi)
        idx = (c > mids[0]).to(torch.int32)
        for mid in mids[1:]:
            idx = idx + (c > mid).to(torch.int32)
        for mid in bumps:
            idx = idx + (c == mid).to(torch.int32)
        if nf4:
            return idx.to(torch.uint8)
        code = codes[idx]
        if neg_zero is not None:
            code = torch.where((idx == zero_index) & torch.signbit(v), neg_zero, code)
        return code

    return encode_small


def _error_sums_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    d = a64 - b64
    ad = d.abs()
    return torch.stack(
        [
            (d * d).sum(),
            ad.sum(),
            ad.amax(),
            (a64 * a64).sum(),
            (b64 * b64).sum(),
            (a64 * b64).sum(),
        ]
    )


def _beyond_kernel(blocks: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    return torch.stack([(blocks < lo).sum(), (blocks > hi).sum()])


def _bin_kernel(x: torch.Tensor, lo: torch.Tensor, per_unit: torch.Tensor, top: torch.Tensor):
    return torch.minimum(((x - lo) * per_unit).floor().clamp_min(0.0), top).to(torch.uint8)


_FLOAT8 = {Format.FP8_E4M3: torch.float8_e4m3fn, Format.FP8_E5M2: torch.float8_e5m2}
_ENCODE = {torch.int8: _encode_int8, torch.int16: _encode_int16}
_ENCODE_STOCHASTIC = {torch.int8: _encode_stochastic_int8, torch.int16: _encode_stochastic_int16}
