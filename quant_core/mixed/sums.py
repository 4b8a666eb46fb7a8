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
the table's formula before this module. The compiled path (``quant_core.kernels``' machinery:
``torch.compile``, eager fallback, ``QLAB_COMPILE``) reads ``W`` and ``Ŵ`` once, squares
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

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..chunks import block_extremes
from ..config import Format, QuantConfig, Recipe, Rounding
from ..formats import codebook_for
from ..formats.scales import check_super_blocks
from ..granularity import layout_for
from ..kernels.bodies import (
    _FLOAT8,
    SMALL_TABLE_MAX,
    _codebook_encoder,
    _minifloat,
    _minifloat_for_table,
    _minifloat_values,
    _small_table_values,
    _unrounded,
)
from ..kernels.passes import codebook_encoder_args
from ..kernels.switch import _FAILED, _run, _usable
from ..quantize import block_params
from ..quantized_tensor import QuantizedTensor
from ..ranges import BlockRange

_F32_MAX = torch.finfo(torch.float32).max

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


# -- the table's fused pass: quantize, dequantize and the error sums in one loop --------------


def _int_error(
    x: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    zd: torch.Tensor,
    md: torch.Tensor,
    qmin: torch.Tensor,
    qmax: torch.Tensor,
) -> torch.Tensor:
    """``D`` of integer codes: ``encode_int``'s code (``bodies._unrounded``, rounded and
    clamped: exact integers, so its int8/int16 cast and back changes nothing), then
    ``dequantize``'s ``clamp((q - z) s + m)`` with its zero point and offset (zeros where
    it has none: ``q - 0`` is ``q`` and ``v + 0`` is ``v`` but for the sign of a zero,
    which no square shows)."""
    q = _unrounded(x, s, z, m).round().clamp(qmin, qmax)
    return x - ((q - zd.to(torch.float32)) * s + md).clamp(-_F32_MAX, _F32_MAX)


def _block_sums(d: torch.Tensor) -> torch.Tensor:
    """``Σ D²`` of each block (``d``: ``[rows, blocks per row, L]``), in float32."""
    return (d * d).sum(dim=2)


def _weighted_block_sums(
    d: torch.Tensor, a: torch.Tensor, one: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Σ D², Σ D² a)`` of each block in one loop. ``one`` (``a``'s shape, all ones:
    ``v * 1`` is ``v``) gives the plain sum ``a``'s indexing: Inductor loops over
    ``[rows, blocks]`` as one range for a sum that reads only ``D`` and as two for one that
    reads ``a``, and two reductions with different loops do not fuse (both sums then
    compute ``D``, 2.5x the time of one)."""
    d2 = d * d
    return (d2 * one).sum(dim=2), (d2 * a).sum(dim=2)


def _int_fused_kernel(x, s, z, m, zd, md, qmin, qmax):
    return _block_sums(_int_error(x, s, z, m, zd, md, qmin, qmax))


def _int_fused_weighted_kernel(x, s, z, m, zd, md, qmin, qmax, a, one):
    return _weighted_block_sums(_int_error(x, s, z, m, zd, md, qmin, qmax), a, one)


@functools.cache
def _codebook_fused_kernel(fmt: Format, multiply: bool, weighted: bool) -> Callable[..., Any]:
    """The fused pass of codebook ``fmt``: ``encode_codebook``'s kernel body (the same
    codes), the value of each code as ``decode_codebook``'s compiled kernels find it (from
    the code's bits for the float formats, a tree of selects for the other tables: the
    table's entry exactly, no gather), scaled and clamped as there, and the sums of
    ``D²``. ``args``: ``x``, the encoder's arguments after the blocks, the scales ``s``
    dequantize multiplies by and, where weighted, ``a``."""
    encode = _codebook_encoder(fmt, multiply)
    mf = _minifloat(fmt)
    n_enc = 1 if fmt in _FLOAT8 else 2  # the encoder's arguments after the blocks

    def error(x: torch.Tensor, *args: torch.Tensor) -> torch.Tensor:
        codes = encode(x, *args[:n_enc]).to(torch.float32)
        s = args[n_enc]
        if mf is not None:
            v = _minifloat_values(codes, mf) * s
            # decode_minifloat's clamp by selects (the same numbers as clamp)
            x_hat = torch.where(v > _F32_MAX, _F32_MAX, torch.where(v < -_F32_MAX, -_F32_MAX, v))
        else:
            x_hat = (_small_table_values(codes, args[n_enc + 1]) * s).clamp(-_F32_MAX, _F32_MAX)
        return x - x_hat

    def fused(x: torch.Tensor, *args: torch.Tensor) -> torch.Tensor:
        return _block_sums(error(x, *args))

    def fused_weighted(x: torch.Tensor, *args: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _weighted_block_sums(error(x, *args[:-2]), *args[-2:])

    return fused_weighted if weighted else fused


def _decodes_without_gather(table: torch.Tensor) -> bool:
    """Whether ``decode_codebook`` decodes this table without a gather (as the fused pass
    does): a float format's, or one of at most ``SMALL_TABLE_MAX`` entries, a power of 2."""
    n = table.shape[0]
    return _minifloat_for_table(table) is not None or (n <= SMALL_TABLE_MAX and not n & (n - 1))


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
        if not _usable(self._w):
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


