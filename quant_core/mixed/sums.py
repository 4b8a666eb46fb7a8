"""The sensitivity table's sums of squares in one pass each: the energy of a weight and the
squared error of its dequantized copy, plain and importance-weighted.

For ``W`` and ``Ŵ`` ``[out, in]`` float32 and an importance ``a`` ``[in]`` (or none):

- ``energy_sums(W, a)`` = ``(Σ_ij W_ij², Σ_ij W_ij² a_j)``;
- ``error_sums(W, Ŵ, a)`` = ``(Σ_ij D_ij², Σ_ij D_ij² a_j)`` with ``D = W - Ŵ``
  (without ``a`` the second sum is the first);
- ``codebook_error_sums(W, qt, a)``: the same with ``Ŵ = qt.dequantize()`` decoded inside
  the pass from a codebook format's codes and scales, never stored (``None`` where it does
  not apply: then dequantize and call ``error_sums``).

The reference (``Backend.EAGER``, and every tensor the compiled path does not take) squares
float32 values and sums columns in float64, a few rows at a time (no full-size temporary):
the table's formula before this module. The compiled path (``quant_core.kernels``' machinery:
``torch.compile``, eager fallback, ``QLAB_COMPILE``) reads ``W`` and ``Ŵ`` once, squares
the same float32 differences (one IEEE subtraction and one multiplication, as the reference),
and sums each row in float32 (``a`` rounded to float32, one more multiplication for the
weighted sum); the ``out`` row sums are added in float64. A sum of ``n`` non-negative
float32 terms in any order is within ``(n - 1) u`` of the exact sum (``u = 2^-24``), so both
sums are within ``(in + 2) u`` (relative) of the reference's, float64's own error aside.

A float32 row sum can overflow where float64's does not (values near 1e19): a non-finite
result from the compiled path is recomputed by the reference, which says whether the weight
itself is finite.

Why: the reference's float64 column sums over ``[4096, 11008]`` took about 1.4 s a scheme on
this project's 2-core machine, twice the quantize and dequantize; one compiled pass takes
about 0.1 s (``benchmarks/mixed_precision.py``).
"""

from __future__ import annotations

import math

import torch

from ..config import Format
from ..formats import codebook_for
from ..kernels.switch import _FAILED, _run, _usable
from ..quantized_tensor import QuantizedTensor

_F32_MAX = torch.finfo(torch.float32).max

__all__ = ["codebook_error_sums", "energy_sums", "error_sums"]

_ROWS = 64  # rows per piece of the reference: 64 x 11008 float32 is 2.8 MB


def _error_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    d = x - y
    return (d * d).sum(dim=1)


