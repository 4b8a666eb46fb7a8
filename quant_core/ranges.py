"""Range selection: which ``[lo, hi]`` each block's grid covers.

All functions take blocks ``[n_blocks, block_len]`` (float32) and return ``lo, hi`` of
shape ``[n_blocks, 1]``. In symmetric mode the range is ``[-a, a]``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import kernels
from .chunks import block_extremes, map_rows
from .config import Mode, QuantConfig, RangeMethod

__all__ = ["BlockRange", "choose_range", "symmetric_ends"]

# MSE search: a coarse grid of clipping ratios, then a fine grid around the best.
_COARSE_ALPHAS = tuple(i / 20 for i in range(20, 0, -1))  # 1.00, 0.95, ..., 0.05
_FINE_STEPS = 10
# 1 - 0.95 is 0.05000000000000004 in floating point: without slack, the 5th percentile of
# 200 values would be rank ceil(10.000000000000009) = 11 instead of 10.
_RANK_SLACK = 1e-9


@dataclass(frozen=True)
class BlockRange:
    """The range chosen for each block, ``lo`` and ``hi`` of shape ``[n_blocks, 1]``."""

    lo: torch.Tensor
    hi: torch.Tensor


def symmetric_ends(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(-a, a)`` with ``a = max(|lo|, |hi|)``: the symmetric range covering ``[lo, hi]``."""
    # max|r| = max(max r, -min r) exactly; abs_: an all-zero block gives +0, not -0.
    a = torch.maximum(hi, lo.neg()).abs_()
    return -a, a


def _minmax(blocks: torch.Tensor, mode: Mode, extremes: BlockRange | None) -> BlockRange:
    lo, hi = block_extremes(blocks) if extremes is None else (extremes.lo, extremes.hi)
    if mode is Mode.SYMMETRIC:
        return BlockRange(*map_rows(symmetric_ends, lo, hi))
    return BlockRange(lo, hi)


def _kth(values: torch.Tensor, fraction: float) -> torch.Tensor:
    """Per-row order statistic at ``fraction`` of the way (1-based rank ``ceil(f * L)``)."""
    length = values.shape[1]
    k = min(length, max(1, math.ceil(fraction * length - _RANK_SLACK)))
    return values.kthvalue(k, dim=1, keepdim=True).values


def _percentile(blocks: torch.Tensor, mode: Mode, percentile: float) -> BlockRange:
    p = percentile / 100.0
    if mode is Mode.SYMMETRIC:
        a = _kth(blocks.abs(), p)
        return BlockRange(-a, a)
    return BlockRange(_kth(blocks, 1.0 - p), _kth(blocks, p))


def _masked_minmax(blocks: torch.Tensor, mode: Mode, mask: torch.Tensor) -> BlockRange:
    """Extremes over the cells ``mask`` keeps (a block with none keeps all its cells)."""
    keep = mask | ~mask.any(dim=1, keepdim=True)
    inf = torch.tensor(math.inf, dtype=blocks.dtype, device=blocks.device)
    lo = torch.where(keep, blocks, inf).amin(dim=1, keepdim=True)
    hi = torch.where(keep, blocks, -inf).amax(dim=1, keepdim=True)
    if mode is Mode.SYMMETRIC:
        return BlockRange(*symmetric_ends(lo, hi))
    return BlockRange(lo, hi)


def _masked_kth(values: torch.Tensor, keep: torch.Tensor, fraction: float) -> torch.Tensor:
    """``_kth`` over each row's kept cells: rank ``ceil(f * n_i)`` of its ``n_i`` cells."""
    n = keep.sum(dim=1, keepdim=True)
    inf = torch.tensor(math.inf, dtype=values.dtype, device=values.device)
    ordered = torch.where(keep, values, inf).sort(dim=1).values
    k = torch.ceil(fraction * n.to(torch.float64) - _RANK_SLACK).to(torch.int64).clamp(min=1)
    k = torch.minimum(k, n)
    return ordered.gather(1, k - 1)


def _masked_percentile(
    blocks: torch.Tensor, mode: Mode, percentile: float, mask: torch.Tensor
) -> BlockRange:
    p = percentile / 100.0
    keep = mask | ~mask.any(dim=1, keepdim=True)
    if mode is Mode.SYMMETRIC:
        a = _masked_kth(blocks.abs(), keep, p)
        return BlockRange(-a, a)
    return BlockRange(_masked_kth(blocks, keep, 1.0 - p), _masked_kth(blocks, keep, p))


