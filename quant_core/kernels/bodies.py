"""The kernels themselves: plain torch code that Inductor compiles into one loop each,
doing the eager path's IEEE operations in its order (see ``quant_core.kernels``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..config import Format
from ..formats import Codebook, codebook_for

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
    """Codebook dequantization ``clamp(s * table[q])`` by a gather: for the large tables
    (FP8's 256 entries); ``_decode_small_table`` for the others."""
    return (table[q.to(torch.int64)] * s).clamp(-_F32_MAX, _F32_MAX)


def _decode_small_table(q: torch.Tensor, table: torch.Tensor, s: torch.Tensor) -> None:
    """``clamp(s * table[q])``, in place on the codes already converted to float32 (exact
    integers), for a table of ``2^k`` entries (``k <= 6``: ternary's 4, NF4/FP4/IQ4_NL's
    16, FP6's 64) by a tree of selects: level by level, each pair of neighbouring code runs
    ``[a, a + w)``, ``[a + w, a + 2w)`` becomes one, its entry picked by ``q >= a + w``, so
    ``table[q]`` comes out exactly (``-0`` and NaN entries included), then is scaled and
    clamped as by the gather. Inductor turns a gather into a scalar loop; these compares
    and selects vectorize (4096 x 4096 FP4: 118 ms -> ~60 ms on one thread). A code beyond
    the table (which the eager gather refuses) picks the last entry."""
    groups = [table[i] for i in range(table.shape[0])]
    width = 1
    while len(groups) > 1:
        groups = [
            torch.where(q >= (2 * j + 1) * width, groups[2 * j + 1], groups[2 * j])
            for j in range(len(groups) // 2)
        ]
        width *= 2
    q.copy_((groups[0] * s).clamp(-_F32_MAX, _F32_MAX))


SMALL_TABLE_MAX = 64
"""The largest decode table ``_decode_small_table`` takes (a power of two)."""


@dataclass(frozen=True)
class _SignMagnitude:
    """A codebook whose codes are a sign bit over a magnitude index (FP4 E2M1, FP6): the
    magnitudes ``mags`` (ascending from 0) have codes ``0..len(mags) - 1``, their negatives
    ``code | sign``; ``tie_up[j]``: a magnitude exactly between ``mags[j]`` and
    ``mags[j + 1]`` goes to the larger one."""

    mags: tuple[float, ...]
    tie_up: tuple[bool, ...]
    sign: int


def _sign_magnitude(cb: Codebook) -> _SignMagnitude | None:
    """``cb`` as sign and magnitude when its codes, values and tie rule are (a negative
    value rounding as its magnitude does, ``-0`` for a negative that rounds to zero), else
    ``None``."""
    sign, zero = cb.neg_zero_code, cb.zero_index
    if sign is None or zero is None or sign & (sign - 1):
        return None
    values, codes = cb.values.tolist(), cb.codes.tolist()
    n = len(values) - zero  # magnitudes, 0 first
    if len(values) != 2 * n - 1 or sign < n:
        return None
    mags = values[zero:]
    for j in range(n):
        if codes[zero + j] != j:
            return None
        if j and (values[zero - j] != -mags[j] or codes[zero - j] != (j | sign)):
            return None
    tie_up = cb.tie_up[zero:]
    # a negative tie between -mags[j + 1] and -mags[j] goes up, to -mags[j], exactly when
    # the positive one goes down
    if any(cb.tie_up[zero - 1 - j] == tie_up[j] for j in range(n - 1)):
        return None
    return _SignMagnitude(tuple(mags), tuple(tie_up), sign)


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
    sm = _sign_magnitude(cb)
    if sm is not None:
        return _sign_magnitude_encoder(sm, multiply)
    mids = ((cb.values[1:] + cb.values[:-1]) / 2).tolist()
    nf4 = fmt is Format.NF4
    if nf4 and not torch.equal(cb.codes, torch.arange(len(cb.codes), dtype=torch.uint8)):
        raise ValueError(f"{fmt.value} codes are not the value indices")
    # codes that are the value indices (NF4, IQ4_NL, ternary) need no lookup: a gather is
    # a scalar loop in Inductor's code
    identity = torch.equal(cb.codes, torch.arange(len(cb.codes), dtype=torch.uint8))
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
        if nf4 or (identity and neg_zero is None):
            return idx.to(torch.uint8)
        code = idx.to(torch.uint8) if identity else codes[idx]
        if neg_zero is not None:
            code = torch.where((idx == zero_index) & torch.signbit(v), neg_zero, code)
        return code

    return encode_small


def _sign_magnitude_encoder(sm: _SignMagnitude, multiply: bool) -> Callable[..., torch.Tensor]:
    """The nearest-rounding encoder of a sign-magnitude codebook: ``|v|`` clamped to the
    largest magnitude and counted against the magnitudes' midpoints (a tie moved up where
    ``sm.tie_up`` says), the sign bit of ``v`` (IEEE's, so ``-0`` and a negative rounding
    to zero get ``-0``'s code) or'ed in. The same codes as the midpoints of the whole value
    list and the code table, in half the comparisons and without a gather, which Inductor
    turns into a scalar loop: 4096 x 4096 FP4 went from ~165 ms to ~31 ms on one thread.
    ``clamp(v, -M, M)`` and ``min(|v|, M)`` have the same magnitude (``M`` the largest)."""
    mags = sm.mags
    top = mags[-1]
    m = torch.tensor(mags, dtype=torch.float32)
    mids = ((m[1:] + m[:-1]) / 2).tolist()  # in float32, as the eager path's midpoints
    bumps = [mids[j] for j in range(len(mids)) if sm.tie_up[j]]
    sign_bit = sm.sign.bit_length() - 1  # the code's sign bit (3 for FP4, 5 for FP6)

    def encode_sign_magnitude(
        blocks: torch.Tensor, s: torch.Tensor, codes: torch.Tensor
    ) -> torch.Tensor:
        v = blocks * s if multiply else blocks / s
        a = v.abs().clamp(max=top)
        idx = (a > mids[0]).to(torch.int32)
        for mid in mids[1:]:
            idx = idx + (a > mid).to(torch.int32)
        for mid in bumps:
            idx = idx + (a == mid).to(torch.int32)
        # the sign bit as an integer (a compare, as torch.signbit is a scalar loop there)
        negative = (v.view(torch.int32) < 0).to(torch.int32)
        return (idx | (negative << sign_bit)).to(torch.uint8)

    return encode_sign_magnitude


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
