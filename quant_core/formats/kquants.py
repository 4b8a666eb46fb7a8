"""llama.cpp's K-quant and IQ4 quantizers (``ggml-quants.c``), bit for bit, vectorized.

Each type's quantizer is llama.cpp's C reference, the one ``llama-quantize`` runs without an
importance matrix (``ggml_quantize_chunk`` -> ``quantize_q4_K`` -> ``quantize_row_q4_K_ref``;
``quantize_iq4_nl`` / ``quantize_iq4_xs``), with the same float32 operations in the same
order, so that the codes, block integers and fp16 super-block scales, and so the bytes, are
llama.cpp's. The C code loops over one (super-)block at a time; here every loop over
(super-)blocks is a tensor dimension, and what the C code sums in order over a block's 16
or 32 values is summed in that order (``_ordered_sum``: one addition per position, across
all blocks at once), never with ``torch.sum``, whose order differs.

Per super-block of 256 values (``d``, ``dmin``: fp16, IEEE round to nearest even as
``GGML_FP32_TO_FP16``):

- Q2_K, 16 blocks of 16: each block's scale and min from ``make_qkx2_quants`` (weights
  ``|x|``, mean absolute error, 16 trial scales ``(-0.5 + 0.1 k + 3) / (max - min)``);
  ``d = max scale / 15``, ``sc = nearest(15 scale / max scale)`` (4 bits), the same for the
  mins; codes ``u = clamp(nearest((x + dmin m) / (d sc)), 0, 3)``;
  ``x_hat = d sc u - dmin m``.
- Q4_K / Q5_K, 8 blocks of 32: ``make_qkx2_quants`` with weights ``rms(x) + |x|``, squared
  error, 21 (16) trials from ``-1`` (``-0.5``) in steps of 0.1; 6-bit ``sc`` and ``m``
  against ``max / 63``; ``u`` in ``0..15`` (``0..31``).
- Q3_K, 16 blocks of 16: ``make_q3_quants`` (``l = nearest(-4 x / max)`` in ``-4..3``, then
  five passes of coordinate descent on the weighted (``x^2``) least-squares scale), ``d =
  -max scale / 32`` (the signed scale of largest magnitude), ``sc`` in ``-32..31``,
  ``q = clamp(nearest(x / (d sc)), -4, 3)``; ``x_hat = d sc q``.
- Q6_K, 16 blocks of 16: ``make_qx_quants`` (rmse_type 1: weights ``x^2``, 18 trial scales
  ``-(32 + 0.1 k) / max``), ``d = -max scale / 128``, int8 ``sc``,
  ``q = clamp(nearest(x / (d sc)), -32, 31)``; ``x_hat = d sc q``.
- IQ4_XS, 8 blocks of 32: each block's scale by ``quantize_row_iq4_nl_impl`` (weights
  ``x^2``, 16 trials ``id = (k - 127) / max``, ``k = -7..7``, levels by ``best_index_int8``:
  the nearest of ``IQ4_NL_VALUES``, a tie going up), ``d = -max scale / 32``, ``l`` in
  ``-32..31``, codes the nearest levels to ``x / (d l)`` (in float32, before ``d`` is
  rounded to fp16); ``x_hat = d l v[q]``.
- IQ4_NL, one block of 32: as one IQ4_XS block, ``d`` itself stored; codes the nearest
  levels to ``x / d``.

``nearest`` is llama.cpp's ``nearest_int`` (``v + 1.5 * 2^23`` read as an integer: half to
even for ``|v| < 2^22``, and its own value beyond); a block whose stored scale ``d sc`` is 0
keeps the codes of its scale search, as the C code does (``if (!d) continue``).

The lab's representation (``llama_cpp``'s): stored codes ``u`` -> ``q = u + qmin`` with
``z = qmin`` and offset ``-(dmin m)`` for the min types (``x_hat = s (q - qmin) + m``),
signed ``q`` for Q3_K and Q6_K, indices into ``IQ4_NL_VALUES`` for IQ4; per block
``scale = d sc`` (exact in float32: 11 by at most 8 significant bits); ``StoredScales``
holds ``sc`` (signed for Q3_K, Q6_K, IQ4_XS), ``m``, and ``d``, ``dmin`` per super-block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..config import Format, QuantConfig, SuperBlockScales
from ..granularity import BlockLayout
from ..kernels import encode_values_with, switch
from .codebooks import IQ4_NL_VALUES, codebook_for
from .kquant_bytes import _k4_scales, _unk4_scales
from .scales import BlockParams, StoredScales, super_block_shape

__all__ = ["SUPER_BLOCKS_PER_PIECE", "quantize_blocks"]

SUPER_BLOCKS_PER_PIECE = 2048
"""Super-blocks (IQ4_NL blocks: 8 per unit) quantized together: 512K values, so that the
searches' ``[positions, blocks]`` temporaries (2 MiB each) stay near the cache."""

_QK_K = 256
_MAGIC = 12582912.0  # 1.5 * 2^23, nearest_int's constant
_GROUP_MAX_EPS = float(np.float32(1e-15))  # GROUP_MAX_EPS (1e-15f), exactly


def _f32(v: float) -> float:
    """The float32 value of the C ``float`` expression's result ``v`` (a Python float)."""
    return float(np.float32(v))


def _nearest_int(v: torch.Tensor) -> torch.Tensor:
    """llama.cpp's ``nearest_int`` of float32 ``v``, int32: the bits of ``v + 12582912.f``,
    ``(i & 0x7fffff) - 0x400000``; round half to even for ``|v| <= 4194303``."""
    return ((v + _MAGIC).view(torch.int32) & 0x7FFFFF) - 0x400000


