"""Per-block quantization parameters: scales, zero points and float offsets, rounded to
their storage dtype (the formulas are in ``quantize``'s docstring). Eager on both paths:
``[n_blocks, 1]`` tensors, small next to the data."""

from __future__ import annotations

import torch

from ..config import Mode, QuantConfig, ScaleDtype, ZeroPoint
from ..ranges import BlockRange
from .codebooks import Codebook

__all__ = ["codebook_scale", "int_qparams", "round_half_even_"]

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


def round_half_even_(v: torch.Tensor) -> torch.Tensor:
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
    the bounds are integers, and keeps the rounding in ``round_half_even_``'s range."""
    return round_half_even_((qmin - lo / s).clamp_(qmin, qmax))


def _include_zero_point(lo: torch.Tensor, s: torch.Tensor, qmin: int, qmax: int) -> torch.Tensor:
    """``clamp(qmin - round(lo / s), qmin, qmax)`` (float), torchao's order of operations;
    ``round(lo/s)`` is clamped to ``[qmin - qmax, 0]`` first (the same result, as the bounds
    are integers), which keeps it in ``round_half_even_``'s range."""
    return qmin - round_half_even_((lo / s).clamp_(qmin - qmax, 0))


def int_qparams(
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


def codebook_scale(rng: BlockRange, cb: Codebook, cfg: QuantConfig) -> torch.Tensor:
    a = torch.maximum(rng.lo.abs(), rng.hi.abs())
    return _round_scale(_positive_scale(a / cb.max_abs, a > 0), cfg.scale_dtype)