def _absmean(blocks: torch.Tensor, mask: torch.Tensor | None = None) -> BlockRange:
    """``[-a, a]`` with ``a = mean|r|`` over each block's kept cells (all without a mask),
    summed in float64 so the mean does not depend on the block's length. Without a mask,
    ``kernels.absmean`` gives the same float in one compiled pass where it can prove it
    (see there), without the float64 copy below."""
    if mask is None:
        fast = kernels.absmean(blocks)
        if fast is not None:
            return BlockRange(-fast, fast)
    # |r| in float64 by one conversion and an in-place abs: the same float64 tensor as
    # abs then conversion (both exact), so the same sum in the same order, without the
    # float32 intermediate (4096 x 4096 per tensor: ~3 copies' time -> ~1.2)
    mags = blocks.to(torch.float64, copy=True).abs_()
    if mask is None:
        a = mags.mean(dim=1, keepdim=True)
    else:
        keep = mask | ~mask.any(dim=1, keepdim=True)
        a = (mags * keep).sum(dim=1, keepdim=True) / keep.sum(dim=1, keepdim=True)
    a = a.to(blocks.dtype)
    return BlockRange(-a, a)


def _mse_search(
    blocks: torch.Tensor,
    base: BlockRange,
    squared_error: Callable[[torch.Tensor, BlockRange], torch.Tensor],
    mask: torch.Tensor | None = None,
) -> BlockRange:
    """Per block, the ratio ``alpha`` minimising ``mean((x - fq(x; alpha*range))^2)`` over
    the cells ``mask`` keeps (all cells without a mask). The means are eager torch
    reductions on every backend: their order of summation decides near-ties between
    candidates, so the chosen ranges are the same bits everywhere."""
    weight = None
    if mask is not None:
        keep = mask | ~mask.any(dim=1, keepdim=True)
        weight = keep.to(blocks.dtype) / keep.sum(dim=1, keepdim=True)

    def errors(alphas: torch.Tensor) -> torch.Tensor:
        # alphas: [n_blocks, n_candidates] -> errors of the same shape
        out = torch.empty_like(alphas)
        for j in range(alphas.shape[1]):
            a = alphas[:, j : j + 1]
            sq = squared_error(blocks, BlockRange(base.lo * a, base.hi * a))
            out[:, j] = sq.mean(dim=1) if weight is None else (sq * weight).sum(dim=1)
        return out

    n = blocks.shape[0]
    coarse = torch.tensor(_COARSE_ALPHAS, device=blocks.device).expand(n, -1)
    err = errors(coarse)
    best = coarse.gather(1, err.argmin(dim=1, keepdim=True))
    step = 1.0 / 20
    offsets = torch.linspace(-step, step, _FINE_STEPS + 2, device=blocks.device)[1:-1]
    fine = (best + offsets).clamp(min=0.01, max=1.0)
    candidates = torch.cat([best, fine], dim=1)
    err = errors(candidates)
    alpha = candidates.gather(1, err.argmin(dim=1, keepdim=True))
    return BlockRange(base.lo * alpha, base.hi * alpha)


def choose_range(
    blocks: torch.Tensor,
    cfg: QuantConfig,
    squared_error: Callable[[torch.Tensor, BlockRange], torch.Tensor],
    extremes: BlockRange | None = None,
    mask: torch.Tensor | None = None,
) -> BlockRange:
    """The range of each block under ``cfg.range_method``.

    ``squared_error(blocks, range) -> (x - x_hat)^2`` (``blocks``' shape), ``x_hat``
    quantized and dequantized with nearest rounding under ``range``; the MSE search calls it
    once per candidate ratio (30 candidates). ``extremes``: each
    block's min and max when the caller has them already. ``mask`` (bool, like ``blocks``):
    only the cells it keeps choose the range (a block with none keeps all).
    """
    if mask is not None:
        if cfg.range_method is RangeMethod.MINMAX:
            return _masked_minmax(blocks, cfg.mode, mask)
        if cfg.range_method is RangeMethod.PERCENTILE:
            return _masked_percentile(blocks, cfg.mode, float(cfg.percentile), mask)
        if cfg.range_method is RangeMethod.MSE:
            base = _masked_minmax(blocks, cfg.mode, mask)
            return _mse_search(blocks, base, squared_error, mask)
        if cfg.range_method is RangeMethod.ABSMEAN:
            return _absmean(blocks, mask)
    if cfg.range_method is RangeMethod.ABSMEAN:
        return _absmean(blocks)
    if cfg.range_method is RangeMethod.MINMAX:
        return _minmax(blocks, cfg.mode, extremes)
    if cfg.range_method is RangeMethod.PERCENTILE:
        return _percentile(blocks, cfg.mode, float(cfg.percentile))
    if cfg.range_method is RangeMethod.MSE:
        return _mse_search(blocks, _minmax(blocks, cfg.mode, extremes), squared_error)
    raise ValueError(f"unknown range method {cfg.range_method!r}")