def _error_weighted_kernel(
    x: torch.Tensor, y: torch.Tensor, a: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    d = x - y
    d2 = d * d
    return d2.sum(dim=1), (d2 * a).sum(dim=1)


def _energy_kernel(x: torch.Tensor) -> torch.Tensor:
    return (x * x).sum(dim=1)


def _energy_weighted_kernel(x: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x2 = x * x
    return x2.sum(dim=1), (x2 * a).sum(dim=1)


def _codebook_kernel(
    x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, table: torch.Tensor
) -> torch.Tensor:
    # dequantize's formula (kernels' _decode_table), its operations in its order
    x_hat = (table[q.to(torch.int64)] * s).clamp(-_F32_MAX, _F32_MAX)
    d = x - x_hat
    return (d * d).sum(dim=(1, 2))


def _codebook_weighted_kernel(
    x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, table: torch.Tensor, a: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    x_hat = (table[q.to(torch.int64)] * s).clamp(-_F32_MAX, _F32_MAX)
    d = x - x_hat
    d2 = d * d
    return d2.sum(dim=(1, 2)), (d2 * a).sum(dim=(1, 2))


def _check(w: torch.Tensor, w_hat: torch.Tensor | None, a: torch.Tensor | None) -> None:
    if w.dtype != torch.float32 or w.dim() != 2:
        raise TypeError(f"w must be 2-D float32, got {w.dtype} {tuple(w.shape)}")
    if w_hat is not None and (w_hat.dtype != torch.float32 or w_hat.shape != w.shape):
        raise ValueError(
            f"w_hat must be float32 of w's shape {tuple(w.shape)}, got {w_hat.dtype} "
            f"{tuple(w_hat.shape)}"
        )
    if a is not None and a.shape != (w.shape[1],):
        raise ValueError(f"importance must have shape [{w.shape[1]}], got {list(a.shape)}")


def _reference(
    w: torch.Tensor, w_hat: torch.Tensor | None, a: torch.Tensor | None
) -> tuple[float, float]:
    """Column sums of float32 squares in float64, ``_ROWS`` rows at a time."""
    col = torch.zeros(w.shape[1], dtype=torch.float64, device=w.device)
    for start in range(0, w.shape[0], _ROWS):
        rows = slice(start, start + _ROWS)
        d = w[rows] - w_hat[rows] if w_hat is not None else w[rows].clone()
        col += d.square_().sum(dim=0, dtype=torch.float64)
    total = float(col.sum())
    return total, total if a is None else float(col @ a.to(torch.float64))


def _compiled(
    w: torch.Tensor, w_hat: torch.Tensor | None, a: torch.Tensor | None
) -> tuple[float, float] | None:
    """The compiled pass, or ``None`` where the reference must run (module docstring)."""
    inputs = (w,) if w_hat is None else (w, w_hat)
    if not _usable(*inputs):
        return None
    args = [t.contiguous() for t in inputs]
    if a is None:
        kernel = _energy_kernel if w_hat is None else _error_kernel
        out = _run(kernel, kernel.__name__.strip("_"), *args)
        if out is _FAILED:
            return None
        plain = weighted = out
    else:
        kernel = _energy_weighted_kernel if w_hat is None else _error_weighted_kernel
        a32 = a.to(device=w.device, dtype=torch.float32).reshape(1, -1)
        out = _run(kernel, kernel.__name__.strip("_"), *args, a32)
        if out is _FAILED:
            return None
        plain, weighted = out
    sums = (float(plain.sum(dtype=torch.float64)), float(weighted.sum(dtype=torch.float64)))
    if not (math.isfinite(sums[0]) and math.isfinite(sums[1])):
        return None  # a float32 row sum overflowed, or the weight is not finite
    return sums


def codebook_error_sums(
    w: torch.Tensor, qt: QuantizedTensor, importance: torch.Tensor | None = None
) -> tuple[float, float] | None:
    """``error_sums(w, qt.dequantize(), importance)`` for a codebook format (NF4, FP4, FP8,
    ...) without ``Ŵ`` in memory: one compiled pass reads ``w``, the uint8 codes and the
    scales and decodes as ``dequantize`` does (``clamp(s * value[q])``, the same float32
    operations, so the same ``D``); sums as ``error_sums``' compiled path. ``None`` where it
    does not apply: an integer format, blocks that are not runs of whole rows' consecutive
    values (``PerChannel(1)``, tiles, one block over several rows), or the eager path."""
    layout = qt.layout
    if (
        qt.config.format is Format.INT
        or w.dim() != 2
        or w.dtype != torch.float32
        or tuple(qt.codes.shape) != tuple(w.shape)
        or qt.codes.dtype != torch.uint8
        or layout.tile is not None
        or layout.axis not in (None, 0)
        or w.shape[1] % layout.block_len != 0
    ):
        return None
    _check(w, None, importance)
    if not _usable(w, qt.codes):
        return None
    rows, n_in = w.shape
    shape = (rows, n_in // layout.block_len, layout.block_len)
    x = w.contiguous().view(shape)
    q = qt.codes.contiguous().view(shape)
    s = qt.scale.reshape(rows, shape[1], 1).to(torch.float32)
    table = codebook_for(qt.config.format, w.device).decode_table
    if importance is None:
        out = _run(_codebook_kernel, "codebook_error", x, q, s, table)
        if out is _FAILED:
            return None
        plain = weighted = out
    else:
        a = importance.to(device=w.device, dtype=torch.float32).reshape(1, shape[1], shape[2])
        out = _run(_codebook_weighted_kernel, "codebook_error_weighted", x, q, s, table, a)
        if out is _FAILED:
            return None
        plain, weighted = out
    sums = (float(plain.sum(dtype=torch.float64)), float(weighted.sum(dtype=torch.float64)))
    if not (math.isfinite(sums[0]) and math.isfinite(sums[1])):
        return None
    return sums


def energy_sums(w: torch.Tensor, importance: torch.Tensor | None = None) -> tuple[float, float]:
    """``(Σ W², Σ W² a)`` of a 2-D float32 ``w`` (module docstring); ``importance``: ``[in]``
    or ``None`` (then both are ``Σ W²``)."""
    _check(w, None, importance)
    return _compiled(w, None, importance) or _reference(w, None, importance)


def error_sums(
    w: torch.Tensor, w_hat: torch.Tensor, importance: torch.Tensor | None = None
) -> tuple[float, float]:
    """``(Σ D², Σ D² a)``, ``D = w - w_hat`` (2-D float32, one shape; module docstring);
    ``importance``: ``[in]`` or ``None`` (then both are ``Σ D²``)."""
    _check(w, w_hat, importance)
    return _compiled(w, w_hat, importance) or _reference(w, w_hat, importance)
