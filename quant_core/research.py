"""The two quantizers users of research code ask about, as standalone functions."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .validation import check_float_tensor, to_float32

__all__ = ["DoReFaResult", "LevelQuantResult", "dorefa_quantize_weights", "minmax_levels_quantize"]


def _check_bits(bits: object, lo: int = 1, hi: int = 16) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int):
        raise TypeError(f"bits must be an int, got {bits!r}")
    if not lo <= bits <= hi:
        raise ValueError(f"bits={bits} is outside the supported range {lo}..{hi}")
    return bits


@dataclass(frozen=True, eq=False)
class LevelQuantResult:
    """``codes`` (int64, ``0..2^n-1``), ``levels`` (the ``2^n`` values, ascending) and
    ``dequantized = levels[codes]`` (float32, input shape)."""

    codes: torch.Tensor
    levels: torch.Tensor
    dequantized: torch.Tensor


def minmax_levels_quantize(x: torch.Tensor, bits: int) -> LevelQuantResult:
    """Map ``x`` onto ``2^n`` equally spaced levels from ``min(x)`` to ``max(x)``, both included.

    ``step = (max - min) / (2^n - 1)``, ``code = round((x - min) / step)``,
    ``x_hat = min + code * step``. Example, n = 2 on ``[0, 3]``: levels ``0, 1, 2, 3``.
    A constant tensor has ``step = 0`` and maps to itself. Computed in float32, or in
    float64 when ``max - min`` exceeds float32's range.
    """
    check_float_tensor(x)
    bits = _check_bits(bits)
    xf = to_float32(x)
    lo, hi = xf.min(), xf.max()
    n_levels = 1 << bits
    if not bool(torch.isfinite(hi - lo)):
        xf, lo, hi = xf.to(torch.float64), lo.to(torch.float64), hi.to(torch.float64)
    step = (hi - lo) / (n_levels - 1)
    safe_step = torch.where(step > 0, step, torch.ones_like(step))
    codes = torch.round((xf - lo) / safe_step).clamp_(0, n_levels - 1).to(torch.int64)
    levels = lo + torch.arange(n_levels, device=x.device, dtype=xf.dtype) * step
    levels[-1] = hi  # the top level is max(x) exactly, not lo + (2^n-1) * step rounded
    levels = levels.to(torch.float32)
    return LevelQuantResult(codes=codes, levels=levels, dequantized=levels[codes])


@dataclass(frozen=True, eq=False)
class DoReFaResult:
    """``codes`` (int64, ``0..2^k-1``) and ``dequantized`` weights (float32) in ``[-1, 1]``
    (times ``scale`` when rescaled; ``scale`` is 1.0 otherwise)."""

    codes: torch.Tensor
    dequantized: torch.Tensor
    scale: float


def dorefa_quantize_weights(w: torch.Tensor, bits: int, rescale: bool = False) -> DoReFaResult:
    """DoReFa-Net weight quantization (Zhou et al., 2016).

    ``x = tanh(w) / (2 max|tanh(w)|) + 1/2`` in ``[0, 1]``;
    ``q_k(x) = round((2^k - 1) x) / (2^k - 1)``; ``w_q = 2 q_k(x) - 1`` in ``[-1, 1]``.
    ``rescale=True`` multiplies ``w_q`` by ``max|w|`` so it spans the weights' own range
    (comparable to ``w`` in error metrics). ``bits`` from 1 to 16.
    """
    check_float_tensor(w, "w")
    bits = _check_bits(bits)
    wf = to_float32(w, "w")
    t = torch.tanh(wf)
    t_max = t.abs().max()
    denom = torch.where(t_max > 0, 2 * t_max, torch.ones_like(t_max))
    x = t / denom + 0.5
    n = (1 << bits) - 1
    codes = torch.round(x * n).to(torch.int64)
    w_q = 2 * (codes.to(torch.float32) / n) - 1
    scale = float(wf.abs().max()) if rescale else 1.0
    return DoReFaResult(codes=codes, dequantized=w_q * scale, scale=scale)
