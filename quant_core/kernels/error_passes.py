"""Compiled passes of the mixed-precision table's sums of squares (``quant_core.mixed.sums``):
per-row and per-block float32 sums of ``W²`` and ``D²`` (``D = W - Ŵ``), plain and weighted by
an importance ``a`` over the input columns, with ``Ŵ`` given, decoded from a codebook's codes,
or computed from ``W`` in the same loop (quantize's code, then dequantize's value).

Each entry point returns the float32 sums, or ``None`` where the compiled path does not run
(``switch._usable``: backend, device, size, warm-up; or a failed compile): the caller then
runs its own reference. The caller adds the float32 sums in float64 and checks them (a
float32 sum can overflow where float64's does not); the error bounds are ``mixed.sums``'.

Every per-element formula is the one of the kernels it repeats, in the same order of IEEE
operations: ``encode_int``'s and ``encode_codebook``'s bodies for the codes, ``decode_*``'s
for the dequantized values (the same ``D`` as ``quantize(W, cfg).dequantize()``). Kernel
names (``_run``'s key) stay those the table has always compiled under, so the warm-up and
Inductor's on-disk cache see the same kernels.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from ..config import Format
from ..formats import Codebook
from ..formats.codebooks import RECIPROCAL_FORMATS
from .bodies import (
    _FLOAT8,
    _by_selects,
    _codebook_encoder,
    _minifloat,
    _minifloat_for_table,
    _minifloat_values,
    _small_table_values,
    _unrounded,
)
from .passes import _per_block, codebook_encoder_args
from .switch import _FAILED, _run, _usable

__all__ = [
    "codebook_square_sums",
    "decodes_without_gather",
    "fused_codebook_block_sums",
    "fused_int_block_sums",
    "row_square_sums",
]

_F32_MAX = torch.finfo(torch.float32).max

# -- kernel bodies: sums of squares of given tensors -------------------------------------------


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


# -- kernel bodies of the fused pass: quantize, dequantize and the error sums in one loop -----


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


_ONE_LOOP = {
    "realize_reads_threshold": 1_000,
    "realize_cpu_opcount_threshold": 10_000,
    "realize_cpu_acc_reads_threshold": 1_000,
}
"""Inductor settings for the fused passes: ``D²`` feeds two sums, and Inductor stores a
value that several reductions read once its formula reads more than 4 inputs or passes 50
operations (a full-size buffer written, then read by a second loop: 2x to 4x the time
here); these thresholds keep both sums in the loop that computes ``D``."""


# -- entry points: each returns None where the caller's reference must run --------------------


def _pair(out: Any, weighted: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A kernel's result as ``(plain, weighted)`` sums (the plain twice without ``a``), or
    ``None`` for a failed compile."""
    if out is _FAILED:
        return None
    return out if weighted else (out, out)


