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


def _tile_extremes_kernel(grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        canonical_zeros(grid.amin(dim=(1, 3))),
        canonical_zeros(grid.amax(dim=(1, 3))),
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


def clamp_finite_by_selects(v: torch.Tensor) -> torch.Tensor:
    """``v`` (any shape, float32) clamped to float32's finite range ``[-F32_MAX, F32_MAX]``
    by two selects: the same numbers as ``v.clamp(-F32_MAX, F32_MAX)``, and a NaN passes
    with its bits, as eager's ``clamp`` passes it (Inductor's vector ``clamp`` makes a NaN
    all ones: IQ4_NL's NaN scale of a block near float32's max decoded to other NaN bits
    compiled than eagerly and in the ``gguf`` package; a code 0 times an fp16 ``d`` that
    overflowed, ``0 * inf``, likewise). Shared by the codebook decodes here and the ternary
    GGUF types (``formats.llama_cpp``)."""
    return torch.where(v > _F32_MAX, _F32_MAX, torch.where(v < -_F32_MAX, -_F32_MAX, v))


def _decode_small_table(q: torch.Tensor, table: torch.Tensor, s: torch.Tensor) -> None:
    """``clamp(s * table[q])``, in place on the codes already converted to float32 (exact
    integers), for a table of ``2^k`` entries (``k <= 6``: ternary's 4, NF4/FP4/IQ4_NL's
    16, FP6's 64) by a tree of selects: level by level, each pair of neighbouring code runs
    ``[a, a + w)``, ``[a + w, a + 2w)`` becomes one, its entry picked by ``q >= a + w``, so
    ``table[q]`` comes out exactly (``-0`` and NaN entries included), then is scaled and
    clamped as by the gather. Inductor turns a gather into a scalar loop; these compares
    and selects vectorize (4096 x 4096 FP4: 118 ms -> ~60 ms on one thread). A code beyond
    the table (which the eager gather refuses) picks the last entry."""
    q.copy_(clamp_finite_by_selects(_small_table_values(q, table) * s))


def _small_table_values(q: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``table[q]`` of codes ``q`` (float32, exact integers) by ``_decode_small_table``'s
    tree of selects (also traced into the table's fused error pass, ``error_passes``)."""
    groups = [table[i] for i in range(table.shape[0])]
    width = 1
    while len(groups) > 1:
        groups = [
            torch.where(q >= (2 * j + 1) * width, groups[2 * j + 1], groups[2 * j])
            for j in range(len(groups) // 2)
        ]
        width *= 2
    return groups[0]


SMALL_TABLE_MAX = 64
"""The largest decode table ``_decode_small_table`` takes (a power of two)."""


def _by_selects(n: int) -> bool:
    """Whether a decode table of ``n`` entries is read by ``_decode_small_table``'s tree of
    selects (``n`` a power of two, at most ``SMALL_TABLE_MAX``), not by a gather."""
    return 0 < n <= SMALL_TABLE_MAX and not n & (n - 1)


_MINIFLOAT_FIELDS = {
    Format.FP4_E2M1: (2, 1),
    Format.FP6_E2M3: (2, 3),
    Format.FP6_E3M2: (3, 2),
    Format.FP8_E4M3: (4, 3),
    Format.FP8_E5M2: (5, 2),
}
"""Exponent and mantissa bits of the codebooks whose codes are IEEE-style float bits."""


@dataclass(frozen=True)
class _MiniFloat:
    """A codebook whose code is a small float's bits ``sign | e << M | m`` (bias ``bias``):
    code ``c`` has the magnitude ``(1 + m/2^M) 2^(e - bias)``, or ``m * step`` with
    ``step = 2^(1 - bias - M)`` for ``e = 0``, negated when ``c >= sign``; magnitude codes
    from ``nan_from`` on (FP8's Inf and NaNs) are the table's ``float("nan")`` whatever
    their sign; ``nan_from`` is ``None`` where every code is a number. ``step`` is a float
    field so that the compiled kernel takes it as a constant (Dynamo makes ints symbols
    under ``dynamic=True``, and would compute the power in the loop)."""

    man_bits: int
    bias: int
    sign: int
    step: float
    nan_from: int | None = None


def _minifloat_values(q: torch.Tensor, mf: _MiniFloat) -> torch.Tensor:
    """The float32 values of float codes ``q`` (exact integers) of ``mf``, from the code's
    bits: a normal magnitude's float32 bits are ``mag << (23 - M)`` (exponent ``e``,
    mantissa ``m`` on top) plus ``(127 - bias) << 23``, the sign bit or'ed in, NaN's
    bits where the table has NaN; a subnormal one is ``m * step`` negated for a negative
    code (``-0`` included); all exact. Plain torch code: Inductor compiles it into
    compares, shifts and selects, one bit cast and no gather."""
    c = q.to(torch.int32)
    mag = c & (mf.sign - 1)
    negative = c >= mf.sign
    bits = (mag << (23 - mf.man_bits)) + ((127 - mf.bias) << 23)
    bits = torch.where(negative, bits | _SIGN_BIT, bits)
    if mf.nan_from is not None:
        # in bits: Inductor's select of a NaN constant gave other bits than float("nan")
        bits = torch.where(mag >= mf.nan_from, _NAN_BITS, bits)
    sub = mag.to(torch.float32) * mf.step
    sub = torch.where(negative, -sub, sub)
    return torch.where(mag < (1 << mf.man_bits), sub, bits.view(torch.float32))


_SIGN_BIT = -(1 << 31)
"""float32's sign bit as an int32."""
_NAN_BITS = 0x7FC00000
"""The bits of ``float("nan")``, the NaN of the decode tables."""


@functools.cache
def _minifloat(fmt: Format) -> _MiniFloat | None:
    """``fmt``'s codebook as a ``_MiniFloat`` when its decode table is exactly that (every
    code's float32 bits, NaNs' included, checked here), else ``None``."""
    if fmt not in _MINIFLOAT_FIELDS:
        return None
    exp_bits, man_bits = _MINIFLOAT_FIELDS[fmt]
    table = codebook_for(fmt).decode_table
    n = table.shape[0]
    if n != 1 << (1 + exp_bits + man_bits):
        return None
    bias = (1 << (exp_bits - 1)) - 1
    mf = _MiniFloat(man_bits, bias, n // 2, 2.0 ** (1 - bias - man_bits))
    codes = torch.arange(n, dtype=torch.float32)
    want = table.view(torch.int32)
    differ = (_minifloat_values(codes, mf).view(torch.int32) != want).nonzero().flatten()
    if len(differ):  # FP8's Inf and NaNs: the top magnitudes
        mf = _MiniFloat(mf.man_bits, mf.bias, mf.sign, mf.step, int(differ[0]))
    if not torch.equal(_minifloat_values(codes, mf).view(torch.int32), want):
        return None
    return mf


def _minifloat_for_table(table: torch.Tensor) -> Format | None:
    """The float format (``_minifloat`` not ``None``) whose decode table ``table`` is, bit
    for bit, else ``None`` (a few microseconds: the tables have at most 256 entries)."""
    if table.device.type != "cpu" or table.dtype != torch.float32:
        return None
    bits = table.view(torch.int32)
    for fmt in _MINIFLOAT_FIELDS:
        own = codebook_for(fmt).decode_table
        same = own is table or (
            own.shape == table.shape and torch.equal(own.view(torch.int32), bits)
        )
        if same and _minifloat(fmt) is not None:
            return fmt
    return None


@functools.cache
def _minifloat_decoder(fmt: Format) -> Callable[..., None]:
    """``clamp(s * table[q])`` of a ``_MiniFloat`` format, in place on the codes already
    converted to float32: the entry from the code's bits (``_minifloat_values``, the
    table's float32 exactly), then scaled and clamped as the gather's."""
    mf = _minifloat(fmt)
    if mf is None:
        raise ValueError(f"{fmt.value} codes are not a small float's bits")

    def decode_minifloat(q: torch.Tensor, s: torch.Tensor) -> None:
        q.copy_(clamp_finite_by_selects(_minifloat_values(q, mf) * s))

    return decode_minifloat


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
def _codebook_encoder(
    fmt: Format, multiply: bool = False, raw: bool = False
) -> Callable[..., torch.Tensor]:
    """The nearest-rounding encoder of one codebook format, its constants baked in.

    FP8: ``clamp(r / s)`` cast to the native float8 dtype (IEEE round to nearest even,
    subnormals and ``-0`` included), the bits being the code: the codebook's nearest value
    with ties to the even code, which is what the eager path computes. The others (NF4,
    FP4, FP6, IQ4_NL, ternary): the index ``sum_k [v > mid_k]`` (``bucketize`` over the
    midpoints, a tie going to the lower value), moving a tie at ``mid_k`` up where the
    format's rule says (``Codebook.tie_up``); the code by table (NF4 codes are indices),
    ``-0``'s code for a negative ``v`` rounding to zero (bitsandbytes' FP4: code 8 for a
    positive one). NF4 and bitsandbytes' FP4 take ``1/s`` and multiply, as bitsandbytes and
    the eager path do; ``multiply``: the second argument is a reciprocal
    to multiply by (NF4's ``1/s``, NVFP4's ``(1/t)/sc``), else a scale to divide by.
    ``raw``: the codes as int32 (the same numbers), for a kernel that also computes their
    values (``_codebook_values_body``: Inductor converts uint8 lanes slowly)."""
    cb = codebook_for(fmt)
    lo, hi = float(cb.values[0]), float(cb.values[-1])
    if fmt in _FLOAT8:
        dtype = _FLOAT8[fmt]

        def encode_fp8(blocks: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            v = blocks * s if multiply else blocks / s
            code = v.clamp(lo, hi).to(dtype).view(torch.uint8)
            return code.to(torch.int32) if raw else code

        return encode_fp8
    sm = _sign_magnitude(cb)
    mf = _minifloat(fmt)
    if sm is not None and mf is not None and len(sm.mags) >= _ROUNDING_MIN_MAGNITUDES:
        return _minifloat_encoder(mf, sm, multiply, raw)
    if sm is not None:
        return _sign_magnitude_encoder(sm, multiply, raw)
    mids = ((cb.values[1:] + cb.values[:-1]) / 2).tolist()
    nf4 = fmt is Format.NF4
    if nf4 and not torch.equal(cb.codes, torch.arange(len(cb.codes), dtype=torch.uint8)):
        raise ValueError(f"{fmt.value} codes are not the value indices")
    # codes that are the value indices (NF4, IQ4_NL, ternary) need no lookup: a gather is
    # a scalar loop in Inductor's code
    identity = torch.equal(cb.codes, torch.arange(len(cb.codes), dtype=torch.uint8))
    bumps = [mids[k] for k in range(len(mids)) if cb.tie_up[k]]
    neg_zero, pos_zero, zero_index = cb.neg_zero_code, cb.pos_zero_code, cb.zero_index

    def encode_small(blocks: torch.Tensor, s: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        v = blocks * s if multiply else blocks / s
        c = v.clamp(lo, hi)
        idx = (c > mids[0]).to(torch.int32)
        for mid in mids[1:]:
            idx = idx + (c > mid).to(torch.int32)
        for mid in bumps:
            idx = idx + (c == mid).to(torch.int32)
        if nf4 or (identity and neg_zero is None):
            return idx if raw else idx.to(torch.uint8)
        code = idx.to(torch.uint8) if identity else codes[idx]
        if neg_zero is not None:
            code = torch.where((idx == zero_index) & torch.signbit(v), neg_zero, code)
        if pos_zero is not None:  # bitsandbytes' FP4: a positive v rounding to 0 takes code 8
            code = torch.where((idx == zero_index) & (v > 0), pos_zero, code)
        return code.to(torch.int32) if raw else code

    return encode_small


@functools.cache
def _codebook_values_body(
    encoder: Callable[..., torch.Tensor], fmt: Format | None
) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """``encoder``'s codes and, from them in the same loop, the values that the decode
    kernel for the codebook's table makes of them: ``_minifloat_decoder(fmt)``'s formula
    for a float format ``fmt``, else ``_decode_small_table``'s (the table the last
    argument). ``encoder`` is a ``raw`` one (int32 codes): the values come from the int32
    code, the same number that the decode's float32 code holds (exactly), and only the
    stored codes become uint8 (Inductor converts uint8 lanes through memory: reading the
    uint8 codes back in the loop cost about what the decode pass it saved did). The
    encoder's own arguments come first, then the stored scale ``[n, 1]``."""
    if fmt is not None:
        mf = _minifloat(fmt)
        if mf is None:
            raise ValueError(f"{fmt.value} codes are not a small float's bits")

        def encode_minifloat_values(*args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            code = encoder(*args[:-1])
            # the decode's clamp by selects (a NaN keeps its bits)
            value = _minifloat_values(code, mf) * args[-1]
            return code.to(torch.uint8), clamp_finite_by_selects(value)

        return encode_minifloat_values

    def encode_table_values(*args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        code = encoder(*args[:-2])
        entry = _small_table_values(code.to(torch.float32), args[-1])
        return code.to(torch.uint8), clamp_finite_by_selects(entry * args[-2])

    return encode_table_values


@functools.cache
def _fp4_rounding_values_body(multiply: bool) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """FP4 E2M1's codes and values (``_codebook_values_body``'s results for the FP4
    sign-magnitude encoder and the FP4 decode) by rounding instead of counting midpoints:
    with ``a = min(|v|, 6)`` (NaN: 0, as no midpoint lies below it), the level spacing
    ``u`` is 0.5 below 2, 1 in ``[2, 4)``, 2 from 4, and ``r = round(a / u)`` (half to
    even; ``a / u`` exact, a power of two) gives the nearest magnitude ``r u`` with ties to
    the even code: the code is ``r``, ``r + 2``, ``r + 4`` in the three ranges (the same
    parity as ``r``; ``r`` reaching the next range's first level gives that level's
    code). Sign bit of ``v`` or'ed in (``-0`` for a negative rounding to zero); the value
    ``+-r u`` times the stored scale, clamped by selects: the decode's formula on the
    table's entry, which ``r u`` is exactly. ``multiply``: the second argument is a
    reciprocal to multiply by, else a scale to divide by; the third (the code table)
    is unused."""

    def encode_fp4_rounded_values(
        blocks: torch.Tensor, s: torch.Tensor, codes: torch.Tensor, scale: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        v = blocks * s if multiply else blocks / s
        a = v.abs().clamp(max=6.0)
        a = torch.where(a > 0, a, 0.0)  # NaN as 0
        small = a < 2.0
        big = a >= 4.0
        r = torch.where(small, a * 2.0, torch.where(big, a * 0.5, a)).round()
        idx = r + torch.where(small, 0.0, torch.where(big, 4.0, 2.0))
        mag = torch.where(small, r * 0.5, torch.where(big, r * 2.0, r))
        negative = v.view(torch.int32) < 0
        code = idx.to(torch.int32) | (negative.to(torch.int32) << 3)
        value = torch.where(negative, -mag, mag) * scale
        return code.to(torch.uint8), clamp_finite_by_selects(value)

    return encode_fp4_rounded_values


def _sign_magnitude_encoder(
    sm: _SignMagnitude, multiply: bool, raw: bool = False
) -> Callable[..., torch.Tensor]:
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
        code = idx | (negative << sign_bit)
        return code if raw else code.to(torch.uint8)

    return encode_sign_magnitude


_ROUNDING_MIN_MAGNITUDES = 16
"""The float formats with at least this many magnitudes (FP6's 32) encode by rounding the
float's bits (``_minifloat_encoder``); fewer (FP4's 8) count midpoints, as fast there."""


def _minifloat_encoder(
    mf: _MiniFloat, sm: _SignMagnitude, multiply: bool, raw: bool = False
) -> Callable[..., torch.Tensor]:
    """The nearest-rounding encoder of a float codebook (FP6) by rounding ``|v|``'s
    float32 bits to the format's ``M`` mantissa bits, instead of ``2^(1 + E + M) - 1``
    midpoint compares: the same codes as ``_sign_magnitude_encoder`` (the nearest
    magnitude, a tie to the even code, which is IEEE's round to nearest even):

    - ``a = min(|v|, top)`` (``top`` the largest magnitude, so nothing rounds past it),
      taken on the float32 bits with the sign bit cleared, whose integer order is the
      float order;
    - ``a`` of at least the smallest normal ``2^(1 - bias)``: with ``b`` its float32 bits,
      ``(b + 2^(22 - M) - 1 + lsb) >> (23 - M)``, ``lsb`` the bit that becomes the last
      kept one, is ``e << M | m`` rounded to nearest even (a carry moves into the
      exponent, as it should), less ``(127 - bias) << M`` for the format's exponent;
    - below it, the subnormal code ``round(a / step)`` (half to even; ``a / step`` is
      exact, ``step = 2^(1 - bias - M)``, and ``2^M`` is the smallest normal's code);
    - NaN (which the count of midpoints below it makes 0) gives 0;
    - the sign bit of ``v`` or'ed in, as the sign-magnitude encoder does.
    FP6 4096 x 4096 in MX blocks, one thread: 106 -> ~45 ms."""
    return _float_bits_encoder(mf, sm.mags[-1], sm.sign, multiply, raw)


def _float_bits_encoder(
    mf: _MiniFloat, top_value: float, sign: int, multiply: bool, raw: bool, nan_code: int = 0
) -> Callable[..., torch.Tensor]:
    """``_minifloat_encoder``'s rounding of ``|v|``'s float32 bits, for a float format with
    the largest magnitude ``top_value`` and the sign bit ``sign``; a NaN ``v`` gets the
    magnitude code ``nan_code`` (FP6: 0, as no midpoint lies below it; FP8: ``0x7F``, the
    code torch's float8 cast gives a NaN), the sign bit of ``v`` or'ed in as for every
    other value."""
    shift = 23 - mf.man_bits
    # bit patterns as floats, so that Dynamo keeps them constants (ints become symbols)
    top = float(torch.tensor(top_value, dtype=torch.float32).view(torch.int32))
    smallest_normal = float(torch.tensor(2.0 ** (1 - mf.bias)).view(torch.int32))
    half = float((1 << (shift - 1)) - 1)
    rebias = float((127 - mf.bias) << mf.man_bits)
    per_step = 1.0 / mf.step
    sign_bit = sign.bit_length() - 1

    def encode_minifloat(
        blocks: torch.Tensor, s: torch.Tensor, codes: torch.Tensor | None = None
    ) -> torch.Tensor:
        v = blocks * s if multiply else blocks / s
        bits = v.view(torch.int32)  # the one bit cast (Inductor's goes through memory)
        # |v|'s bits: for non-negative floats the integer order is the float order, NaNs
        # above Inf
        mag = bits & 0x7FFFFFFF
        a = mag.clamp(max=int(top))
        lsb = (a >> shift) & 1
        normal = ((a + (lsb + int(half))) >> shift) - int(rebias)
        sub = (v.abs() * per_step).round().to(torch.int32)
        idx = torch.where(mag < int(smallest_normal), sub, normal)
        idx = torch.where(mag > 0x7F800000, nan_code, idx)  # NaN
        negative = (bits < 0).to(torch.int32)
        code = idx | (negative << sign_bit)
        return code if raw else code.to(torch.uint8)

    return encode_minifloat


@functools.cache
def fp8_rounding_encoder(fmt: Format, multiply: bool) -> Callable[..., torch.Tensor]:
    """FP8's (E4M3, E5M2) nearest-rounding encoder without the float8 cast: int32 codes
    of ``clamp(v, -M, M)`` (``v = blocks / s``, or ``blocks * s`` where ``multiply``; ``M``
    the format's largest finite value) by ``_minifloat_encoder``'s rounding of the float32
    bits to the format's mantissa, which is the cast's IEEE round to nearest even
    (subnormals, ``-0`` for a negative rounding to zero, and a NaN's ``0x7F | sign``
    included): ``_codebook_encoder``'s FP8 codes, as integers. Inductor converts float8
    lanes through a scalar loop; this is compares, shifts and selects, so the codes and
    their values fit in one pass (``_codebook_values_body``)."""
    if fmt not in _FLOAT8:
        raise ValueError(f"{fmt.value} is not an FP8 format")
    mf = _minifloat(fmt)
    if mf is None:
        raise ValueError(f"{fmt.value} codes are not a small float's bits")
    top = float(torch.finfo(_FLOAT8[fmt]).max)
    nan = torch.tensor([float("nan")]).to(_FLOAT8[fmt]).view(torch.uint8)
    return _float_bits_encoder(mf, top, mf.sign, multiply, True, int(nan) & (mf.sign - 1))


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


def _abs_sum_kernel(parts: torch.Tensor) -> torch.Tensor:
    """``sum |r|`` in float64 over the last dimension of ``parts`` (float32 ``[n, m, c]``):
    ``[n, m]`` partial sums of ``|r|`` (exact in float64), added in Inductor's order."""
    return parts.abs().to(torch.float64).sum(dim=-1)


def _beyond_kernel(blocks: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    return torch.stack([(blocks < lo).sum(), (blocks > hi).sum()])


def _bin_kernel(x: torch.Tensor, lo: torch.Tensor, per_unit: torch.Tensor, top: torch.Tensor):
    return torch.minimum(((x - lo) * per_unit).floor().clamp_min(0.0), top).to(torch.uint8)


_FLOAT8 = {Format.FP8_E4M3: torch.float8_e4m3fn, Format.FP8_E5M2: torch.float8_e5m2}
_ENCODE = {torch.int8: _encode_int8, torch.int16: _encode_int16}


def _encode_values_kernel(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: torch.Tensor,
    qmax: torch.Tensor,
    sd: torch.Tensor,
    zd: torch.Tensor,
    md: torch.Tensor,
    dtype: torch.dtype,
    convention: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``_encode_kernel``'s codes and, from the same float code ``q``, the values that the
    decode kernel of ``convention`` makes of them (``sd``, ``zd``, ``md``: the stored
    scale, zero point, offset): ``q + 0`` is ``float(int(q))`` (a rounded ``-0`` becomes
    the ``+0`` an integer converts to), then the decode's operations in its order."""
    q = _unrounded(blocks, s, z, m).round().clamp(qmin, qmax)
    f = q + 0.0
    if convention == "zero_point_offset":
        v = (f - zd.to(torch.float32)) * sd + md
    elif convention == "offset":
        v = f * sd + md
    elif convention == "zero_point":
        v = (f - zd.to(torch.float32)) * sd
    else:
        v = f * sd
    return q.to(dtype), v.clamp(-_F32_MAX, _F32_MAX)


def _encode_values_body(dtype: torch.dtype, convention: str):
    """``_encode_values_kernel`` for one code dtype and decode convention (a function of
    tensors only, as a kernel takes it)."""

    def encode_values(blocks, s, z, m, qmin, qmax, sd, zd, md):
        return _encode_values_kernel(blocks, s, z, m, qmin, qmax, sd, zd, md, dtype, convention)

    return encode_values


_ENCODE_VALUES = {
    (dtype, convention): _encode_values_body(dtype, convention)
    for dtype in (torch.int8,)
    for convention in ("scale", "zero_point", "offset", "zero_point_offset")
}
"""The nearest-rounding integer encoders that also give the dequantized values, by code
dtype and decode convention (``passes.encode_int_values``)."""
_ENCODE_STOCHASTIC = {torch.int8: _encode_stochastic_int8, torch.int16: _encode_stochastic_int16}
