"""``quantize``: float tensor -> ``QuantizedTensor`` (codes + scales + zero points).

Linear (``Format.INT``), per block ``i`` with range ``[lo_i, hi_i]``, ``n = qmax - qmin``:

- symmetric: ``s = max(|lo|, |hi|) / qmax``, ``z = 0``;
  codes ``q = clamp(round(r / s), qmin, qmax)``, dequantized ``r_hat = s q``.
- asymmetric, by ``cfg.zero_point`` (see ``ZeroPoint``):

  - ``INCLUDE_ZERO`` (default): ``lo' = min(lo, 0)``, ``hi' = max(hi, 0)``,
    ``s = (hi' - lo') / n``, ``z = clamp(qmin - round(lo' / s), qmin, qmax)`` (the clamp
    never acts but for float slack), as torchao's ``choose_qparams_affine``;
    ``q = clamp(round(r / s + z), qmin, qmax)``, ``r_hat = s (q - z)``.
  - ``FLOAT_MIN``: ``s = (hi - lo) / n``, ``m = lo - s qmin`` (the value of code 0, in the
    scale dtype), ``z = 0``; ``q = clamp(round((r - m) / s), qmin, qmax)``,
    ``r_hat = s q + m``: levels ``m + s qmin = lo`` to ``m + s qmax = hi``.
  - ``COURSE_CLAMP``: ``s = (hi - lo) / n``, ``z = clamp(round(qmin - lo / s), qmin, qmax)``,
    and codes as under ``INCLUDE_ZERO``; a range without 0 pins ``z`` at an end.

A zero range (a constant block) is widened to include 0 (under ``FLOAT_MIN`` it gets
``s = 1`` and ``m = lo`` instead, so code 0 is the constant), and an all-zero block gets
``s = 1``, so constant tensors quantize without NaN/Inf and dequantize to themselves. A
nonzero range whose scale underflows float32 gets the smallest subnormal, ``2^-149``; a
range wider than float32's max gets ``s = hi/n - lo/n``, and a level beyond float32's range
saturates to ``+-max``, so every scale, level and dequantized value is finite. Scales, and
``m``, are rounded to ``cfg.scale_dtype`` (saturating at its largest finite value) before
the codes are computed from them, and ``z`` and ``m`` follow the rounded scale.

Codebook formats (NF4, FP4, FP8): ``s = max(|lo|, |hi|) / max|values|``; the code is that of
the value nearest to ``r / s``. FP4/FP8 send an exact midpoint to the even code, as IEEE
rounding (a native float8 cast) does. NF4 computes ``r * (1/s)`` and sends an exact midpoint
to the lower code, as bitsandbytes' ``quantize_4bit(..., quant_type="nf4")`` does, so its
codes equal bitsandbytes' everywhere bitsandbytes' are defined (a subnormal ``s``, whose
``1/s`` overflows, divides instead of turning ``0 * inf`` into NaN).

The passes over the data (each block's extremes, the integer codes, dequantization) run as
compiled kernels on CPU where ``quant_core.kernels`` allows, and as torch operators over
cache-sized pieces otherwise; both give the same bits (see ``kernels``). The per-block
arithmetic (scales, zero points, offsets) is the same eager code on both paths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from . import kernels
from .chunks import block_extremes, chunk_slices, for_each_piece, map_rows, scratch_buffer
from .config import Format, Mode, QuantConfig, Rounding, ScaleDtype, ZeroPoint
from .formats import Codebook, codebook_for
from .granularity import BlockLayout, layout_for
from .ranges import BlockRange, choose_range, symmetric_ends
from .validation import check_float_tensor, raise_nonfinite

__all__ = ["QuantizedTensor", "quantize"]

# Round half to even by an addition and a subtraction: for |v| <= 2^22, v + 1.5 * 2^23 lies
# where float32's spacing is exactly 1, so the addition rounds v to an integer, ties to even
# (the constant is even), and subtracting the constant is exact. Results are those of
# ``torch.round``.
_RNE_MAGIC = 1.5 * 2.0**23
# The smallest positive float32 (subnormal): the scale of a tiny range that underflows.
_MIN_SCALE = 2.0**-149
_F32_MAX = torch.finfo(torch.float32).max

_SCALE_TORCH_DTYPE = {
    ScaleDtype.FP32: torch.float32,
    ScaleDtype.FP16: torch.float16,
    ScaleDtype.BF16: torch.bfloat16,
}


@dataclass(frozen=True, eq=False)
class QuantizedTensor:
    """Codes, scales and zero points of one quantized tensor.

    Every linear block dequantizes as ``r_hat = s (q - z) + m``:

    - ``codes`` (``q``): same shape as the input; int8 (bits <= 8) or int16 in
      ``[qmin, qmax]`` for ``Format.INT``; uint8 codebook codes (NF4 index, FP4/FP8 bit
      pattern) otherwise.
    - ``scale`` (``s``, float32, holding values of ``config.scale_dtype``) and
      ``zero_point`` (``z``, int32; zeros when symmetric, under ``ZeroPoint.FLOAT_MIN`` and
      for codebooks) have ``layout.scale_shape``: ``[]`` per tensor, ``[C]`` per channel,
      ``shape[:-1] + [C/g]`` per group; ``.flatten()`` lists them block by block.
    - ``offset`` (``m``): the float zero point of ``ZeroPoint.FLOAT_MIN``, float32 (values
      of the scale dtype), ``layout.scale_shape``: the value code 0 dequantizes to, so a
      block's levels run from ``m + s qmin`` to ``m + s qmax``. ``None`` under every other
      scheme (``m = 0``); it must be given exactly when ``config.float_offset``.
      A zero point in another float convention converts to it: tinygemm's and torchao's
      float ``zero_point`` (codes ``u = q - qmin``, ``r_hat = (u - 2^(b-1)) s + zp``) is
      ``m`` itself; GGUF Q4_1's ``min`` (``r_hat = d u + min``) is ``m + s qmin``; HQQ's
      ``r_hat = s (u - z_f)`` with a float ``z_f`` is ``m = -s (qmin + z_f)``.
    - ``chosen_range``: the range each block's grid was fitted to (``[n_blocks, 1]`` each;
      the data's extremes under min-max, the clipping range under percentile/MSE, the
      caller's under ``quantize(..., ranges=)``; ``[-a, a]`` when symmetric), before the
      zero point convention widens it (``INCLUDE_ZERO``) or rounds and clamps ``z``;
      ``None`` when not known.
    """

    codes: torch.Tensor
    scale: torch.Tensor
    zero_point: torch.Tensor
    config: QuantConfig
    layout: BlockLayout
    input_dtype: torch.dtype
    chosen_range: BlockRange | None = None
    offset: torch.Tensor | None = None

    def __post_init__(self) -> None:
        wants = self.config.float_offset
        if wants and not isinstance(self.offset, torch.Tensor):
            raise ValueError(
                f"config {self.config.describe()!r} stores a float offset m per block: "
                "pass offset (float32, the scale's shape)"
            )
        if not wants and self.offset is not None:
            raise ValueError(
                f"config {self.config.describe()!r} has no float offset; offset must be None "
                "(use ZeroPoint.FLOAT_MIN for x_hat = s q + m)"
            )
        if self.offset is not None and tuple(self.offset.shape) != tuple(self.scale.shape):
            raise ValueError(
                f"offset shape {tuple(self.offset.shape)} differs from the scale's "
                f"{tuple(self.scale.shape)}"
            )

    @property
    def shape(self) -> torch.Size:
        return self.codes.shape

    @property
    def n_blocks(self) -> int:
        return self.layout.n_blocks

    def _scale_col(self) -> torch.Tensor:
        return self.scale.reshape(-1, 1)

    def _zp_col(self) -> torch.Tensor:
        return self.zero_point.reshape(-1, 1).to(torch.float32)

    def _offset_col(self) -> torch.Tensor | None:
        return None if self.offset is None else self.offset.reshape(-1, 1).to(torch.float32)

    def dequantize(self) -> torch.Tensor:
        """``r_hat = s (q - z) + m`` (linear; ``m`` only under ``ZeroPoint.FLOAT_MIN``) or
        ``s * value[q]`` (codebook): float32, input shape, saturated to float32's range.
        A compiled kernel where ``kernels`` allows, else torch operators over pieces."""
        codes = self.layout.to_blocks(self.codes)
        s = self._scale_col()
        if self.config.format is Format.INT:
            # int32 zero points subtract from float32 exactly (|z| <= 2^15)
            zp = self.zero_point.reshape(-1, 1) if self.config.has_zero_point else None
            m = self._offset_col()
            fast = kernels.decode_int(codes, s, zp if m is None else None, m)
        else:
            table = codebook_for(self.config.format, codes.device).decode_table
            fast = kernels.decode_codebook(codes, s, table)
        if fast is not None:
            return self.layout.from_blocks(fast)
        out = torch.empty(codes.shape, dtype=torch.float32, device=codes.device)
        if self.config.format is Format.INT:

            def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
                part = out[rows, cols]
                part.copy_(codes[rows, cols])
                if zp is not None and m is None:
                    part.sub_(zp[rows])
                part.mul_(s[rows])
                if m is not None:
                    part.add_(m[rows])
                part.clamp_(-_F32_MAX, _F32_MAX)

        else:

            def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
                part = torch.mul(table[codes[rows, cols].long()], s[rows], out=out[rows, cols])
                part.clamp_(-_F32_MAX, _F32_MAX)

        for_each_piece(chunk_slices(codes), work)
        return self.layout.from_blocks(out)

    def levels(self, block: int = 0) -> torch.Tensor:
        """Every value block ``block`` can dequantize to, ascending (float32, <= ``2^bits``)."""
        if not 0 <= block < self.n_blocks:
            raise ValueError(f"block {block} out of range: this tensor has {self.n_blocks} blocks")
        s = self.scale.reshape(-1)[block]
        if self.config.format is Format.INT:
            q = torch.arange(self.config.qmin, self.config.qmax + 1, device=s.device)
            z = self.zero_point.reshape(-1)[block]
            levels = (q - z).to(torch.float32) * s
            if self.offset is not None:
                levels = levels + self.offset.reshape(-1)[block]
            return levels.clamp_(-_F32_MAX, _F32_MAX)
        return (codebook_for(self.config.format, s.device).values * s).clamp_(-_F32_MAX, _F32_MAX)

    def representable_range(self) -> BlockRange:
        """Per block, the lowest and highest dequantized value, ``[n_blocks, 1]`` each."""
        cfg = self.config
        if cfg.format is Format.INT:
            m = self._offset_col()
            columns = [self._scale_col(), self._zp_col()] + ([] if m is None else [m])

            def ends(
                s: torch.Tensor, z: torch.Tensor, *m: torch.Tensor
            ) -> tuple[torch.Tensor, ...]:
                lo, hi = s * (cfg.qmin - z), s * (cfg.qmax - z)
                if m:
                    lo, hi = lo + m[0], hi + m[0]
                return lo.clamp_(-_F32_MAX, _F32_MAX), hi.clamp_(-_F32_MAX, _F32_MAX)

        else:
            values = codebook_for(cfg.format, self.scale.device).values
            columns = [self._scale_col()]

            def ends(s: torch.Tensor) -> tuple[torch.Tensor, ...]:
                lo, hi = s * values[0], s * values[-1]
                return lo.clamp_(-_F32_MAX, _F32_MAX), hi.clamp_(-_F32_MAX, _F32_MAX)

        # per-block columns in pieces below torch's parallel grain (see ``chunks``)
        lo, hi = map_rows(ends, *columns)
        return BlockRange(lo, hi)


def _round_scale(s: torch.Tensor, scale_dtype: ScaleDtype) -> torch.Tensor:
    """Round scales to their storage dtype, keeping them finite and positive."""
    if scale_dtype is ScaleDtype.FP32:
        return s
    dtype = _SCALE_TORCH_DTYPE[scale_dtype]
    info = torch.finfo(dtype)
    # The floor is the smallest subnormal (tiny * eps: 2^-24 for fp16), not the smallest
    # normal: clamping to 6.1e-5 would coarsen every fp16 block whose step is below it.
    return s.clamp(min=info.tiny * info.eps, max=info.max).to(dtype).to(torch.float32)


def _positive_scale(s: torch.Tensor, nonzero_range: torch.Tensor) -> torch.Tensor:
    """``s`` where positive; else ``2^-149`` for a nonzero range that underflowed, else 1."""
    fallback = torch.where(nonzero_range, _MIN_SCALE, 1.0).to(s.dtype)
    return torch.where(s > 0, s, fallback)


def _round_half_even_(v: torch.Tensor) -> torch.Tensor:
    """``torch.round`` in place, for ``|v| <= 2^22`` (see ``_RNE_MAGIC``)."""
    return v.add_(_RNE_MAGIC).sub_(_RNE_MAGIC)


def _round_offset(m: torch.Tensor, scale_dtype: ScaleDtype) -> torch.Tensor:
    """Round float offsets to the scale dtype, saturating at its largest finite value."""
    if scale_dtype is ScaleDtype.FP32:
        return m
    dtype = _SCALE_TORCH_DTYPE[scale_dtype]
    info = torch.finfo(dtype)
    return m.clamp(-info.max, info.max).to(dtype).to(torch.float32)


def _course_zero_point(lo: torch.Tensor, s: torch.Tensor, qmin: int, qmax: int) -> torch.Tensor:
    """``clamp(round(qmin - lo / s), qmin, qmax)`` (float); clamping first is the same, as
    the bounds are integers, and keeps the rounding in ``_round_half_even_``'s range."""
    return _round_half_even_((qmin - lo / s).clamp_(qmin, qmax))