def _weights(a: torch.Tensor, like: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The importance ``a`` (``[in]``, any float dtype) as float32 on ``like``'s device,
    viewed ``shape`` to broadcast over the rows."""
    return a.to(device=like.device, dtype=torch.float32).reshape(shape)


def row_square_sums(
    x: torch.Tensor, y: torch.Tensor | None = None, a: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per row of 2-D float32 ``x`` ``[out, in]``, in float32 ``[out]``: ``(Σ_j D_j²,
    Σ_j D_j² a_j)`` with ``D = x - y`` (``y`` of ``x``'s shape), or ``D = x`` without ``y``
    (the energy); ``a`` ``[in]`` is rounded to float32 (one more multiplication for the
    weighted sum), and without it both sums are the plain one. One read of ``x`` and ``y``,
    the same float32 subtraction and square as eager; Inductor's order of summation.
    ``None``: run the reference."""
    inputs = (x,) if y is None else (x, y)
    if not _usable(*inputs):
        return None
    args = [t.contiguous() for t in inputs]
    if a is None:
        kernel = _energy_kernel if y is None else _error_kernel
        out = _run(kernel, kernel.__name__.strip("_"), *args)
    else:
        kernel = _energy_weighted_kernel if y is None else _error_weighted_kernel
        out = _run(kernel, kernel.__name__.strip("_"), *args, _weights(a, x, (1, -1)))
    return _pair(out, a is not None)


def codebook_square_sums(
    x: torch.Tensor,
    q: torch.Tensor,
    s: torch.Tensor,
    table: torch.Tensor,
    a: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``row_square_sums(x, x_hat, a)`` with ``x_hat = clamp(table[q] s)``, dequantize's
    formula (the same float32 operations, so the same ``D``), decoded in the pass and never
    stored: ``x`` float32 and ``q`` uint8 codes ``[rows, n, L]`` (a matrix's rows as ``n``
    blocks of ``L``), ``s`` one scale per block (``rows * n`` of them in block order),
    ``table`` the codebook's ``decode_table``, ``a`` ``[in]`` (``in = n L``) or ``None``.
    Sums per row, float32 ``[rows]``; ``None``: run the reference."""
    if not _usable(x, q):
        return None
    s = _per_block(s, x)
    if a is None:
        out = _run(_codebook_kernel, "codebook_error", x, q, s, table)
    else:
        a32 = _weights(a, x, (1, x.shape[1], x.shape[2]))
        out = _run(_codebook_weighted_kernel, "codebook_error_weighted", x, q, s, table, a32)
    return _pair(out, a is not None)


def fused_int_block_sums(
    x: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor | None,
    qmin: int,
    qmax: int,
    *,
    has_zero_point: bool,
    a: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per block of ``x`` (float32 ``[rows, n, L]``: ``n`` blocks of ``L`` consecutive values
    of each row), in float32 ``[rows, n]``: ``(Σ D², Σ D² a)``, ``D = x - x_hat``, with
    ``q = clamp(round((x - m)/s + z), qmin, qmax)`` (``encode_int``'s code) and ``x_hat =
    clamp((q - z) s + m)`` (dequantize's value; ``z`` there only ``has_zero_point``), in one
    loop that stores neither. ``s``, ``z``, ``m`` (``None``: no offset): one value per
    block, ``rows * n`` of them in block order; ``a`` ``[in]`` (``in = n L``) rounded to
    float32, or ``None`` (both sums the plain one). ``None``: run the reference."""
    if not _usable(x):
        return None
    s = _per_block(s, x)
    z = z.reshape(s.shape).to(torch.int32)
    m = _per_block(m, x) if m is not None else torch.zeros_like(s)
    zd = z if has_zero_point else torch.zeros_like(z)
    bounds = torch.tensor([qmin, qmax], dtype=torch.float32)
    args = (x, s, z, m, zd, m, bounds[0], bounds[1])
    if a is None:
        kernel = _int_fused_kernel
    else:
        kernel = _int_fused_weighted_kernel
        a32 = _weights(a, x, (1, x.shape[1], x.shape[2]))
        args = (*args, a32, torch.ones_like(a32))
    out = _run(kernel, kernel.__name__.strip("_"), *args, options=_ONE_LOOP)
    return _pair(out, a is not None)


def fused_codebook_block_sums(
    x: torch.Tensor,
    encode_scale: torch.Tensor,
    cb: Codebook,
    inverse: torch.Tensor | None,
    s: torch.Tensor,
    a: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``fused_int_block_sums`` for codebook ``cb``: the code is ``encode_codebook``'s
    (``encode_scale`` to divide by, or ``inverse`` to multiply by; NF4 multiplies by its
    clamped reciprocal), ``x_hat = clamp(table[q] s)`` as ``decode_codebook``'s compiled
    kernels find it (from the code's bits for the float formats, a tree of selects for
    the other tables: the table's entry exactly, no gather). ``encode_scale``,
    ``inverse``, ``s``: one value per block, ``rows * n`` of them in block order. ``None``:
    run the reference, and always where ``decode_codebook`` gathers (see
    ``decodes_without_gather``)."""
    if not decodes_without_gather(cb.decode_table) or not _usable(x):
        return None
    weighted = a is not None
    _, enc_args, enc_name = codebook_encoder_args(x, encode_scale, cb, inverse)
    multiply = inverse is not None or cb.format in RECIPROCAL_FORMATS
    kernel = _codebook_fused_kernel(cb.format, multiply, weighted)
    extra = () if _minifloat(cb.format) is not None else (cb.decode_table,)
    args = (*enc_args, _per_block(s, x), *extra)
    if weighted:
        a32 = _weights(a, x, (1, x.shape[1], x.shape[2]))
        args = (*args, a32, torch.ones_like(a32))
    name = f"fused_{enc_name}" + ("_weighted" if weighted else "")
    return _pair(_run(kernel, name, *args, options=_ONE_LOOP), weighted)


def decodes_without_gather(table: torch.Tensor) -> bool:
    """Whether ``decode_codebook`` decodes this table without a gather (as the fused pass
    does): a float format's, or one of at most ``SMALL_TABLE_MAX`` entries, a power of 2."""
    return _minifloat_for_table(table) is not None or _by_selects(table.shape[0])