def _nearest_clamped(v: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    """``MAX(lo, MIN(hi, nearest_int(v)))`` as float32 (exact small integers)."""
    return _nearest_int(v).clamp_(lo, hi).to(torch.float32)


def _ordered_sum(terms: torch.Tensor, from_zero: bool = True, dim: int = 0) -> torch.Tensor:
    """``terms`` summed over axis ``dim`` (a block's positions: the first axis of ``[n,
    B]``, the middle one of tiles ``[B/8, n, 8]``) in C's order: ``((0 + t0) + t1) + ...``
    (``from_zero``), or ``(t0 + t1) + ...`` where the C loop starts from ``t0``."""
    rows = terms.unbind(dim)
    acc = rows[0] + 0.0 if from_zero else rows[0].clone()
    for t in rows[1:]:
        acc.add_(t)
    return acc


def _const_div(c: float, t: torch.Tensor) -> torch.Tensor:
    """``c / t`` in float32 (``c`` a float32 value). ``c / t`` on a tensor multiplies by
    its reciprocal, and a scalar divisor may be one on some devices: a full tensor is not."""
    return torch.div(torch.full_like(t, c), t)


def _div_const(t: torch.Tensor, c: float) -> torch.Tensor:
    """``t / c`` in float32 by true division (``c`` a float32 value)."""
    return torch.div(t, torch.full_like(t, c))


def _sqrtf(v: torch.Tensor) -> torch.Tensor:
    """C's ``sqrtf``, correctly rounded. torch's float32 ``sqrt`` on CPU is not (its vector
    code is off by one unit in the last place for about one value in six); the float64
    square root of a float32 value rounds to the correctly rounded float32 one (53 >= 2 *
    24 + 2 bits), even from a float64 result one unit off."""
    return v.to(torch.float64).sqrt_().to(torch.float32)


def _fp16(v: torch.Tensor) -> torch.Tensor:
    """``GGML_FP16_TO_FP32(GGML_FP32_TO_FP16(v))``: IEEE round to nearest even, overflow to
    infinity, as torch's cast."""
    return v.to(torch.float16).to(torch.float32)


def _first_absmax(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """C's ``if (fabsf(v) > amax) { amax = fabsf(v); max = v; }`` from ``amax = max = 0``
    along ``dim``: ``(amax, max)``, ``max`` the first value of largest magnitude (a NaN never
    wins; all zero gives ``+0``)."""
    a = x.abs()
    a = torch.where(a > 0, a, torch.zeros_like(a))
    idx = a.argmax(dim=dim, keepdim=True)
    amax = a.gather(dim, idx).squeeze(dim)
    mx = torch.where(amax > 0, x.gather(dim, idx).squeeze(dim), torch.zeros_like(amax))
    return amax, mx


def _running_max(v: torch.Tensor, dim: int) -> torch.Tensor:
    """C's ``if (v > m) m = v;`` from ``m = 0``: the largest positive value, else 0."""
    return torch.where(v > 0, v, torch.zeros_like(v)).amax(dim=dim)


def _positions(x: torch.Tensor, n: int) -> torch.Tensor:
    """``[units, ...]`` values -> ``[n, blocks]``: position ``i`` of every block of ``n`` in
    row ``i``, so that C's loops over a block's positions are loops over rows."""
    return x.reshape(-1, n).t().contiguous()


# ---------------------------------------------------------------------------------------
# The scale searches (ggml-quants.c), on [n, B]: n positions of B blocks.
#
# Each search is a few passes over the blocks (kernels: plain torch functions of tensors
# only, compiled by ``quant_core.kernels`` where it allows, with the same bits; eager
# otherwise) and a selection among their per-block results, done eagerly on [B] tensors.


def _kernel(fn: Callable[..., Any], *args: torch.Tensor) -> Any:
    """``fn(*args)``: compiled where ``quant_core.kernels`` runs compiled passes (CPU, the
    compiled backend, ``args[0]`` large enough), else eagerly; the same bits either way
    (Inductor keeps the order of the operations and contracts none into an FMA)."""
    return switch.compiled_or(fn, "kquants", *args)


def _squared_or_absolute(diff: torch.Tensor, use_mad: bool) -> torch.Tensor:
    return diff.abs() if use_mad else diff * diff


# make_qkx2_quants runs on one of two layouts of the same blocks. Eagerly, ``[n, B]``:
# position ``i`` of every block in row ``i``, one torch operation over all positions at
# once. Compiled, tiles ``[B/8, n, 8]``: 8 consecutive blocks' ``n`` positions together
# (``_tiles``), and every operation written per position (``x[:, i]``, ``[B/8, 8]``), so
# that Inductor makes one loop over the tiles that keeps each tile's values in cache; on
# ``[n, B]`` its loops stream ``2 n`` rows at once and store each trial's ``[n, B]`` codes
# (4096 x 4096 Q4_K: 2.2 ms a trial per 512K values, against 0.55 ms on tiles). Both
# layouts do the same float32 operations in the same order: the same bits.

_TILE = 8  # blocks per tile: a super-block's 8 (Q4_K, Q5_K) or 16 (Q2_K) blocks divide by it


def _tiles(v: torch.Tensor) -> torch.Tensor:
    """``[n, B]`` -> tiles ``[B/8, n, 8]`` (``t[k, i, j] = v[i, 8k + j]``), contiguous."""
    n = v.shape[0]
    return v.reshape(n, -1, _TILE).permute(1, 0, 2).contiguous()


def _on_tiles(x: torch.Tensor) -> bool:
    """Whether a search over ``x`` (``[n, B]``) runs compiled on tiles: where
    ``quant_core.kernels`` runs compiled passes and ``B`` fills whole tiles (always, but for
    the per-super-block scales' own searches)."""
    return x.shape[1] % _TILE == 0 and switch.runs_compiled(x)


def _across(v: torch.Tensor, dim: int) -> torch.Tensor:
    """A per-block value (``[B]``, or ``[B/8, 8]`` on tiles) shaped to broadcast over the
    positions' axis ``dim``."""
    return v if dim == 0 else v.unsqueeze(dim)


def _qkx2_start(
    x: torch.Tensor, w: torch.Tensor, nmax: torch.Tensor, use_mad: bool, dim: int = 0
) -> tuple[torch.Tensor, ...]:
    """``make_qkx2_quants`` up to its trials: ``(max, min, flat, sum_w, sum_x, best_error,
    scale, iscale)`` (min clamped to ``<= 0``; ``flat``: ``max == min``, the C code's early
    return), the positions on axis ``dim`` of ``x`` and ``w``. Extremes by a chain of
    ``minimum``/``maximum`` (a zero extreme's sign, which may differ from the C code's,
    changes no code, scale or min it stores)."""
    rows = x.unbind(dim)
    mn, mx = rows[0], rows[0]
    for row in rows[1:]:
        mn = torch.minimum(mn, row)
        mx = torch.maximum(mx, row)
    sum_w = _ordered_sum(w, False, dim)
    sum_x = _ordered_sum(w * x, False, dim)
    mn = torch.where(mn > 0, 0.0, mn)
    flat = mx == mn
    iscale = nmax / torch.where(flat, 1.0, mx - mn)
    scale = iscale.reciprocal()
    v = _across(iscale, dim) * (x - _across(mn, dim))
    codes = _nearest_int(v).clamp(min=0).to(torch.float32).clamp(max=nmax)
    diff = _across(scale, dim) * codes + _across(mn, dim) - x
    best = _ordered_sum(w * _squared_or_absolute(diff, use_mad), True, dim)
    return mx, mn, flat, sum_w, sum_x, best, scale, iscale


def _q2_k_start(x: torch.Tensor, nmax: torch.Tensor, dim: int = 0) -> tuple[torch.Tensor, ...]:
    """Q2_K's weights ``|x|`` and ``_qkx2_start`` (absolute errors): ``(w, *start)``."""
    w = x.abs()
    return (w, *_qkx2_start(x, w, nmax, True, dim))


def _q45_k_start(x: torch.Tensor, nmax: torch.Tensor, dim: int = 0) -> tuple[torch.Tensor, ...]:
    """Q4_K's and Q5_K's weights ``sqrtf(sum x^2 / 32) + |x|`` and ``_qkx2_start``
    (squared errors): ``(w, *start)``."""
    av_x = _sqrtf(_div_const(_ordered_sum(x * x, True, dim), 32.0))
    w = _across(av_x, dim) + x.abs()
    return (w, *_qkx2_start(x, w, nmax, False, dim))


def _weighted_start(
    x: torch.Tensor, w: torch.Tensor, nmax: torch.Tensor, dim: int = 0
) -> tuple[torch.Tensor, ...]:
    """``make_qkx3_quants``' start with the importance weights ``w`` (squared errors):
    ``(w, *start)``."""
    return (w, *_qkx2_start(x, w, nmax, False, dim))


def _q2_k_start_tiles(x: torch.Tensor, nmax: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return _q2_k_start(x, nmax, 1)


def _q45_k_start_tiles(x: torch.Tensor, nmax: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return _q45_k_start(x, nmax, 1)


def _weighted_start_tiles(
    x: torch.Tensor, w: torch.Tensor, nmax: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    return _weighted_start(x, w, nmax, 1)


@dataclass(frozen=True)
class _Start:
    """A search's start (``_q2_k_start``, ``_q45_k_start``, ``_weighted_start``) on ``[n,
    B]`` and on tiles."""

    rows: Callable[..., tuple[torch.Tensor, ...]]
    tiles: Callable[..., tuple[torch.Tensor, ...]]


_Q2_K_START = _Start(_q2_k_start, _q2_k_start_tiles)
_Q45_K_START = _Start(_q45_k_start, _q45_k_start_tiles)
_WEIGHTED_START = _Start(_weighted_start, _weighted_start_tiles)


def _qkx2_fit(
    sum_w: torch.Tensor, sum_x: torch.Tensor, sum_l: torch.Tensor, sum_l2: torch.Tensor,
    sum_xl: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A trial's weighted least-squares fit of ``x ~ scale l + min`` from its sums:
    ``(valid, scale, min)`` (``valid``: ``det > 0``; a positive min is clamped to 0 and the
    scale refitted alone, ``sum_xl / sum_l2``)."""
    det = sum_w * sum_l2 - sum_l * sum_l
    valid = det > 0
    safe = torch.where(valid, det, 1.0)
    this_scale = (sum_w * sum_xl - sum_x * sum_l) / safe
    this_min = (sum_l2 * sum_x - sum_l * sum_xl) / safe
    positive = this_min > 0
    this_min = torch.where(positive, 0.0, this_min)
    this_scale = torch.where(positive, sum_xl / sum_l2, this_scale)
    return valid, this_scale, this_min


def _qkx2_keep(
    better: torch.Tensor, cur: torch.Tensor, this_scale: torch.Tensor, iscale: torch.Tensor,
    mn: torch.Tensor, this_min: torch.Tensor, best: torch.Tensor, scale: torch.Tensor,
    best_iscale: torch.Tensor, best_min: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """The search's state after a trial: ``(best, scale, best_iscale, best_min, min)``, the
    trial's where it is ``better``."""
    return (
        torch.where(better, cur, best),
        torch.where(better, this_scale, scale),
        torch.where(better, iscale, best_iscale),
        torch.where(better, mn, best_min),
        torch.where(better, this_min, mn),
    )


def _qkx2_trial(
    x: torch.Tensor,
    w: torch.Tensor,
    mx: torch.Tensor,
    mn: torch.Tensor,
    flat: torch.Tensor,
    sum_w: torch.Tensor,
    sum_x: torch.Tensor,
    best: torch.Tensor,
    scale: torch.Tensor,
    best_iscale: torch.Tensor,
    best_min: torch.Tensor,
    factor: torch.Tensor,
    nmax: torch.Tensor,
    use_mad: bool,
    per_position: bool = False,
) -> tuple[torch.Tensor, ...]:
    """One trial of ``make_qkx2_quants`` on ``[n, B]`` (``per_position``: on tiles ``[B/8,
    n, 8]``, one position at a time, per-block values ``[B/8, 8]``; the same operations in
    the same order): ``iscale = factor / (max - min)`` (``min`` as left by the trials
    before), the codes' weighted least-squares scale and min, and, where its error is
    strictly below ``best``, the new ``(best, scale, best_iscale, best_min, min)``:
    ``best_iscale`` and ``best_min`` give the best codes back (``clamp(nearest(best_iscale
    (x - best_min)), 0, nmax)``)."""
    iscale = factor / torch.where(flat, 1.0, mx - mn)

    def levels(v: torch.Tensor) -> torch.Tensor:
        return _nearest_int(iscale * (v - mn)).clamp(min=0).to(torch.float32).clamp(max=nmax)

    if per_position:
        xs, ws = x.unbind(1), w.unbind(1)
        lvs = []
        sum_l = sum_l2 = sum_xl = torch.zeros_like(mn)
        for xi, wi in zip(xs, ws, strict=True):
            lv = levels(xi)
            lvs.append(lv)
            wl = wi * lv
            sum_l, sum_l2, sum_xl = sum_l + wl, sum_l2 + wl * lv, sum_xl + wl * xi
        valid, this_scale, this_min = _qkx2_fit(sum_w, sum_x, sum_l, sum_l2, sum_xl)
        cur = torch.zeros_like(mn)
        for xi, wi, lv in zip(xs, ws, lvs, strict=True):
            cur = cur + wi * _squared_or_absolute(this_scale * lv + this_min - xi, use_mad)
    else:
        lv = levels(x)
        wl = w * lv
        valid, this_scale, this_min = _qkx2_fit(
            sum_w, sum_x, _ordered_sum(wl), _ordered_sum(wl * lv), _ordered_sum(wl * x)
        )
        cur = _ordered_sum(w * _squared_or_absolute(this_scale * lv + this_min - x, use_mad))
    better = valid & (cur < best) & ~flat
    return _qkx2_keep(
        better, cur, this_scale, iscale, mn, this_min, best, scale, best_iscale, best_min
    )


def _qkx2_trial_sq(*args):  # type: ignore[no-untyped-def]
    return _qkx2_trial(*args, False)


def _qkx2_trial_mad(*args):  # type: ignore[no-untyped-def]
    return _qkx2_trial(*args, True)


def _qkx2_trial_tiles_sq(*args):  # type: ignore[no-untyped-def]
    return _qkx2_trial(*args, False, True)


def _qkx2_trial_tiles_mad(*args):  # type: ignore[no-untyped-def]
    return _qkx2_trial(*args, True, True)


@dataclass(frozen=True)
class _MinSearch:
    """``make_qkx2_quants``' result per block (``[B]``): ``scale``, ``the_min`` (``-min >=
    0``), and what gives its codes back: ``codes(x, nmax)``."""

    scale: torch.Tensor
    the_min: torch.Tensor
    iscale: torch.Tensor
    code_min: torch.Tensor
    flat: torch.Tensor

    def codes(self, x: torch.Tensor, nmax: int, rows: torch.Tensor) -> torch.Tensor:
        """The codes (int32 ``[len(rows), n]``) of blocks ``rows`` of ``x`` (``[n, B]``)."""
        xs = x[:, rows]
        u = _nearest_int(self.iscale[rows] * (xs - self.code_min[rows])).clamp_(0, nmax)
        return torch.where(self.flat[rows], 0, u).t()


def _qkx2_factors(nmax: int, rmin: float, rdelta: float, nstep: int) -> list[float]:
    """The trials' ``rmin + rdelta k + nmax``, ``k = 0..nstep``, in float32 as the C code."""
    return [
        float(np.float32(rmin) + np.float32(rdelta) * np.float32(k) + np.float32(nmax))
        for k in range(nstep + 1)
    ]


def _qkx2_on_tiles(
    start: _Start,
    x: torch.Tensor,
    nmax: int,
    factors: list[float],
    use_mad: bool,
    weights: tuple[torch.Tensor, ...],
) -> _MinSearch | None:
    """``_make_qkx2_quants`` compiled, on tiles (``None`` where a pass cannot compile: then
    the whole search runs on ``[n, B]``)."""
    nmax_t = torch.tensor(float(nmax), device=x.device)
    trial = _qkx2_trial_tiles_mad if use_mad else _qkx2_trial_tiles_sq
    xt = _tiles(x)
    out = switch.try_compiled(start.tiles, "kquants", xt, *map(_tiles, weights), nmax_t)
    if out is None:
        return None
    w, mx, mn, flat, sum_w, sum_x, best, scale, iscale = out
    code_min = mn
    for factor in factors:
        factor_t = torch.tensor(factor, device=x.device)
        out = switch.try_compiled(
            trial, "kquants", xt, w, mx, mn, flat, sum_w, sum_x, best, scale, iscale,
            code_min, factor_t, nmax_t,
        )
        if out is None:
            return None
        best, scale, iscale, code_min, mn = out
    scale = torch.where(flat, 0.0, scale)
    return _MinSearch(*(v.reshape(-1) for v in (scale, -mn, iscale, code_min, flat)))


def _make_qkx2_quants(
    start: _Start,
    x: torch.Tensor,
    nmax: int,
    rmin: float,
    rdelta: float,
    nstep: int,
    use_mad: bool,
    *weights: torch.Tensor,
) -> _MinSearch:
    """``make_qkx2_quants(n, nmax, x, weights, L, &the_min, Laux, rmin, rdelta, nstep,
    use_mad)`` (and ``make_qkx3_quants``, the same with given weights) for ``x`` ``[n, B]``,
    the weights from ``start`` (``_Q2_K_START``, ``_Q45_K_START``; ``_WEIGHTED_START`` of
    the ``weights`` given): codes ``clamp(nearest(iscale (x - min)), 0, nmax)`` for ``iscale =
    nmax / (max - min)`` and the trials ``(rmin + rdelta k + nmax) / (max - min)``, ``k =
    0..nstep``; each trial's weighted least-squares scale and min (min clamped to ``<= 0``)
    replaces the best so far when its weighted error (squared, or absolute with
    ``use_mad``) is strictly smaller, and the next trials use its min. Compiled on tiles
    where ``quant_core.kernels`` runs compiled passes, else eagerly on ``[n, B]``."""
    factors = _qkx2_factors(nmax, rmin, rdelta, nstep)
    if _on_tiles(x):
        found = _qkx2_on_tiles(start, x, nmax, factors, use_mad, weights)
        if found is not None:
            return found
    nmax_t = torch.tensor(float(nmax), device=x.device)
    trial = _qkx2_trial_mad if use_mad else _qkx2_trial_sq
    w, mx, mn, flat, sum_w, sum_x, best, scale, iscale = start.rows(x, *weights, nmax_t)
    code_min = mn
    for factor in factors:
        factor_t = torch.tensor(factor, device=x.device)
        best, scale, iscale, code_min, mn = trial(
            x, w, mx, mn, flat, sum_w, sum_x, best, scale, iscale, code_min, factor_t, nmax_t,
        )
    scale = torch.where(flat, 0.0, scale)
    return _MinSearch(scale, -mn, iscale, code_min, flat)


def _qx_sums(
    x: torch.Tensor, w: torch.Tensor, iscale: torch.Tensor, nmax: torch.Tensor, dim: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each trial ``t`` (``iscale`` ``[T, B]``, or ``[T, B/8, 8]`` on tiles): ``sumlx =
    sum (w x) l`` and ``suml2 = sum (w l) l`` in order over the positions (axis ``dim`` of
    ``x``, ``w``), ``l = clamp(nearest(iscale x), -nmax, nmax - 1)``."""
    sumlx = torch.zeros_like(iscale)
    suml2 = torch.zeros_like(iscale)
    for xi, wi in zip(x.unbind(dim), w.unbind(dim), strict=True):
        lv = _nearest_int(iscale * xi).clamp(min=-nmax).to(torch.float32).clamp(max=nmax - 1)
        sumlx = sumlx + (wi * xi) * lv
        suml2 = suml2 + (wi * lv) * lv
    return sumlx, suml2


def _qx_sums_tiles(*args):  # type: ignore[no-untyped-def]
    return _qx_sums(*args, 1)


def _qx_pick(
    sumlx: torch.Tensor, suml2: torch.Tensor, iscales: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``make_qx_quants``' choice among its trials (``[T, B]`` sums, trial 0 the start):
    ``(scale, iscale)``; a trial replaces the best when ``sumlx^2 > best suml2``."""
    scale = torch.where(suml2[0] != 0, sumlx[0] / torch.where(suml2[0] != 0, suml2[0], 1.0), 0.0)
    best = scale * sumlx[0]
    iscale = iscales[0]
    for t in range(1, sumlx.shape[0]):
        better = (suml2[t] > 0) & (sumlx[t] * sumlx[t] > best * suml2[t])
        scale = torch.where(better, sumlx[t] / suml2[t], scale)
        best = torch.where(better, scale * sumlx[t], best)
        iscale = torch.where(better, iscales[t], iscale)
    return scale, iscale


@dataclass(frozen=True)
class _SignedSearch:
    """A symmetric scale search's result per block: the signed ``scale`` (``[B]``) and the
    codes as the C code leaves them (``l + nmax``; 0 for an all-zero block), given back by
    ``codes``."""

    scale: torch.Tensor
    zero_block: torch.Tensor
    iscale: torch.Tensor | None = None
    levels: torch.Tensor | None = None

    def codes(self, x: torch.Tensor, nmax: int, rows: torch.Tensor) -> torch.Tensor:
        """The codes (int32 ``[len(rows), n]``) of blocks ``rows`` of ``x`` (``[n, B]``)."""
        if self.levels is not None:
            lv = self.levels[:, rows].to(torch.int32)
        else:
            assert self.iscale is not None
            lv = _nearest_int(self.iscale[rows] * x[:, rows]).clamp_(-nmax, nmax - 1)
        return torch.where(self.zero_block[rows], 0, lv + nmax).t()


def _first_absmax_pass(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``_first_absmax(x, 0)`` as the C loop runs it, one row at a time (a kernel: an
    ``argmax`` along the strided first axis cost as much as IQ4_NL's whole search)."""
    amax = torch.zeros_like(x[0])
    mx = torch.zeros_like(x[0])
    for row in x:
        a = row.abs()
        better = a > amax
        amax = torch.where(better, a, amax)
        mx = torch.where(better, row, mx)
    return amax, mx


def _first_absmax_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(zero_block, max, safe max)`` of ``x`` ``[n, B]``: amax below ``GROUP_MAX_EPS``,
    the first value of largest magnitude, and it with 1 for zero blocks."""
    amax, mx = _kernel(_first_absmax_pass, x)
    zero_block = amax < _GROUP_MAX_EPS
    return zero_block, mx, torch.where(zero_block, 1.0, mx)


def _make_qx_quants(x: torch.Tensor, nmax: int, w: torch.Tensor | None = None) -> _SignedSearch:
    """``make_qx_quants(n, nmax, x, L, rmse_type=1, qw)`` for ``x`` ``[n, B]``, weights
    ``qw`` (``w``) or ``x^2``: codes ``clamp(nearest(iscale x), -nmax, nmax - 1)`` at
    ``iscale = -nmax / max`` and the trials ``-(nmax + 0.1 k) / max`` (``k = -9..9``, not
    0); a trial's least-squares scale replaces the best when ``sumlx^2 > best suml2``.
    The trials are independent but for that choice: one pass computes all of them."""
    zero_block, _, mx = _first_absmax_rows(x)
    if w is None:
        w = x * x
    factors = [np.float32(-nmax)] + [
        -(np.float32(nmax) + np.float32(0.1) * np.float32(k)) for k in range(-9, 10) if k
    ]
    f = torch.tensor([float(v) for v in factors], device=x.device).unsqueeze(1)
    iscales = f / mx  # [T, B], one true division each
    nmax_t = torch.tensor(float(nmax), device=x.device)
    sums = None
    if _on_tiles(x):
        per_trial = iscales.reshape(len(factors), -1, _TILE)
        sums = switch.try_compiled(
            _qx_sums_tiles, "kquants", _tiles(x), _tiles(w), per_trial, nmax_t
        )
    if sums is None:
        sumlx, suml2 = _qx_sums(x, w, iscales, nmax_t)
    else:
        sumlx, suml2 = (v.reshape(len(factors), -1) for v in sums)
    scale, iscale = _kernel(_qx_pick, sumlx, suml2, iscales)
    return _SignedSearch(torch.where(zero_block, 0.0, scale), zero_block, iscale=iscale)


def _q3_pass(
    x: torch.Tensor,
    w: torch.Tensor,
    codes: torch.Tensor,
    sumlx: torch.Tensor,
    suml2: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """One pass of ``make_q3_quants``' coordinate descent over the positions in order:
    ``(codes, sumlx, suml2, changed)``."""
    rows = []
    changed = torch.zeros_like(sumlx, dtype=torch.bool)
    for i in range(x.shape[0]):
        li = codes[i]
        wx = w[i] * x[i]
        slx = sumlx - wx * li
        sl2 = suml2 - (w[i] * li) * li
        new_l = _nearest_int((x[i] * sl2) / slx).clamp(min=-4).to(torch.float32).clamp(max=3)
        slx_new = slx + wx * new_l
        sl2_new = sl2 + (w[i] * new_l) * new_l
        accept = (
            (slx > 0)
            & (new_l != li)
            & (sl2_new > 0)
            & ((slx_new * slx_new) * suml2 > (sumlx * sumlx) * sl2_new)
        )
        rows.append(torch.where(accept, new_l, li))
        sumlx = torch.where(accept, slx_new, sumlx)
        suml2 = torch.where(accept, sl2_new, suml2)
        changed = changed | accept
    return torch.stack(rows), sumlx, suml2, changed


def _make_q3_quants(x: torch.Tensor) -> _SignedSearch:
    """``make_q3_quants(16, 4, x, L, do_rmse=true)`` for ``x`` ``[16, B]``: codes
    ``clamp(nearest(-4 x / max), -4, 3)``, then up to five passes over the positions, each
    replacing one code by the one its leave-one-out least-squares scale (weights ``x^2``)
    suggests when that raises ``sumlx^2 / suml2``. A pass that changes nothing changes
    nothing when repeated, so every block runs the passes until none changes anywhere."""
    zero_block, _, mx = _first_absmax_rows(x)
    codes = _nearest_clamped(_const_div(-4.0, mx) * x, -4, 3)
    w = x * x
    sumlx = _ordered_sum((w * x) * codes)
    suml2 = _ordered_sum((w * codes) * codes)
    for _ in range(5):
        codes, sumlx, suml2, changed = _kernel(_q3_pass, x, w, codes, sumlx, suml2)
        if not bool(changed.any()):
            break
    scale = torch.where(suml2 > 0, sumlx / torch.where(suml2 > 0, suml2, 1.0), 0.0)
    return _SignedSearch(torch.where(zero_block, 0.0, scale), zero_block, levels=codes)


def _make_qp_quants(
    x: torch.Tensor, nmax: int, w: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``make_qp_quants(n, nmax, x, L, quant_weights)`` for the non-negative block scales
    (or mins) ``x`` ``[n, S]`` of S super-blocks, weights ``w``: ``(scale [S], L [n, S]
    int32)``. The best of ``iscale = (nmax + 0.1 k) / max``, ``k = -4..4``, by weighted
    squared error (``l = min(nmax, nearest(iscale x))``), then up to five passes of
    coordinate descent on ``sumlx^2 / suml2``; the least-squares scale. Small (``[n, S]``),
    so eager."""
    mx = torch.zeros_like(x[0])
    for row in x:
        mx = torch.where(mx > row, mx, row)  # MAX(max, x[i])
    zero = mx < _GROUP_MAX_EPS
    mx = torch.where(zero, 1.0, mx)
    wx = w * x

    def mse(iscale: torch.Tensor, lv: torch.Tensor) -> torch.Tensor:
        diff = x - iscale.reciprocal() * lv
        return _ordered_sum((w * diff) * diff)

    iscale = _const_div(float(nmax), mx)
    best = mse(iscale, _nearest_int(iscale * x).to(torch.float32))
    for k in range(-4, 5):
        if k == 0:
            continue
        factor = np.float32(0.1) * np.float32(k) + np.float32(nmax)
        trial = _const_div(float(factor), mx)
        err = mse(trial, _nearest_int(trial * x).clamp_(max=nmax).to(torch.float32))
        better = err < best
        best = torch.where(better, err, best)
        iscale = torch.where(better, trial, iscale)
    rows = list(_nearest_int(iscale * x).clamp_(max=nmax).to(torch.float32).unbind(0))
    sumlx = _ordered_sum(wx * torch.stack(rows))
    suml2 = _ordered_sum((w * torch.stack(rows)) * torch.stack(rows))
    for _ in range(5):
        changed = torch.zeros_like(zero)
        for i, li in enumerate(rows):
            slx = sumlx - wx[i] * li
            sl2 = suml2 - (w[i] * li) * li
            new_l = _nearest_int((x[i] * sl2) / slx).clamp_(max=nmax).to(torch.float32)
            slx_new = slx + wx[i] * new_l
            sl2_new = sl2 + (w[i] * new_l) * new_l
            accept = (
                (slx > 0)
                & (sl2 > 0)
                & (new_l != li)
                & ((slx_new * slx_new) * suml2 > (sumlx * sumlx) * sl2_new)
            )
            rows[i] = torch.where(accept, new_l, li)
            sumlx = torch.where(accept, slx_new, sumlx)
            suml2 = torch.where(accept, sl2_new, suml2)
            changed |= accept
        if not bool(changed.any()):
            break
    scale = torch.where(suml2 > 0, sumlx / torch.where(suml2 > 0, suml2, 1.0), 0.0)
    levels = torch.stack(rows).to(torch.int32)
    return torch.where(zero, 0.0, scale), torch.where(zero, 0, levels)


def _sigma2(x: torch.Tensor, factor: float) -> torch.Tensor:
    """``factor * sum x^2`` over each super-block of ``x`` ``[S, L]`` (in order; ``factor``
    a power of two, so the C code's ``2*sum/QK_K`` and ``sum *= 2.f/n`` alike)."""
    return _ordered_sum((x * x).t()) * factor


def _importance_weights(
    x: torch.Tensor, xs: torch.Tensor, qw: torch.Tensor, n: int, factor: float
) -> torch.Tensor:
    """llama.cpp's ``qw[i] * sqrtf(sigma2 + x[i]^2)`` in positions layout ``[n, B]``, with
    ``sigma2 = factor * sum x^2`` over each super-block of ``x`` ``[S, L]``."""
    sigma2 = _sigma2(x, factor).repeat_interleave(x.shape[1] // n)
    return _positions(qw, n) * _sqrtf(sigma2 + xs * xs)


_IQ4_NTRY = 7  # quantize_iq4_nl / quantize_iq4_xs (what llama-quantize runs)


def _iq4_nearest(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``best_index_int8(16, kvalues_iq4nl, a)`` elementwise: ``(index, level)`` (float32)
    of the level nearest to ``a`` (float32 differences), a tie going to the upper level; 0
    and 15 at and beyond the ends. The bracketing levels ``v[mu - 1] <= a < v[mu]`` (``mu``
    in ``1..15``) by a chain of comparisons with the constant levels, not ``bucketize``
    (which Inductor runs as one ATen call per use: IQ4_NL quantized at 0.3 M values/s)."""
    v = [float(c) for c in IQ4_NL_VALUES]
    lo = torch.full_like(a, v[0])
    hi = torch.full_like(a, v[1])
    below = torch.zeros_like(a)  # mu - 1
    for k in range(1, len(v) - 1):
        ge = a >= v[k]
        lo = torch.where(ge, v[k], lo)
        hi = torch.where(ge, v[k + 1], hi)
        below = torch.where(ge, float(k), below)
    lower = (a - lo) < (hi - a)
    return torch.where(lower, below, below + 1.0), torch.where(lower, lo, hi)


def _iq4_scaled_codes(x: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """``best_index_int8(inv x)`` (uint8) of blocks ``x`` ``[B, 32]``, ``inv`` ``[B, 1]``
    (a kernel): the codes in the blocks' own layout, as stored, in one pass."""
    return _iq4_nearest(inv * x)[0].to(torch.uint8)


def _iq4_code_numbers(x: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """``_iq4_scaled_codes`` as int32: the encoder of ``quantize_blocks``' one pass for
    IQ4's codes and values (``kernels.encode_values_with``)."""
    return _iq4_nearest(inv * x)[0].to(torch.int32)


_IQ4_MIDS = tuple(
    (IQ4_NL_VALUES[k] + IQ4_NL_VALUES[k + 1]) / 2 for k in range(len(IQ4_NL_VALUES) - 1)
)
"""The midpoints between neighbouring IQ4_NL levels: half-integers, exact in float32."""


def _iq4_trial_levels(
    x: torch.Tensor, first: torch.Tensor, lo_id: torch.Tensor, hi_id: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per value of ``x`` ``[B, 32]`` (one ``first``, ``lo_id``, ``hi_id`` per block,
    ``[B, 1]``: the first trial's ``id`` and the trials ``k = -7`` and ``k = 7``), what
    ``_iq4_trial_sums``
    needs to pick the level of every trial without a search:

    - ``q0``, the first trial's level ``best_index_int8(first x)``;
    - ``lvl``, ``nxt``, ``mid``: the level at ``a = min(lo_id x, hi_id x)``, the next level
      up and the midpoint between them (``inf`` above the top level).

    ``best_index_int8(a)`` is ``v[#{k: a >= mid_k}]``: the C code compares the float32
    differences ``a - v[mu-1] < v[mu] - a``; near a midpoint both are exact (multiples
    of ``a``'s last bit below ``2^24`` of them: ``|a - v| < 8`` at the midpoints -4.5
    and 7, where ``4 <= |a| < 8``, and ``<= 12`` at the others, where ``|a| >= 8``), and
    further away rounding cannot make them equal or reorder them, so the compare is
    ``a < mid`` exactly, a tie going up (``test_iq4_trial_levels``).

    For the trials ``id_k = (k - 127) / max``, ``k = -7..7``: ``id_k`` and ``id_k x`` are
    monotone in ``k`` (correctly rounded quotients and products of one ``max`` and one
    ``x``), so every trial's ``a_k`` lies between the two ends, whose ratio is ``120 /
    134`` (same sign); no two midpoints lie that close (the closest ratio of two
    same-signed ones is ``93.5 / 115.5``), so across the trials the level moves by at
    most one step: ``a_k >= mid`` picks ``nxt``, else ``lvl``. About 64 operations per
    value here and 8 per trial there, instead of ~70 per trial for a 14-compare bracket
    search."""
    v = [float(c) for c in IQ4_NL_VALUES]
    a = first * x
    q0 = torch.full_like(x, v[0])
    for k, mid in enumerate(_IQ4_MIDS):
        q0 = torch.where(a >= mid, v[k + 1], q0)
    lowest = torch.minimum(lo_id * x, hi_id * x)
    lvl = torch.full_like(x, v[0])
    nxt = torch.full_like(x, v[1])
    mid_up = torch.full_like(x, _IQ4_MIDS[0])
    top = len(_IQ4_MIDS) - 1
    for k, mid in enumerate(_IQ4_MIDS):
        ge = lowest >= mid
        lvl = torch.where(ge, v[k + 1], lvl)
        nxt = torch.where(ge, v[min(k + 2, top + 1)], nxt)
        mid_up = torch.where(ge, _IQ4_MIDS[k + 1] if k < top else float("inf"), mid_up)
    return q0, lvl, nxt, mid_up


def _iq4_trial_sums(
    x: torch.Tensor,
    w: torch.Tensor,
    q0: torch.Tensor,
    lvl: torch.Tensor,
    nxt: torch.Tensor,
    mid_up: torch.Tensor,
    inv_t: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """For each block and trial (``inv_t`` ``[B, 16]``: the first trial's ``id``, then
    ``k = -7..7``): ``sumqx = sum (w q) x``, ``sumq2 = sum (w q) q`` over the 32 positions
    in order (``[B, 16]``), ``q`` the first trial's ``q0``, else ``nxt`` where ``id x >=
    mid_up`` and ``lvl`` otherwise (``_iq4_trial_levels``: the level ``best_index_int8``
    picks). Every input per value is ``[B, 32]``, blocks by positions, and the sums blocks
    by trials: a block's 32 values of each input are read from one place, and its 16 sums
    stay in registers."""
    first = torch.arange(inv_t.shape[1], device=inv_t.device) == 0
    sumqx = torch.zeros_like(inv_t)
    sumq2 = torch.zeros_like(inv_t)
    for i in range(x.shape[1]):
        xi = x[:, i : i + 1]
        up = inv_t * xi >= mid_up[:, i : i + 1]
        q = torch.where(up, nxt[:, i : i + 1], lvl[:, i : i + 1])
        q = torch.where(first, q0[:, i : i + 1], q)
        wq = w[:, i : i + 1] * q
        sumqx = sumqx + wq * xi
        sumq2 = sumq2 + wq * q
    return sumqx, sumq2


def _iq4_block_scales(x: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """The block scale of ``quantize_row_iq4_nl_impl`` (``ntry = 7``) for blocks ``x``
    ``[B, 32]``, weights ``w`` (positions by blocks, ``[32, B]``; ``x^2`` where ``None``):
    0 for an all-zero block (amax below 1e-15), else the weighted least-squares scale of
    the levels at ``id = 127 / max`` and then of the trials ``id = (k - 127) / max``,
    ``k = -7..7``, each replacing the best when ``sumqx^2 > best sumq2``. Two passes
    compute every trial's sums (the levels' brackets, then the sums:
    ``_iq4_trial_levels``), both reading each block's values together."""
    x = x.contiguous()
    zero_block, _, mx = _first_absmax_rows(x.t())  # the C loop's order: along positions
    first = _div_const(-mx, float(IQ4_NL_VALUES[0])).reciprocal()
    ks = torch.tensor(
        [float(k + IQ4_NL_VALUES[0]) for k in range(-_IQ4_NTRY, _IQ4_NTRY + 1)],
        device=x.device,
    ).unsqueeze(1)
    inv = torch.cat([first.unsqueeze(0), ks / mx])  # [16, B], true divisions
    xb = x
    wb = xb * xb if w is None else w.t().contiguous()
    inv_t = inv.t().contiguous()
    levels = _kernel(_iq4_trial_levels, xb, inv_t[:, :1], inv_t[:, 1:2], inv_t[:, -1:])
    sumqx, sumq2 = _kernel(_iq4_trial_sums, xb, wb, *levels, inv_t)
    # trials by blocks for the choice: each trial's sums contiguous, so it vectorizes
    picked = _kernel(_iq4_pick, sumqx.t().contiguous(), sumq2.t().contiguous())
    return torch.where(zero_block, 0.0, picked)


def _iq4_pick(sumqx: torch.Tensor, sumq2: torch.Tensor) -> torch.Tensor:
    """The C code's choice among the trials' sums (``[T, B]``, the first trial first):
    ``d = sumqx / sumq2`` of the first (0 where ``sumq2 <= 0``), then each trial's where
    ``sumq2 > 0`` and ``sumqx^2 > best sumq2``, ``best = d sumqx``; ``[B]``."""
    qx, q2 = sumqx[0], sumq2[0]
    d = torch.where(q2 > 0, qx / torch.where(q2 > 0, q2, 1.0), 0.0)
    best = d * qx
    for t in range(1, sumqx.shape[0]):
        qx, q2 = sumqx[t], sumq2[t]
        better = (q2 > 0) & (qx * qx > best * q2)
        d = torch.where(better, qx / q2, d)
        best = torch.where(better, d * qx, best)
    return d


def _safe_inverse(d: torch.Tensor) -> torch.Tensor:
    """C's ``d ? 1/d : 0``."""
    nonzero = d != 0
    return torch.where(nonzero, torch.where(nonzero, d, 1.0).reciprocal(), 0.0)


# ---------------------------------------------------------------------------------------
# The types, on a piece of super-blocks x [S, 256] (IQ4_NL: [S, 32]).


@dataclass(frozen=True)
class _Piece:
    """One piece's result as llama.cpp stores it: codes ``u`` (int32 ``[S, 256]``: the
    stored level, ``0..2^b - 1``; IQ4: index, uint8), block integers ``sc`` (int32 ``[S, nb]``,
    signed value for Q3_K, Q6_K, IQ4_XS; ``None`` for IQ4_NL) and ``m`` (``None`` but for
    the min types), ``d`` and ``dmin`` (float32 ``[S]``, fp16 values; ``dmin`` as ``m``)."""

    u: torch.Tensor | None
    sc: torch.Tensor | None
    m: torch.Tensor | None
    d: torch.Tensor
    dmin: torch.Tensor | None
    inv: torch.Tensor | None = None
    block_scale: torch.Tensor | None = None
    """IQ4 asked for values (``defer``): ``u`` is ``None``, the codes are left to one pass
    over every block after the pieces (``quantize_blocks``), with each block's ``inv``
    (the reciprocal the codes multiply by) and ``block_scale`` (the stored scale: ``d``,
    times ``l`` for IQ4_XS), both float32 ``[S * unit / 32, 1]``; else ``None``."""


def _keep_search_codes(
    u: torch.Tensor, dl: torch.Tensor, search: _MinSearch | _SignedSearch, xs: torch.Tensor,
    nmax: int,
) -> torch.Tensor:
    """``u`` (int32 ``[B, n]``) with the search's codes in the blocks whose ``d sc`` is 0
    (the C code's ``if (!d) continue``), computed for those blocks alone (few)."""
    rows = torch.nonzero(dl.reshape(-1) == 0).reshape(-1)
    if len(rows):
        u[rows] = search.codes(xs, nmax, rows)
    return u


def _min_codes(xb: torch.Tensor, dl: torch.Tensor, ml: torch.Tensor, top: torch.Tensor):  # type: ignore[no-untyped-def]
    """``clamp(nearest((x + ml) / dl), 0, top)`` (int32) of blocks ``xb`` ``[B, n]``."""
    u = _nearest_int((xb + ml) / torch.where(dl != 0, dl, 1.0))
    return u.clamp(min=0).clamp(max=top.to(torch.int32))


def _requantize_min(
    x: torch.Tensor, xs: torch.Tensor, search: _MinSearch, sc: torch.Tensor, m: torch.Tensor,
    d: torch.Tensor, dmin: torch.Tensor, top: int,
) -> torch.Tensor:
    """The min types' final codes ``[S, 256]``: ``clamp(nearest((x + dmin m) / (d sc)), 0,
    top)``, or the search's codes where ``d sc == 0``."""
    n = xs.shape[0]
    dl = (d.unsqueeze(1) * sc.to(torch.float32)).reshape(-1, 1)
    ml = (dmin.unsqueeze(1) * m.to(torch.float32)).reshape(-1, 1)
    top_t = torch.tensor(float(top), device=x.device)
    u = _kernel(_min_codes, x.reshape(-1, n), dl, ml, top_t)
    return _keep_search_codes(u, dl, search, xs, top).reshape(x.shape)


def _transposed(v: torch.Tensor, per: int) -> torch.Tensor:
    """Per-block values ``[B]`` -> ``[per, S]``: block ``j`` of every super-block in row
    ``j`` (the layout ``_make_qp_quants`` / ``_make_qx_quants`` take)."""
    return v.reshape(-1, per).t().contiguous()


def _q2_k(x: torch.Tensor, qw: torch.Tensor | None) -> _Piece:
    """``quantize_row_q2_K_ref``; with importance ``qw``, ``quantize_row_q2_K_impl``."""
    xs = _positions(x, 16)
    if qw is None:
        search = _make_qkx2_quants(_Q2_K_START, xs, 3, -0.5, 0.1, 15, True)
        scales = search.scale.reshape(-1, 16)
        mins = search.the_min.reshape(-1, 16)
        max_scale = _running_max(scales, 1).unsqueeze(1)
        max_min = _running_max(mins, 1).unsqueeze(1)
        has_scale = max_scale > 0
        has_min = max_min > 0
        q4 = _f32(15.0)
        ls = _nearest_int(_const_div(q4, torch.where(has_scale, max_scale, 1.0)) * scales)
        lm = _nearest_int(_const_div(q4, torch.where(has_min, max_min, 1.0)) * mins)
        ls = torch.where(has_scale, ls, 0)
        lm = torch.where(has_min, lm, 0)
        d = torch.where(has_scale, _fp16(_div_const(max_scale, q4)), 0.0).squeeze(1)
        dmin = torch.where(has_min, _fp16(_div_const(max_min, q4)), 0.0).squeeze(1)
    else:
        w = _importance_weights(x, xs, qw, 16, 1 / _QK_K)
        sw = _transposed(_ordered_sum(w), 16)
        search = _make_qkx2_quants(_WEIGHTED_START, xs, 3, -0.9, 0.05, 36, False, w)
        dm, ls = _make_qp_quants(_transposed(search.scale, 16), 15, sw)
        mm, lm = _make_qp_quants(_transposed(search.the_min, 16), 15, sw)
        ls, lm = ls.t(), lm.t()
        d, dmin = _fp16(dm), _fp16(mm)
    byte = (ls | (lm << 4)) & 0xFF  # uint8 stores, as the C code
    sc, m = byte & 0xF, byte >> 4
    u = _requantize_min(x, xs, search, sc, m, d, dmin, 3)
    return _Piece(u, sc, m, d, dmin)


def _q45_k(
    x: torch.Tensor, qw: torch.Tensor | None, nmax: int, rmin: float, nstep: int
) -> _Piece:
    """``quantize_row_q4_K_ref`` (``nmax = 15``, ``rmin = -1``, 20 steps) and
    ``quantize_row_q5_K_ref`` (31, -0.5, 15); with importance ``qw``,
    ``quantize_row_q4_K_impl`` / ``quantize_row_q5_K_impl``."""
    xs = _positions(x, 32)
    if qw is None:
        search = _make_qkx2_quants(_Q45_K_START, xs, nmax, rmin, 0.1, nstep, False)
        scales = search.scale.reshape(-1, 8)
        mins = search.the_min.reshape(-1, 8)
        max_scale = _running_max(scales, 1).unsqueeze(1)
        max_min = _running_max(mins, 1).unsqueeze(1)
        k63 = _f32(63.0)
        inv_scale = torch.where(max_scale > 0, _const_div(k63, max_scale), 0.0)
        inv_min = torch.where(max_min > 0, _const_div(k63, max_min), 0.0)
        # uint8_t ls = nearest_int(...); MIN(63, ls)
        sc = (_nearest_int(inv_scale * scales) & 0xFF).clamp_(max=63)
        m = (_nearest_int(inv_min * mins) & 0xFF).clamp_(max=63)
        d = _fp16(_div_const(max_scale, k63)).squeeze(1)
        dmin = _fp16(_div_const(max_min, k63)).squeeze(1)
    else:
        w = _importance_weights(x, xs, qw, 32, 2 / _QK_K)
        sw = _transposed(_ordered_sum(w), 8)
        search = _make_qkx2_quants(_WEIGHTED_START, xs, nmax, -0.9, 0.05, 36, False, w)
        d_block, ls = _make_qp_quants(_transposed(search.scale, 8), 63, sw)
        m_block, lm = _make_qp_quants(_transposed(search.the_min, 8), 63, sw)
        ls, lm = ls.t() & 0xFF, lm.t() & 0xFF  # uint8_t ls = Ls[j]
        if nmax == 31:  # Q5_K clamps, Q4_K does not
            ls, lm = ls.clamp(max=63), lm.clamp(max=63)
        # packed as the C code packs them (lossless for 6-bit values), read back
        sc, m = _unk4_scales(_k4_scales(ls, lm))
        d, dmin = _fp16(d_block), _fp16(m_block)
    u = _requantize_min(x, xs, search, sc, m, d, dmin, nmax)
    return _Piece(u, sc, m, d, dmin)


def _requantize_signed(
    x: torch.Tensor, xs: torch.Tensor, search: _SignedSearch, sc: torch.Tensor,
    d: torch.Tensor, nmax: int,
) -> torch.Tensor:
    """Q3_K's and Q6_K's final codes ``[S, 256]`` (``L = l + nmax``): ``clamp(nearest(x /
    (d sc)), -nmax, nmax - 1) + nmax``, or the search's where ``d sc == 0``."""
    dl = (d.unsqueeze(1) * sc.to(torch.float32)).reshape(-1, 1)
    safe = torch.where(dl != 0, dl, 1.0)
    u = _nearest_int(x.reshape(-1, 16) / safe).clamp_(-nmax, nmax - 1) + nmax
    return _keep_search_codes(u, dl, search, xs, nmax).reshape(x.shape)


def _q3_k(x: torch.Tensor, qw: torch.Tensor | None) -> _Piece:
    """``quantize_row_q3_K_ref``; with importance ``qw``, ``quantize_row_q3_K_impl``."""
    xs = _positions(x, 16)
    if qw is None:
        search = _make_q3_quants(xs)
        scales = search.scale.reshape(-1, 16)
        _, max_scale = _first_absmax(scales, 1)
        max_scale = max_scale.unsqueeze(1)
        has = max_scale != 0
        iscale = _const_div(_f32(-32.0), torch.where(has, max_scale, 1.0))
        # int8_t l = nearest_int(...); MAX(-32, MIN(31, l)): the int8 store wraps first
        l8 = ((_nearest_int(iscale * scales) + 128) & 0xFF) - 128
        sc = torch.where(has, l8.clamp_(-32, 31), -32)  # no scale: the bytes stay 0
        d = torch.where(has, _fp16(iscale.reciprocal()), 0.0).squeeze(1)
    else:
        w = _importance_weights(x, xs, qw, 16, 2 / _QK_K)
        sw = _transposed(_ordered_sum(w), 16)
        search = _make_qx_quants(xs, 4, w)
        scales = _transposed(search.scale, 16)
        top = _make_qx_quants(scales, 32, sw)  # the 16 scales' own search: Ls in 0..63
        every = torch.arange(scales.shape[1], device=x.device)
        sc = top.codes(scales, 32, every) - 32
        d = _fp16(top.scale)
    u = _requantize_signed(x, xs, search, sc, d, 4)
    return _Piece(u, sc, None, d, None)


def _q6_k(x: torch.Tensor, qw: torch.Tensor | None) -> _Piece:
    """``quantize_row_q6_K_ref``; with importance ``qw``, ``quantize_row_q6_K_impl`` (the
    importance itself weighs the search)."""
    xs = _positions(x, 16)
    search = _make_qx_quants(xs, 32, None if qw is None else _positions(qw, 16))
    scales = search.scale.reshape(-1, 16)
    amax, max_scale = _first_absmax(scales, 1)
    max_scale = max_scale.unsqueeze(1)
    zero = (amax < _GROUP_MAX_EPS).unsqueeze(1)  # the whole super-block is stored as 0
    iscale = _const_div(_f32(-128.0), torch.where(zero, 1.0, max_scale))
    # y.scales[ib] = MIN(127, nearest_int(...)): an int8 store
    sc = ((_nearest_int(iscale * scales).clamp_(max=127) + 128) & 0xFF) - 128
    sc = torch.where(zero, 0, sc)
    d = torch.where(zero, 0.0, _fp16(iscale.reciprocal())).squeeze(1)
    u = _requantize_signed(x, xs, search, sc, d, 32)
    u = torch.where(zero, 0, u)
    return _Piece(u, sc, None, d, None)


def _iq4_weights(x: torch.Tensor, qw: torch.Tensor | None) -> torch.Tensor | None:
    """``quantize_row_iq4_nl_impl``'s weights ``qw sqrtf(sigma2 + x^2)`` with ``sigma2 = 2
    / n sum x^2`` over the super-block of ``n`` (``x`` ``[S, n]``); ``None`` for ``x^2``
    (without importance), which ``_iq4_block_scales`` computes itself."""
    if qw is None:
        return None
    return _importance_weights(x, _positions(x, 32), qw, 32, 2 / x.shape[1])


def _iq4_nl(x: torch.Tensor, qw: torch.Tensor | None, defer: bool = False) -> _Piece:
    """``quantize_iq4_nl``: each block of 32 its own super-block; ``defer``: the codes
    left to the caller (``_Piece.inv``)."""
    scale = _iq4_block_scales(x, _iq4_weights(x, qw))
    d = _fp16(scale)
    inv = _safe_inverse(scale).unsqueeze(1)
    if defer:
        return _Piece(None, None, None, d, None, inv, d.unsqueeze(1))
    return _Piece(_kernel(_iq4_scaled_codes, x, inv), None, None, d, None)


def _iq4_xs(x: torch.Tensor, qw: torch.Tensor | None, defer: bool = False) -> _Piece:
    """``quantize_iq4_xs``; ``defer``: as ``_iq4_nl``'s."""
    scales = _iq4_block_scales(x.reshape(-1, 32), _iq4_weights(x, qw))
    scales = scales.reshape(-1, 8)
    _, max_scale = _first_absmax(scales, 1)
    d = _div_const(-max_scale, _f32(32.0)).unsqueeze(1)
    ls = _nearest_int(_safe_inverse(d) * scales).clamp_(-32, 31)
    # the codes divide by the float32 d l, not by the fp16 d stored
    dl = (d * ls.to(torch.float32)).reshape(1, -1)
    inv = _safe_inverse(dl).reshape(-1, 1)
    d16 = _fp16(d)
    if defer:  # the stored block scale fp16(d) l, as quantize_blocks forms it (exact)
        stored = (d16 * ls.to(torch.float32)).reshape(-1, 1)
        return _Piece(None, ls, None, d16.squeeze(1), None, inv, stored)
    u = _kernel(_iq4_scaled_codes, x.reshape(-1, 32), inv).reshape(-1, _QK_K)
    return _Piece(u, ls, None, d16.squeeze(1), None)


@dataclass(frozen=True)
class _Type:
    """A type's quantizer over ``[S, unit]`` pieces, and its stored codes' shift to the
    lab's (``q = u + shift``; ``None``: IQ4 level indices, kept as uint8)."""

    quantize: Callable[..., _Piece]
    unit: int
    shift: int | None
    fuses: bool = False
    """``quantize`` takes ``defer=True`` (IQ4: ``_Piece.inv``)."""


_TYPES: dict[str, _Type] = {
    "Q2_K": _Type(_q2_k, _QK_K, -2),
    "Q3_K": _Type(_q3_k, _QK_K, -4),
    "Q4_K": _Type(lambda x, qw: _q45_k(x, qw, 15, -1.0, 20), _QK_K, -8),
    "Q5_K": _Type(lambda x, qw: _q45_k(x, qw, 31, -0.5, 15), _QK_K, -16),
    "Q6_K": _Type(_q6_k, _QK_K, -32),
    "IQ4_NL": _Type(_iq4_nl, 32, None, fuses=True),
    "IQ4_XS": _Type(_iq4_xs, _QK_K, None, fuses=True),
}


def _per_block(v: torch.Tensor, n: int) -> torch.Tensor:
    """Per super-block values ``[S]`` repeated for its ``n / S`` blocks: ``[n, 1]``."""
    return v.unsqueeze(1).expand(-1, n // len(v)).reshape(n, 1)


def _iq4_codes_values(
    blocks: torch.Tensor, inv: torch.Tensor, scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """IQ4's uint8 codes ``best_index_int8(inv x)`` of ``blocks`` ``[n, 32]`` (``inv``
    ``[n, 1]``) and, from the same compiled loop, their values ``clamp(scale
    IQ4_NL_VALUES[u])`` (``scale`` ``[n, 1]``, the stored block scale;
    ``kernels.encode_values_with``: the decode's tree of selects on the int32 code, so
    ``dequantize``'s bits). Over all blocks at once, not per piece: joining the pieces'
    values cost a full copy (4096 x 4096 IQ4_NL, one thread: 6.8x a clone with two passes,
    7.6x with per-piece values). Where that pass does not run, the codes alone and
    ``None``."""
    table = codebook_for(Format.IQ4_NL, blocks.device).decode_table
    both = encode_values_with(_iq4_code_numbers, "kquants_iq4", table, scale, blocks, inv)
    if both is not None:
        return both
    return _kernel(_iq4_scaled_codes, blocks, inv), None


def quantize_blocks(
    name: str,
    blocks: torch.Tensor,
    cfg: QuantConfig,
    layout: BlockLayout,
    importance: torch.Tensor | None = None,
    *,
    values: bool = False,
) -> tuple[torch.Tensor, BlockParams, torch.Tensor | None]:
    """Codes (``[n_blocks, block_len]``: int8 for the integer types, uint8 IQ4 indices) and
    block parameters of ``blocks`` (float32, the ``PerGroup`` blocks of ``cfg``, consecutive
    blocks forming each 256-value super-block) under llama.cpp's quantizer of ``name``, in
    pieces of ``SUPER_BLOCKS_PER_PIECE`` super-blocks. ``importance`` (float32
    ``[layout.shape[-1]]``, checked by the caller): llama.cpp's importance matrix entry of
    the tensor (``quant_weights``, one weight per column), for its weighted quantizers.
    Third: with ``values``, for IQ4_NL and IQ4_XS where their last pass runs compiled, the
    dequantized values (float32, ``blocks``' shape) from the codes' pass, bit for bit
    ``dequantize``'s; else ``None``."""
    kind = _TYPES.get(name)
    if kind is None:
        raise ValueError(f"{name!r} is not a K-quant or IQ4 type: {', '.join(_TYPES)}")
    flat = blocks.reshape(-1, kind.unit)
    weights = None
    if importance is not None:  # one weight per column, the same in every row
        row = importance.to(device=blocks.device, dtype=torch.float32).reshape(1, -1)
        rows = flat.numel() // row.shape[1]
        weights = row.expand(rows, -1).reshape(-1, kind.unit)
    step = SUPER_BLOCKS_PER_PIECE * (_QK_K // kind.unit)
    # IQ4's values: its codes in one compiled pass over all blocks, with their values
    defer = values and kind.fuses and switch.runs_compiled(blocks)
    extra = {"defer": True} if defer else {}
    pieces = [
        kind.quantize(
            flat[i : i + step], None if weights is None else weights[i : i + step], **extra
        )
        for i in range(0, flat.shape[0], step)
    ]

    def cat(field: str) -> torch.Tensor:
        return torch.cat([getattr(p, field) for p in pieces])

    def stored_codes(u: torch.Tensor) -> torch.Tensor:
        return u.to(torch.uint8) if kind.shift is None else (u + kind.shift).to(torch.int8)

    n, block_len = blocks.shape
    fused = None
    if defer:
        codes, fused = _iq4_codes_values(blocks, cat("inv"), cat("block_scale"))
    else:
        # each piece's codes to one byte while they are in cache, before they are joined
        codes = torch.cat([stored_codes(p.u) for p in pieces]).reshape(n, block_len)
    d = cat("d")
    zeros = torch.zeros((n, 1), dtype=torch.int32, device=blocks.device)
    if name == "IQ4_NL":  # one level: d itself
        return codes, BlockParams(d.reshape(n, 1), zeros, None, d.reshape(n, 1)), fused
    sf = cfg.scale_format
    if not isinstance(sf, SuperBlockScales):
        raise TypeError(f"{name} stores super-block scales; {cfg.describe()!r} does not")
    sup_shape = super_block_shape(layout, sf)
    sc = cat("sc").reshape(n)
    scale = _per_block(d, n) * sc.reshape(n, 1).to(torch.float32)  # exact in float32
    if cfg.float_offset:  # Q2_K, Q4_K, Q5_K: x = d sc (q - qmin) - dmin m
        m, dmin = cat("m").reshape(n), cat("dmin")
        stored = StoredScales(sc, m, d.reshape(sup_shape), dmin.reshape(sup_shape))
        offset = -(_per_block(dmin, n) * m.reshape(n, 1).to(torch.float32))
        z = torch.full((n, 1), cfg.qmin, dtype=torch.int32, device=blocks.device)
        return codes, BlockParams(scale, z, offset, scale, None, stored), fused
    stored = StoredScales(sc, super_scale=d.reshape(sup_shape))
    return codes, BlockParams(scale, zeros, None, scale, None, stored), fused