def _include_zero_point(lo: torch.Tensor, s: torch.Tensor, qmin: int, qmax: int) -> torch.Tensor:
    """``clamp(qmin - round(lo / s), qmin, qmax)`` (float), torchao's order of operations;
    ``round(lo/s)`` is clamped to ``[qmin - qmax, 0]`` first (the same result, as the bounds
    are integers), which keeps it in ``_round_half_even_``'s range."""
    return qmin - _round_half_even_((lo / s).clamp_(qmin - qmax, 0))


def _int_qparams(
    rng: BlockRange, cfg: QuantConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scales, zero points and float offsets (float32 ``[n_blocks, 1]`` each) of blocks
    with ranges ``rng``; the offsets are zeros but under ``ZeroPoint.FLOAT_MIN``."""
    qmin, qmax = cfg.qmin, cfg.qmax
    if cfg.mode is Mode.SYMMETRIC:
        a = torch.maximum(rng.lo.abs(), rng.hi.abs())
        s = _round_scale(_positive_scale(a / qmax, a > 0), cfg.scale_dtype)
        return s, torch.zeros_like(s), torch.zeros_like(s)
    lo, hi = rng.lo, rng.hi
    convention = cfg.zero_point
    if convention is ZeroPoint.INCLUDE_ZERO:
        lo, hi = lo.clamp(max=0), hi.clamp(min=0)
    elif convention is ZeroPoint.COURSE_CLAMP:
        degenerate = hi <= lo
        lo = torch.where(degenerate, lo.clamp(max=0), lo)
        hi = torch.where(degenerate, hi.clamp(min=0), hi)
    n = qmax - qmin
    span = hi - lo
    # hi - lo overflows for ranges wider than float32's max; hi/n - lo/n does not.
    s = torch.where(torch.isfinite(span), span / n, hi / n - lo / n)
    s = _round_scale(_positive_scale(s, hi > lo), cfg.scale_dtype)
    if convention is ZeroPoint.FLOAT_MIN:
        # m = lo - s qmin puts code qmin on lo; s * 2^(b-1) is exact. m lies in [lo, hi],
        # but s * 2^(b-1) alone can overflow for ranges near float32's max: halve both
        # terms there (exact) and double the sum. A constant block (s = 1) puts code 0 on
        # the constant instead, so it dequantizes to itself.
        up = s * (-qmin)
        m = torch.where(torch.isfinite(up), lo + up, (lo / 2 + s * (-qmin / 2)) * 2)
        m = torch.where(hi > lo, m, lo)
        return s, torch.zeros_like(s), _round_offset(m, cfg.scale_dtype)
    if convention is ZeroPoint.INCLUDE_ZERO:
        return s, _include_zero_point(lo, s, qmin, qmax), torch.zeros_like(s)
    return s, _course_zero_point(lo, s, qmin, qmax), torch.zeros_like(s)


def _codebook_scale(rng: BlockRange, cb: Codebook, cfg: QuantConfig) -> torch.Tensor:
    a = torch.maximum(rng.lo.abs(), rng.hi.abs())
    return _round_scale(_positive_scale(a / cb.max_abs, a > 0), cfg.scale_dtype)


def _scaled_codes(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    cfg: QuantConfig,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``r / s + z``, or ``(r - m) / s`` under ``ZeroPoint.FLOAT_MIN``: codes before rounding."""
    if cfg.float_offset:
        v = torch.sub(blocks, m, out=out)
        return v.div_(s)
    v = torch.div(blocks, s, out=out)
    return v.add_(z) if cfg.mode is Mode.ASYMMETRIC else v


def _int_codes(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    cfg: QuantConfig,
    noise: torch.Tensor | None,
) -> torch.Tensor:
    """Float tensor of codes ``clamp(round(v))`` (``v`` of ``_scaled_codes``), or
    ``clamp(floor(v + u))`` with ``noise`` ``u`` (stochastic rounding), computed in place on
    one temporary."""
    v = _scaled_codes(blocks, s, z, m, cfg)
    if noise is not None:
        v.add_(noise).floor_()
    else:
        v.round_()
    return v.clamp_(cfg.qmin, cfg.qmax)


def _encode_int(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    cfg: QuantConfig,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Integer codes of ``blocks``: int8 for bits <= 8, else int16."""
    code_dtype = torch.int8 if cfg.bits <= 8 else torch.int16
    noise = None
    if cfg.rounding is Rounding.STOCHASTIC:
        # One draw over the whole tensor, so a seed gives the same codes at any size, and
        # the same on both paths (drawn once, before either runs).
        noise = torch.rand(
            blocks.shape, generator=generator, device=blocks.device, dtype=torch.float32
        )
    fast = kernels.encode_int(blocks, s, z, m, cfg.qmin, cfg.qmax, code_dtype, noise)
    if fast is not None:
        return fast
    if noise is not None:
        return _int_codes(blocks, s, z, m, cfg, noise).to(code_dtype)
    codes = torch.empty(blocks.shape, dtype=code_dtype, device=blocks.device)
    pieces = chunk_slices(blocks)
    if len(pieces) == 1:
        return codes.copy_(_int_codes(blocks, s, z, m, cfg, None))

    def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
        part = blocks[rows, cols]
        buf = scratch_buffer(scratch, "v", part, torch.float32)
        v = _scaled_codes(part, s[rows], z[rows], m[rows], cfg, out=buf)
        # clamp then round equals round then clamp: the bounds are integers.
        codes[rows, cols].copy_(_round_half_even_(v.clamp_(cfg.qmin, cfg.qmax)))

    for_each_piece(pieces, work)
    return codes


def _codebook_index(
    v: torch.Tensor, cb: Codebook, rounding: Rounding, generator: torch.Generator | None
) -> torch.Tensor:
    """Index into ``cb.values`` of the entry ``v`` rounds to (``v`` already scaled)."""
    values = cb.values
    v = v.clamp(values[0], values[-1]).contiguous()  # bucketize wants contiguous input
    if rounding is Rounding.STOCHASTIC:
        lower = (torch.bucketize(v, values, right=True) - 1).clamp_(0, len(values) - 2)
        lo_v, hi_v = values[lower], values[lower + 1]
        p_up = (v - lo_v) / (hi_v - lo_v)
        u = torch.rand(v.shape, generator=generator, device=v.device, dtype=v.dtype)
        return lower + (u < p_up).long()
    mids = (values[1:] + values[:-1]) / 2
    idx = torch.bucketize(v, mids)
    if cb.format is Format.NF4:
        return idx  # an exact tie goes to the lower entry, as in bitsandbytes
    # bucketize sends an exact tie to the lower entry; IEEE sends it to the even code.
    tie = v == mids[idx.clamp(max=len(mids) - 1)]
    if bool(tie.any()):
        odd = (cb.codes[idx] % 2 == 1) & tie
        idx = idx + odd.long()
    return idx


def _codebook_codes(
    v: torch.Tensor, cb: Codebook, rounding: Rounding, generator: torch.Generator | None
) -> torch.Tensor:
    """Codes (uint8) of scaled values ``v``; a negative ``v`` rounding to zero gets ``-0``."""
    idx = _codebook_index(v, cb, rounding, generator)
    codes = cb.codes[idx]
    if cb.neg_zero_code is not None:
        neg_zero = (idx == cb.zero_index) & torch.signbit(v)
        codes = torch.where(neg_zero, cb.neg_zero_code, codes).to(torch.uint8)
    return codes


def _codebook_scaled(blocks: torch.Tensor, s: torch.Tensor, cb: Codebook) -> torch.Tensor:
    """``r / s``, the value looked up in the codebook; NF4 multiplies by ``1/s`` instead, as
    bitsandbytes does (the two can differ by an ulp, which moves a value across a midpoint)."""
    if cb.format is Format.NF4:
        inv = s.reciprocal()
        overflow = torch.isinf(inv)
        if bool(overflow.any()):
            # A subnormal scale: 1/s overflows and r * inf is NaN at r = 0 (bitsandbytes'
            # result); dividing keeps those blocks' codes the nearest values.
            return torch.where(overflow, blocks / s, blocks * inv)
        return blocks * inv
    return blocks / s


def _encode_codebook(
    blocks: torch.Tensor,
    s: torch.Tensor,
    cb: Codebook,
    cfg: QuantConfig,
    generator: torch.Generator | None,
) -> torch.Tensor:
    if cfg.rounding is Rounding.STOCHASTIC:
        # One draw over the whole tensor, so a seed gives the same codes at any size.
        return _codebook_codes(_codebook_scaled(blocks, s, cb), cb, cfg.rounding, generator)
    fast = kernels.encode_codebook(blocks, s, cb)
    if fast is not None:
        return fast
    codes = torch.empty(blocks.shape, dtype=torch.uint8, device=blocks.device)

    def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
        v = _codebook_scaled(blocks[rows, cols], s[rows], cb)
        codes[rows, cols] = _codebook_codes(v, cb, cfg.rounding, None)

    for_each_piece(chunk_slices(blocks), work)
    return codes


def _all_finite_rows(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor]:
    return ((torch.isfinite(lo) & torch.isfinite(hi)).all().reshape(1),)


def _block_qparams(
    rng: BlockRange, cfg: QuantConfig, cb: Codebook | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scales (float32), zero points (int32) and offsets (float32, zeros unless
    ``ZeroPoint.FLOAT_MIN``) of blocks with ranges ``rng``."""
    if cb is None:
        s, z, m = _int_qparams(rng, cfg)
        return s, z.to(torch.int32), m
    s = _codebook_scale(rng, cb, cfg)
    return s, torch.zeros(s.shape, dtype=torch.int32, device=s.device), torch.zeros_like(s)


def _squared_error_fn(
    cfg: QuantConfig, cb: Codebook | None
) -> Callable[[torch.Tensor, BlockRange], torch.Tensor]:
    """``(blocks, range) -> (x - x_hat)^2``, ``x_hat`` quantized and dequantized with nearest
    rounding under ``range`` (saturated as ``dequantize`` does): the MSE range search's
    measure, one compiled pass where ``kernels`` allows."""
    nearest = replace(cfg, rounding=Rounding.NEAREST)

    def squared_error(blocks: torch.Tensor, rng: BlockRange) -> torch.Tensor:
        if cb is None:
            s, z, m = _int_qparams(rng, nearest)
            fast = kernels.int_squared_error(blocks, s, z, m, cfg.qmin, cfg.qmax)
            if fast is not None:
                return fast
            # m is 0 and z as stored under every convention but FLOAT_MIN, whose z is 0
            x_hat = _int_codes(blocks, s, z, m, nearest, None).sub_(z).mul_(s).add_(m)
        else:
            s = _codebook_scale(rng, cb, nearest)
            v = _codebook_scaled(blocks, s, cb)
            x_hat = cb.values[_codebook_index(v, cb, Rounding.NEAREST, None)] * s
        return (blocks - x_hat.clamp_(-_F32_MAX, _F32_MAX)).square_()

    return squared_error


def _given_ranges(ranges: object, n_blocks: int, mode: Mode, device: torch.device) -> BlockRange:
    """Check a caller's ``ranges`` and return them as float32 ``[n_blocks, 1]`` on ``device``
    (``[-a, a]`` with ``a = max(|lo|, |hi|)`` in symmetric mode, as ``choose_range`` gives)."""
    if not isinstance(ranges, BlockRange):
        raise TypeError(f"ranges must be a BlockRange, got {type(ranges).__name__}")
    ends = []
    for name, t in (("lo", ranges.lo), ("hi", ranges.hi)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"ranges.{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"ranges.{name} has dtype {t.dtype}; expected a float tensor")
        if tuple(t.shape) not in ((n_blocks, 1), (1, 1)):
            raise ValueError(
                f"ranges.{name} has shape {tuple(t.shape)}; expected [{n_blocks}, 1] (one "
                "row per block) or [1, 1] (one range for every block)"
            )
        t32 = t.detach().to(device=device, dtype=torch.float32)
        n_bad = int((~torch.isfinite(t32)).sum())
        if n_bad:
            raise ValueError(
                f"ranges.{name} holds {n_bad} value(s) that are not finite in float32 "
                f"(out of {t32.numel()})"
            )
        ends.append(t32.expand(n_blocks, 1))
    lo, hi = ends
    inverted = lo > hi
    if bool(inverted.any()):
        block = int(inverted.reshape(-1).nonzero()[0])
        raise ValueError(
            f"ranges has lo > hi in {int(inverted.sum())} block(s), first block {block}: "
            f"lo={float(lo[block]):.6g} > hi={float(hi[block]):.6g}"
        )
    if mode is Mode.SYMMETRIC:
        return BlockRange(*symmetric_ends(lo, hi))
    return BlockRange(lo.contiguous(), hi.contiguous())


def quantize(
    x: torch.Tensor,
    cfg: QuantConfig,
    generator: torch.Generator | None = None,
    *,
    range_mask: torch.Tensor | None = None,
    ranges: BlockRange | None = None,
) -> QuantizedTensor:
    """Quantize ``x`` (float16/bfloat16/float32/float64, 1-D or more, finite) under ``cfg``.

    Computation runs in float32 on ``x``'s device, detached from autograd. ``generator``
    drives stochastic rounding; without one, a generator seeded with ``cfg.seed`` is used,
    so results are reproducible. Raises ``TypeError``/``ValueError`` for bad input (see
    ``check_float_tensor``, ``layout_for``; a float64 value beyond float32's range is a
    ``ValueError`` too).

    The formulas are the module's. In asymmetric mode ``cfg.zero_point`` decides where a
    block's grid sits; the default, ``ZeroPoint.INCLUDE_ZERO``, widens each range to
    contain 0 (as torchao and PyTorch's observers do), ``FLOAT_MIN`` stores a float offset
    per block (``QuantizedTensor.offset``) and ``COURSE_CLAMP`` clamps the integer zero
    point as the course does. Example, 4 bits asymmetric, ``x = [0.7, 1.0, 1.3]``:
    include-zero fits ``[0, 1.3]`` (``s = 1.3/15``, ``z = -8``), float-min fits
    ``[0.7, 1.3]`` (``s = 0.04``, ``m = 1.02``), the course clamp gives ``z = -8`` on
    ``s = 0.04``, a grid ``[0, 0.6]`` on which every value saturates at 0.6.

    ``range_mask`` (bool, ``x``'s shape): only the cells it marks choose each block's range
    (min-max, percentile or MSE); the others are quantized under that range but influence
    no scale (for stand-ins of missing values). A block with no marked cell uses all.

    ``ranges`` (a ``BlockRange``, ``lo``/``hi`` float tensors of shape ``[n_blocks, 1]``, or
    ``[1, 1]`` for one range shared by every block, finite, ``lo <= hi``): every block's
    range is given instead of chosen from ``x`` (``cfg.range_method`` is then unused), and
    scales and zero points follow from it exactly as from a chosen range; symmetric and
    codebook formats use ``max(|lo|, |hi|)``. This applies a static (calibrated) range to
    new data, or one group's grid to one column of it. Values outside the range are clamped
    to its end codes (``clip_stats`` counts them). With ``range_mask`` it is a
    ``ValueError``: a given range leaves nothing for the mask to choose.
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    check_float_tensor(x, allow_nonfinite=True)
    layout = layout_for(x.shape, cfg.granularity)
    blocks = layout.to_blocks(x.detach().to(torch.float32))
    # One pass gives each block's extremes, the finiteness check (NaN propagates; an Inf,
    # or a float64 value beyond float32, is an extreme) and the min-max range.
    lo, hi = block_extremes(blocks)
    (finite,) = map_rows(_all_finite_rows, lo, hi)
    if not bool(finite.all()):
        raise_nonfinite(x)
    if cfg.rounding is Rounding.STOCHASTIC and generator is None:
        generator = torch.Generator(device=x.device).manual_seed(cfg.seed)

    cb = None if cfg.format is Format.INT else codebook_for(cfg.format, x.device)
    mask_blocks = None
    if range_mask is not None and ranges is not None:
        raise ValueError(
            "pass range_mask or ranges, not both: ranges fixes every block's range, so no "
            "cell is left to choose it"
        )
    if range_mask is not None:
        if not isinstance(range_mask, torch.Tensor) or range_mask.dtype != torch.bool:
            raise TypeError("range_mask must be a bool tensor")
        if tuple(range_mask.shape) != tuple(x.shape):
            raise ValueError(
                f"range_mask shape {tuple(range_mask.shape)} differs from x {tuple(x.shape)}"
            )
        mask_blocks = layout.to_blocks(range_mask.to(blocks.device))
    if ranges is not None:
        rng = _given_ranges(ranges, layout.n_blocks, cfg.mode, blocks.device)
    else:
        rng = choose_range(blocks, cfg, _squared_error_fn(cfg, cb), BlockRange(lo, hi), mask_blocks)
    s, z, m = map_rows(lambda lo, hi: _block_qparams(BlockRange(lo, hi), cfg, cb), rng.lo, rng.hi)
    if cb is None:
        codes = _encode_int(blocks, s, z, m, cfg, generator)
    else:
        codes = _encode_codebook(blocks, s, cb, cfg, generator)
    return QuantizedTensor(
        codes=layout.from_blocks(codes),
        scale=s.reshape(layout.scale_shape),
        zero_point=z.reshape(layout.scale_shape),
        config=cfg,
        layout=layout,
        input_dtype=x.dtype,
        chosen_range=rng,
        offset=m.reshape(layout.scale_shape) if cfg.float_offset else None,
    )