_ONE_LOOP = {
    "realize_reads_threshold": 1_000,
    "realize_cpu_opcount_threshold": 10_000,
    "realize_cpu_acc_reads_threshold": 1_000,
}
"""Inductor settings for the fused passes: ``D²`` feeds two sums, and Inductor stores a
value that several reductions read once its formula reads more than 4 inputs or passes 50
operations (a full-size buffer written, then read by a second loop: 2x to 4x the time
here); these thresholds keep both sums in the loop that computes ``D``."""

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
    them (``quantize.block_params``, from ``extremes``), then per element the code,
    its dequantized value and ``D²`` (``_int_error``, ``_codebook_fused_kernel``), summed
    per row in float32 and over rows in float64 as ``error_sums``' compiled path. ``None``
    where it does not apply (then quantize and dequantize): another recipe, stochastic
    rounding, two-level scales, blocks that are not runs of a row's values, a codebook
    decoded by a gather, the eager path. ``ValueError`` as ``quantize`` raises it for a
    granularity that does not fit ``w``."""
    if not fuses(cfg) or w.dim() != 2 or w.dtype != torch.float32 or not w.is_contiguous():
        return None
    layout = layout_for(w.shape, cfg.granularity)  # quantize's ValueError, if any
    check_super_blocks(layout, cfg)
    block_len = row_run_length(cfg, tuple(w.shape))
    if block_len is None or not _usable(w):
        return None
    rows, n_in = w.shape
    shape = (rows, n_in // block_len, block_len)
    if cfg.format is not Format.INT:
        table = codebook_for(cfg.format, w.device).decode_table
        if not _decodes_without_gather(table):
            return None
    _check(w, None, importance)
    blocks = w.view(-1, block_len)
    params, cb = block_params(blocks, cfg, layout, extremes.get(block_len))
    x = w.view(shape)

    def per_block(t: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return t.reshape(rows, shape[1], 1).to(dtype)

    s = per_block(params.scale)
    weighted = importance is not None
    a: tuple[torch.Tensor, ...] = ()
    if weighted:
        a32 = importance.to(device=w.device, dtype=torch.float32).reshape(1, shape[1], block_len)
        a = (a32, torch.ones_like(a32))
    if cb is None:
        z = per_block(params.zero_point, torch.int32)
        m = per_block(params.offset) if params.offset is not None else torch.zeros_like(s)
        zd = z if cfg.has_zero_point else torch.zeros_like(z)
        bounds = torch.tensor([cfg.qmin, cfg.qmax], dtype=torch.float32)
        kernel = _int_fused_weighted_kernel if weighted else _int_fused_kernel
        args = (x, per_block(params.encode_scale), z, m, zd, m, bounds[0], bounds[1], *a)
        name = kernel.__name__.strip("_")
    else:
        encoder, enc_args, enc_name = codebook_encoder_args(
            x, params.encode_scale, cb, params.encode_inverse
        )
        del encoder
        multiply = params.encode_inverse is not None or cb.format is Format.NF4
        kernel = _codebook_fused_kernel(cb.format, multiply, weighted)
        extra = () if _minifloat(cb.format) is not None else (cb.decode_table,)
        args = (*enc_args, s, *extra, *a)
        name = f"fused_{enc_name}" + ("_weighted" if weighted else "")
    out = _run(kernel, name, *args, options=_ONE_LOOP)
    if out is _FAILED:
        return None
    plain, weighted_rows = out if weighted else (out, out)
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
