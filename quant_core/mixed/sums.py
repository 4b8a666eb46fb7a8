"""The sensitivity table's sums of squares in one pass each: the energy of a weight and the
squared error of its dequantized copy, plain and importance-weighted.

For ``W`` and ``Ŵ`` ``[out, in]`` float32 and an importance ``a`` ``[in]`` (or none):

- ``energy_sums(W, a)`` = ``(Σ_ij W_ij², Σ_ij W_ij² a_j)``;
- ``error_sums(W, Ŵ, a)`` = ``(Σ_ij D_ij², Σ_ij D_ij² a_j)`` with ``D = W - Ŵ``
  (without ``a`` the second sum is the first);
- ``codebook_error_sums(W, qt, a)``: the same with ``Ŵ = qt.dequantize()`` decoded inside
  the pass from a codebook format's codes and scales, never stored (``None`` where it does
  not apply: then dequantize and call ``error_sums``);
- ``scheme_error_sums(W, cfg, a, extremes)``: the same with ``Ŵ = quantize(W,
  cfg).dequantize()``, neither codes nor ``Ŵ`` stored: each block's parameters by
  ``quantize``'s own code (``quantize.block_params``), on block extremes that every scheme
  of the row shares (``RowExtremes``: one pass for ``PerGroup`` 32, 64, 128 and
  ``PerChannel(0)``), then one compiled pass computing per element the code (the body of
  ``encode_int``'s or ``encode_codebook``'s kernel), its dequantized value (the
  ``decode_*`` kernels' operations: the same ``D``) and ``D²``, summed per block in
  float32 and over blocks in float64 (``None`` where it does not apply: the lab's recipe
  with nearest rounding and one-level scales, blocks that are runs of a row's values).

The reference (``Backend.EAGER``, and every tensor the compiled path does not take) squares
float32 values and sums columns in float64, a few rows at a time (no full-size temporary):
the table's formula before this module. The compiled path (``quant_core.kernels``' entry
points ``row_square_sums``, ``codebook_square_sums``, ``fused_int_block_sums`` and
``fused_codebook_block_sums``, with its machinery: ``torch.compile``, eager fallback,
``QLAB_COMPILE``; each returns ``None`` where this module's reference must run) reads ``W``
and ``Ŵ`` once, squares
the same float32 differences (one IEEE subtraction and one multiplication, as the reference),
and sums each row in float32 (``a`` rounded to float32, one more multiplication for the
weighted sum); the ``out`` row sums are added in float64. A sum of ``n`` non-negative
float32 terms in any order is within ``(n - 1) u`` of the exact sum (``u = 2^-24``), so both
sums are within ``(in + 2) u`` (relative) of the reference's, float64's own error aside;
``scheme_error_sums``' block sums of ``L <= in`` terms are within ``(L + 2) u``, which
measured 10 to 300x closer to the exact sum of the float32 squares than the row sums.

A float32 row sum can overflow where float64's does not (values near 1e19): a non-finite
result from the compiled path is recomputed by the reference, which says whether the weight
itself is finite.

Why: the reference's float64 column sums over ``[4096, 11008]`` took about 1.4 s a scheme on
this project's 2-core machine, twice the quantize and dequantize; one compiled pass takes
about 0.1 s (``benchmarks/mixed_precision.py``). The fused pass then takes the place of
quantize's codes pass, dequantize and the sums (and 5 of 6 extremes passes) in the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ..chunks import block_extremes
from ..config import Format, QuantConfig, Recipe, Rounding
from ..formats import codebook_for
from ..formats.scales import check_super_blocks
from ..granularity import layout_for
from ..kernels import (
    codebook_square_sums,
    decodes_without_gather,
    fused_codebook_block_sums,
    fused_int_block_sums,
    row_square_sums,
    runs_compiled,
)
from ..quantize import block_params
from ..quantized_tensor import QuantizedTensor
from ..ranges import BlockRange

__all__ = [
    "RowExtremes",
    "codebook_error_sums",
    "energy_sums",
    "error_sums",
    "fuses",
    "row_run_length",
    "scheme_error_sums",
]

_ROWS = 64  # rows per piece of the reference: 64 x 11008 float32 is 2.8 MB


class RowExtremes:
    """Per-block ``(min, max)`` of one matrix ``w`` (2-D float32, finite) for layouts whose
    blocks are runs of ``L`` consecutive values of a row (``PerGroup(L)``, ``PerChannel(0)``
    with ``L`` the row), shared by every scheme of a table row: ``prepare(lengths)`` finds
    the extremes of blocks of ``gcd(lengths)`` in one pass (``chunks.block_extremes``), and
    ``get(L)`` those of longer blocks from them, as the min of the mins and the max of the
    maxes: exact (min and max do not round), and ``+0`` for a zero extreme as
    ``block_extremes`` gives (every zero it gave is ``+0``)."""

    def __init__(self, w: torch.Tensor) -> None:
        self._w = w
        self._by_len: dict[int, BlockRange] = {}

    def prepare(self, lengths: Sequence[int]) -> None:
        if not runs_compiled(self._w):
            return  # scheme_error_sums will not run: no pass for nothing
        n_in = self._w.shape[1]
        base = math.gcd(*lengths) if lengths else 0
        if base >= _MIN_SHARED_BLOCK and n_in % base == 0:
            self.get(base)

    def get(self, block_len: int) -> BlockRange:
        found = self._by_len.get(block_len)
        if found is not None:
            return found
        rows, n_in = self._w.shape
        for short, rng in self._by_len.items():
            if block_len % short == 0:
                lo = _merge(rng.lo, block_len // short, torch.minimum)
                hi = _merge(rng.hi, block_len // short, torch.maximum)
                break
        else:
            lo, hi = block_extremes(self._w.reshape(rows * n_in // block_len, block_len))
        found = self._by_len[block_len] = BlockRange(lo, hi)
        return found


def _merge(t: torch.Tensor, k: int, pick: Callable[..., torch.Tensor]) -> torch.Tensor:
    """``[n * k, 1]`` -> ``[n, 1]``: ``pick`` (min or max, exact) of each run of ``k``.
    For a few: ``pick`` of ``k`` strided views, as torch's reduction over an inner
    dimension of 2 or 4 runs one element at a time (8 ms for 1.4M values here, 2 ms so)."""
    if k >= _MERGE_REDUCE_FROM:
        reduce = torch.amin if pick is torch.minimum else torch.amax
        return reduce(t.reshape(-1, k), dim=1, keepdim=True)
    runs = t.reshape(-1, k)
    out = runs[:, 0]
    for j in range(1, k):
        out = pick(out, runs[:, j])
    return out.reshape(-1, 1)


_MERGE_REDUCE_FROM = 16

_MIN_SHARED_BLOCK = 16
"""Blocks shorter than this are not a shared pass's base (their extremes would outweigh a
pass of their own)."""


def fuses(cfg: QuantConfig) -> bool:
    """Whether ``scheme_error_sums`` may take ``cfg`` (the shape and the backend aside)."""
    return cfg.recipe is Recipe.LAB and cfg.rounding is Rounding.NEAREST and not cfg.two_level


def row_run_length(cfg: QuantConfig, shape: tuple[int, ...]) -> int | None:
    """The block length ``L`` when ``cfg``'s blocks of a matrix of ``shape`` are runs of
    ``L`` consecutive values of a row (``PerChannel(0)``, ``PerGroup``), else ``None``."""
    if len(shape) != 2:
        return None
    try:
        layout = layout_for(shape, cfg.granularity)
    except ValueError:
        return None
    if layout.tile is not None or layout.axis not in (None, 0) or shape[1] % layout.block_len:
        return None
    return layout.block_len


def scheme_error_sums(
    w: torch.Tensor,
    cfg: QuantConfig,
    importance: torch.Tensor | None,
    extremes: RowExtremes,
) -> tuple[float, float] | None:
    """``error_sums(w, quantize(w, cfg).dequantize(), importance)`` in one compiled pass
    that keeps neither codes nor ``Ŵ``: each block's parameters as ``quantize`` computes
    them (``quantize.block_params``, from ``extremes``), then per element the code, its
    dequantized value and ``D²`` (``kernels.fused_int_block_sums``,
    ``kernels.fused_codebook_block_sums``), summed per block in float32 and over blocks in
    float64 as ``error_sums``' compiled path does over rows. ``None``
    where it does not apply (then quantize and dequantize): another recipe, stochastic
    rounding, two-level scales, blocks that are not runs of a row's values, a codebook
    decoded by a gather, the eager path. ``ValueError`` as ``quantize`` raises it for a
    granularity that does not fit ``w``."""
    if not fuses(cfg) or w.dim() != 2 or w.dtype != torch.float32 or not w.is_contiguous():
        return None
    check_super_blocks(tuple(w.shape), cfg)  # quantize's ValueErrors, if any
    layout = layout_for(w.shape, cfg.granularity)
    block_len = row_run_length(cfg, tuple(w.shape))
    if block_len is None or not runs_compiled(w):
        return None
    rows, n_in = w.shape
    shape = (rows, n_in // block_len, block_len)
    if cfg.format is not Format.INT:
        table = codebook_for(cfg.format, w.device).decode_table
        if not decodes_without_gather(table):
            return None
    _check(w, None, importance)
    blocks = w.view(-1, block_len)
    params, cb = block_params(blocks, cfg, layout, extremes.get(block_len))
    x = w.view(shape)
    if cb is None:
        out = fused_int_block_sums(
            x,
            params.encode_scale,
            params.zero_point,
            params.offset,
            cfg.qmin,
            cfg.qmax,
            has_zero_point=cfg.has_zero_point,
            a=importance,
        )
    else:
        out = fused_codebook_block_sums(
            x, params.encode_scale, cb, params.encode_inverse, params.scale, a=importance
        )
    if out is None:
        return None
    plain, weighted_rows = out
    # the block sums in float64 by rows, then the rows' (torch's float64 sum of the whole
    # float32 [rows, blocks] converts one value at a time: 3 to 16 ms here, against 0.5)
    sums = (
        float(plain.sum(dim=1, dtype=torch.float64).sum()),
        float(weighted_rows.sum(dim=1, dtype=torch.float64).sum()),
    )
    if not (math.isfinite(sums[0]) and math.isfinite(sums[1])):
        return None  # a float32 row sum overflowed: quantize, dequantize, error_sums
    return sums


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
    out = row_square_sums(w, w_hat, a)
    if out is None:
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
    if not runs_compiled(w, qt.codes):
        return None
    rows, n_in = w.shape
    shape = (rows, n_in // layout.block_len, layout.block_len)
    x = w.contiguous().view(shape)
    q = qt.codes.contiguous().view(shape)
    table = codebook_for(qt.config.format, w.device).decode_table
    out = codebook_square_sums(x, q, qt.scale, table, importance)
    if out is None:
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
