"""Entry points of the compiled passes: each runs its kernel when the compiled path may
(``switch._usable``) and returns ``None`` where the eager path must run instead."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch

from ..config import Format
from ..formats import NF4_MIN_SCALE, Codebook
from ..formats.codebooks import RECIPROCAL_FORMATS
from .bodies import (
    _ENCODE,
    _ENCODE_STOCHASTIC,
    _ENCODE_VALUES,
    _FLOAT8,
    _abs_sum_kernel,
    _beyond_kernel,
    _bin_kernel,
    _by_selects,
    _codebook_encoder,
    _codebook_values_body,
    _decode_offset,
    _decode_scale,
    _decode_small_table,
    _decode_table,
    _decode_zero_point,
    _decode_zero_point_offset,
    _error_sums_kernel,
    _extremes_kernel,
    _fp4_rounding_values_body,
    _int_squared_error_kernel,
    _minifloat_decoder,
    _minifloat_for_table,
    _tile_extremes_kernel,
    canonical_zeros,
    fp8_rounding_encoder,
)
from .switch import _FAILED, _run, _usable

__all__ = [
    "absmean",
    "bin_indices",
    "canonical_zeros",
    "count_beyond",
    "decode_codebook",
    "decode_int",
    "decode_int_offset",
    "encode_codebook",
    "encode_codebook_values",
    "encode_int",
    "encode_int_values",
    "encode_values_with",
    "error_sums",
    "extremes",
    "int_squared_error",
    "tile_extremes",
]

# -- entry points: each returns None where the eager path must run ---------------------------


def extremes(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per row of ``blocks`` (2-D float32), ``(min, max)`` as ``[n_rows, 1]`` (NaN
    propagates; a zero extreme is ``+0``), or ``None``: run eagerly."""
    if blocks.dtype != torch.float32 or not _usable(blocks):
        return None
    out = _run(_extremes_kernel, "extremes", _kernel_layout(blocks))
    return None if out is _FAILED else out


def tile_extremes(grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per tile of a matrix viewed ``[R/r, r, C/c, c]`` (float32, contiguous), ``(min,
    max)`` as ``[n_tiles, 1]`` in ``PerBlock``'s tile order (row of tiles by row), as
    ``extremes`` gives them for the tiles gathered into rows, without gathering them;
    ``None``: run eagerly."""
    if grid.dtype != torch.float32 or grid.dim() != 4 or not grid.is_contiguous():
        return None
    if not _usable(grid):
        return None
    out = _run(_tile_extremes_kernel, "tile_extremes", grid)
    if out is _FAILED:
        return None
    return out[0].reshape(-1, 1), out[1].reshape(-1, 1)


def _per_block(t: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
    """One value per block as a kernel takes it: ``[n, 1]`` for ``[n, L]`` blocks; for a
    4-D tile view ``[R/r, r, C/c, c]`` of a matrix, ``[R/r, 1, C/c, 1]``."""
    if blocks.dim() == 2:
        return _column(t)
    if blocks.dim() == 3:  # [rows, blocks per row, L]: a matrix's row-run blocks
        return t.reshape(blocks.shape[0], blocks.shape[1], 1).to(torch.float32)
    return t.reshape(blocks.shape[0], 1, blocks.shape[2], 1).to(torch.float32)


def _kernel_layout(blocks: torch.Tensor) -> torch.Tensor:
    """``blocks`` as a kernel takes it: contiguous, or the transpose of a contiguous
    matrix (``PerChannel(1)``), else a contiguous copy, so few layouts reach Dynamo."""
    if blocks.is_contiguous() or blocks.t().is_contiguous():
        return blocks
    return blocks.contiguous()


def _column(t: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One value per row as an ``[n, 1]`` tensor of ``dtype`` (a view when it is one)."""
    return t.reshape(-1, 1).to(dtype)


def encode_int(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: int,
    qmax: int,
    dtype: torch.dtype,
    noise: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Integer codes ``clamp(round((r - m)/s + z), qmin, qmax)`` of ``blocks`` (float32
    ``[n, L]``; ``s``, ``z``, ``m`` one value per row), as ``dtype`` (int8 or int16); with
    ``noise`` (``U[0, 1)``, ``blocks``' shape) ``clamp(floor((r - m)/s + z + u))`` instead.
    ``None``: run eagerly."""
    tensors = (blocks,) if noise is None else (blocks, noise)
    if blocks.dtype != torch.float32 or dtype not in _ENCODE or not _usable(*tensors):
        return None
    bounds = torch.tensor([qmin, qmax], dtype=torch.float32)
    args = (
        _kernel_layout(blocks),
        _column(s),
        _column(z, torch.int32),
        _column(m),
        bounds[0],
        bounds[1],
    )
    if noise is None:
        out = _run(_ENCODE[dtype], "encode", *args)
    else:
        out = _run(_ENCODE_STOCHASTIC[dtype], "encode_stochastic", *args, noise)
    return None if out is _FAILED else out


def encode_int_values(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: int,
    qmax: int,
    dtype: torch.dtype,
    stored: tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None],
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``encode_int``'s nearest-rounded codes and, in the same pass, the float32 values
    that ``decode_int`` / ``decode_int_offset`` make of them under ``stored = (s, z, m)``
    (the stored scale, the zero point where the decode subtracts one, the offset where it
    adds one; one per row): one pass over ``blocks`` instead of the codes' write, their
    conversion to float32 and the decode's pass. ``None``: run ``encode_int`` and decode.

    int8 codes only: with int16 codes (bits 9 to 16) the compiled pass's values differed
    from the decode's on a probe (not pursued), so those run the two passes."""
    if blocks.dtype != torch.float32 or dtype != torch.int8 or not _usable(blocks):
        return None
    sd, zd, md = stored
    if md is not None:
        convention = "offset" if zd is None else "zero_point_offset"
    else:
        convention = "scale" if zd is None else "zero_point"
    zero = torch.zeros(1, 1)
    bounds = torch.tensor([qmin, qmax], dtype=torch.float32)
    args = (
        _kernel_layout(blocks),
        _column(s),
        _column(z, torch.int32),
        _column(m),
        bounds[0],
        bounds[1],
        _column(sd),
        zero.to(torch.int32) if zd is None else _column(zd, torch.int32),
        zero if md is None else _column(md),
    )
    out = _run(_ENCODE_VALUES[dtype, convention], f"encode_values_{convention}", *args)
    return None if out is _FAILED else out


def int_squared_error(
    blocks: torch.Tensor, s: torch.Tensor, z: torch.Tensor, m: torch.Tensor, qmin: int, qmax: int
) -> torch.Tensor | None:
    """``(r - r_hat)^2`` (float32, ``blocks``' shape) with ``r_hat = clamp((q - z) s + m)``
    and ``q`` the nearest-rounded integer code; one pass instead of the eager path's chain,
    the same operations in the same order, so the same bits. ``None``: run eagerly."""
    if blocks.dtype != torch.float32 or not _usable(blocks):
        return None
    bounds = torch.tensor([qmin, qmax], dtype=torch.float32)
    args = (_kernel_layout(blocks), _column(s), _column(z, torch.int32), _column(m))
    out = _run(_int_squared_error_kernel, "squared_error", *args, bounds[0], bounds[1])
    return None if out is _FAILED else out


def _float_codes(codes: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """``codes`` converted to float32 (exact) as a decode kernel takes them, written into
    ``out`` when its strides fit, else into a new tensor."""
    src = _kernel_layout(codes)
    with torch.inference_mode(False):
        # The kernel writes in place outside autograd and inference mode: a tensor either
        # would refuse that (and a failure turns the compiled path off), so it is not used.
        if (
            out is not None
            and out.dtype == torch.float32
            and not out.requires_grad
            and not out.is_inference()
            and out.shape == src.shape
            and out.stride() == src.stride()
        ):
            return out.copy_(src)
        return src.to(torch.float32)


def decode_int(
    codes: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor | None,
    m: torch.Tensor | None,
    out: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Dequantized float32 values of integer ``codes`` ``[n, L]``: ``clamp(s q + m)`` with
    offsets ``m``, else ``clamp((q - z) s)`` with zero points ``z``, else ``clamp(s q)``
    (one ``s``, ``z``, ``m`` per row; ``clamp`` to float32's finite range); ``None``: run
    eagerly.

    Two passes: torch's own ``codes.to(float32)`` (exact), then the compiled affine map in
    place. Inductor loads 8-bit integers a lane group at a time through a stack copy (on
    AVX2), which made one fused kernel slower than the two: the conversion streams at
    memory speed, and the second pass reads what the first wrote.

    ``out``: a float32 tensor of ``codes``' shape to write into, used (and returned) when
    its strides are those of ``codes`` as the kernel takes them; else a new one is."""
    if codes.dtype not in _ENCODE or not _usable(codes):
        return None
    out = _float_codes(codes, out)
    if m is not None:
        done = _run(_decode_offset, "decode", out, _column(s), _column(m))
    elif z is not None:
        done = _run(_decode_zero_point, "decode", out, _column(s), _column(z, torch.int32))
    else:
        done = _run(_decode_scale, "decode", out, _column(s))
    return None if done is _FAILED else out


def decode_int_offset(
    codes: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """``clamp((q - z) s + m)`` of integer ``codes`` ``[n, L]`` (one ``s``, ``z``, ``m``
    per row): GGUF's ``d u + min`` with ``u = q - qmin``; as ``decode_int`` otherwise."""
    if codes.dtype not in _ENCODE or not _usable(codes):
        return None
    out = _float_codes(codes, out)
    done = _run(
        _decode_zero_point_offset,
        "decode",
        out,
        _column(s),
        _column(z, torch.int32),
        _column(m),
    )
    return None if done is _FAILED else out


def encode_codebook(
    blocks: torch.Tensor, s: torch.Tensor, cb: Codebook, inverse: torch.Tensor | None = None
) -> torch.Tensor | None:
    """uint8 codes of ``blocks`` (float32 ``[n, L]``) under codebook ``cb`` with nearest
    rounding, ``s`` one scale per row (or ``inverse``, one reciprocal per row to multiply
    by); ``None``: run eagerly. A 4-D tile view ``[R/r, r, C/c, c]`` of a matrix takes
    its scales in tile order and gives codes in the matrix's own layout (``PerBlock``
    without gathering tiles into rows)."""
    if blocks.dtype != torch.float32 or not _usable(blocks):
        return None
    kernel, args, name = codebook_encoder_args(blocks, s, cb, inverse)
    out = _run(kernel, name, *args)
    return None if out is _FAILED else out


def codebook_encoder_args(
    blocks: torch.Tensor,
    s: torch.Tensor,
    cb: Codebook,
    inverse: torch.Tensor | None = None,
    raw: bool = False,
) -> tuple[Any, tuple[torch.Tensor, ...], str]:
    """``encode_codebook``'s kernel body, its arguments (``blocks`` first) and its name:
    ``blocks`` 2-D ``[n, L]``, 3-D ``[rows, n, L]`` (one ``s`` per ``[rows, n]``) or a
    4-D tile view. Shared with the table's fused error pass (``error_passes``), which traces
    the same body. ``raw``: the encoder that gives int32 codes (``_codebook_encoder``)."""
    multiply = inverse is not None or cb.format in RECIPROCAL_FORMATS
    kernel = _codebook_encoder(cb.format, multiply=multiply, raw=raw)
    if inverse is not None:
        args: tuple[torch.Tensor, ...] = (_kernel_layout(blocks), _per_block(inverse, blocks))
        if cb.format not in _FLOAT8:
            args = (*args, cb.codes)
    elif cb.format in _FLOAT8:
        args = (_kernel_layout(blocks), _per_block(s, blocks))
    elif cb.format in RECIPROCAL_FORMATS:
        # bitsandbytes' 1 / max(s, 1e-38), as the eager path
        inv = _per_block(s, blocks).clamp(min=NF4_MIN_SCALE).reciprocal()
        args = (_kernel_layout(blocks), inv, cb.codes)
    else:
        args = (_kernel_layout(blocks), _per_block(s, blocks), cb.codes)
    # the compiled variant is keyed by name: one per format and per division/multiplication
    name = f"codebook_{cb.format.value}" + ("_inverse" if inverse is not None else "")
    return kernel, args, name


def encode_codebook_values(
    blocks: torch.Tensor,
    s: torch.Tensor,
    cb: Codebook,
    inverse: torch.Tensor | None,
    scale: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``encode_codebook``'s uint8 codes of ``blocks`` (float32 ``[n, L]``) and, in the
    same pass, the float32 values that ``decode_codebook`` makes of them with ``scale``
    (the stored scale, one per row) and ``cb``'s ``decode_table``: one read of ``blocks``
    instead of the codes' write, their conversion to float32 and the decode's pass.
    ``None``: run ``encode_codebook`` and decode.

    The value of each code is the decode kernel's own formula on the same code, converted
    to float32 as torch converts it (exact): the float formats (FP4, FP6, FP8) from the
    code's bits (``_minifloat_values``), other tables of up to ``SMALL_TABLE_MAX`` entries
    by the decode's tree of selects, each scaled and clamped in the decode's order. Larger
    tables (a gather) are not fused. FP8 with the float8 cast's codes was slower in one
    pass than in two (its lanes Inductor converts to integers slowly: 4096 x 4096 FP8
    E4M3 in blocks of 32, one thread, minimum of 11: 96 ms against 79 ms encode + decode;
    FP4 52 against 60, NF4 67 against 88, ternary 50 against 58, FP6 54 against 55, a
    16-19 ms clone), so FP8 rounds the float32 bits instead (``_FP8_ROUNDING``,
    ``bodies.fp8_rounding_encoder``: the cast's codes). FP4 by rounding too
    (``_FP4_ROUNDING``): the nearest level and its entry from ``round(|v| / spacing)``,
    the same codes and values."""
    if blocks.dtype != torch.float32 or blocks.dim() != 2:
        return None
    if not _usable(blocks):
        return None
    table = cb.decode_table
    fmt = _minifloat_for_table(table)
    if cb.format in _FLOAT8:
        if not _FP8_ROUNDING or fmt is not cb.format:
            return None
        encoder = fp8_rounding_encoder(cb.format, inverse is not None)
        factor = s if inverse is None else inverse
        body = _codebook_values_body(encoder, fmt)
        name = f"codebook_{cb.format.value}" + ("_inverse" if inverse is not None else "")
        out = _run(
            body,
            f"{name}_rounded_values",
            _kernel_layout(blocks),
            _per_block(factor, blocks),
            _column(scale),
        )
        return None if out is _FAILED else out
    if fmt is None and not _by_selects(table.shape[0]):
        return None
    kernel, args, name = codebook_encoder_args(blocks, s, cb, inverse, raw=True)
    if _FP4_ROUNDING and cb.format is Format.FP4_E2M1 and fmt is Format.FP4_E2M1:
        body = _fp4_rounding_values_body(inverse is not None)
        out = _run(body, f"{name}_rounded_values", *args, _column(scale))
        return None if out is _FAILED else out
    body = _codebook_values_body(kernel, fmt)
    extra = (_column(scale),) if fmt is not None else (_column(scale), table)
    out = _run(body, f"{name}_values", *args, *extra)
    return None if out is _FAILED else out


def encode_values_with(
    encoder: Callable[..., torch.Tensor],
    name: str,
    table: torch.Tensor,
    scale: torch.Tensor,
    blocks: torch.Tensor,
    *args: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """A caller's codebook encoder and the decode in one compiled pass: the uint8 codes
    ``encoder(blocks, *args)`` (int32 in the loop: the stored codes' numbers; ``blocks``
    float32 ``[n, L]``) and the float32 values that ``decode_codebook`` makes of them with
    ``scale`` (the stored scale, one per row) and ``table`` (the codebook's
    ``decode_table``), as ``encode_codebook_values`` does for the lab's own encoders: for
    llama.cpp's quantizers, whose rounding is not the lab's (MXFP4's ties towards zero,
    Q1_0's sign bit, IQ4's nearest level). ``name`` keys the compiled variant: one per
    ``encoder``. ``None`` (the eager path, a table read by a gather): encode, then decode.
    """
    if blocks.dtype != torch.float32 or blocks.dim() != 2 or not _usable(blocks):
        return None
    fmt = _minifloat_for_table(table)
    if fmt is None and not _by_selects(table.shape[0]):
        return None
    body = _codebook_values_body(encoder, fmt)
    extra = (_column(scale),) if fmt is not None else (_column(scale), table)
    out = _run(body, f"{name}_values", _kernel_layout(blocks), *args, *extra)
    return None if out is _FAILED else out


_FP8_ROUNDING = True
"""FP8's fused pass (E4M3, E5M2: MXFP8) encodes by rounding the float32 bits
(``bodies.fp8_rounding_encoder``) instead of the float8 cast, whose lanes Inductor
converts in a scalar loop, and decodes the code's bits in the same loop: one pass instead
of the cast's encode, the codes' conversion to float32 and the decode. ``False``: encode,
then decode (the tests compare the two)."""

_FP4_ROUNDING = True
"""FP4's fused pass rounds (``bodies._fp4_rounding_values_body``) instead of counting
midpoints and decoding the code's bits: the same codes and values, in fewer operations
(4096 x 4096, one thread, median of 9, alternating in one process: MXFP4's
quantize_dequantize 75 -> 62 ms, NVFP4's 102 -> 88 ms, against a 16 ms clone). ``False``
runs the counting pass (the tests compare the two)."""


def decode_codebook(
    codes: torch.Tensor, s: torch.Tensor, table: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor | None:
    """``clamp(s * table[q])`` (float32) of uint8 codebook ``codes`` ``[n, L]``, one ``s``
    per row, ``table`` the codebook's ``decode_table``; ``None``: run eagerly. Codes of
    another rank take ``s`` of their rank, broadcast (``PerBlock`` tiles: codes
    ``[R/r, r, C/c, c]``, a view of the matrix, and ``s`` ``[R/r, 1, C/c, 1]``), so the
    result comes out in the matrix's own layout, without gathering tiles into rows.

    Tables of up to ``SMALL_TABLE_MAX`` entries (NF4, IQ4_NL, ternary): as ``decode_int``, torch
    converts the codes to float32 (exact; into ``out`` when its strides fit), then a
    compiled tree of selects replaces them in place by their scaled entries, one variant
    per table size; one kernel reading the uint8 codes itself was slower (see
    ``decode_int``). The float formats (FP4, FP6, FP8) need no table: the same two passes,
    the second computing each entry from the code's bits (``bodies._minifloat_values``),
    which 4096 x 4096 FP8 codes decode in about a copy's time where the gather of its 256
    entries took 2.5 copies. Other large tables: one compiled gather."""
    if codes.dtype != torch.uint8 or not _usable(codes):
        return None
    # [n, L] codes: one scale per row; else (tiles) ``s`` already broadcasts to ``codes``
    scales = _column(s) if codes.dim() == 2 else s.to(torch.float32)
    n = table.shape[0]
    fmt = _minifloat_for_table(table)
    if fmt is not None:
        out = _float_codes(codes, out)
        done = _run(_minifloat_decoder(fmt), f"decode_minifloat_{fmt.value}", out, scales)
        return None if done is _FAILED else out
    if not _by_selects(n):
        out = _run(_decode_table, "decode_table", _kernel_layout(codes), table, scales)
        return None if out is _FAILED else out
    out = _float_codes(codes, out)
    done = _run(_decode_small_table, f"decode_table{n}", out, table, scales)
    return None if done is _FAILED else out


@functools.cache
def _float64_options() -> dict[str, Any] | None:
    """Inductor settings for the float64 sums: 256-bit vectors where Inductor would pick
    512-bit ones. Its AVX-512 float32 -> float64 conversion is slow: on this project's
    2-core Xeon (AVX-512, AMX), ``error_sums`` of two 11.7M-value float32 tensors took 33 ms
    with 512-bit vectors and 12.5 ms with 256-bit ones (``torch==2.13.0``). ``None`` (the
    default ISA) elsewhere, and where the ISA cannot be told."""
    try:
        from torch._inductor.cpu_vec_isa import pick_vec_isa

        wide = pick_vec_isa().bit_width() > 256
    except Exception:  # a private module: its absence or change leaves the default
        return None
    return {"cpp.simdlen": 256} if wide else None


def error_sums(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
    """``[sum d^2, sum |d|, max |d|, sum a^2, sum b^2, sum a b]`` (float64, ``d = a - b``)
    of two 1-D float32 tensors in one pass, or ``None``: run eagerly. Sums follow Inductor's
    order, so they may differ from the eager path's in the last bits."""
    if a.dtype != torch.float32 or b.dtype != torch.float32 or not _usable(a, b):
        return None
    out = _run(
        _error_sums_kernel,
        "error_sums",
        a.contiguous(),
        b.contiguous(),
        options=_float64_options(),
    )
    return None if out is _FAILED else out


_U = 2.0**-53
"""float64's unit roundoff: one rounded addition is ``(a + b)(1 + d)``, ``|d| <= u``."""
_SPLIT_MIN = 1 << 16
"""Rows of at least this many values are summed as ``m`` pieces of ``c`` (``absmean``)."""


def _gamma(k: int) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)``: float64 additions of non-negative terms in
    which no term goes through more than ``k`` roundings give ``S (1 + t)``, ``|t| <=
    gamma_k`` (Higham, *Accuracy and Stability of Numerical Algorithms*, section 4.2)."""
    return k * _U / (1.0 - k * _U)


@functools.lru_cache(maxsize=64)
def _pieces(length: int) -> int:
    """``m``, the number of pieces a row of ``length`` values is summed in: the largest
    divisor of ``length`` not above its square root (so the pieces, ``c = length / m``
    long, are at least as long as there are pieces), or 1 for rows below ``_SPLIT_MIN``."""
    if length < _SPLIT_MIN:
        return 1
    for m in range(math.isqrt(length), 0, -1):
        if length % m == 0:
            return m
    return 1


def absmean(blocks: torch.Tensor) -> torch.Tensor | None:
    """``mean |r|`` of each row of ``blocks`` (float32 ``[n, L]``) as float32 ``[n, 1]``,
    the very float the eager path's float64 mean rounds to, or ``None``: run eagerly.

    The eager path computes ``a = f32(f64(S_t / L))``, ``S_t`` torch's float64 sum of the
    ``|r|`` (exact in float64) in torch's own order, which depends on the thread count,
    the layout and the torch version (``mean`` is that sum then a true division by ``L``;
    the tests check it). Here: one compiled pass gives ``m`` partial float64 sums of ``c``
    values per row (``m c = L``, see ``_pieces``), added eagerly into ``S``. Both are
    trees of rounded float64 additions of the same non-negative terms (no underflow: a
    nonzero partial sum is at least ``2^-149``, far above float64's smallest normal; no
    overflow: ``L * 2^128 < 2^1024``), so with ``S*`` the exact sum

    - ``S_t = S* (1 + t)``, ``|t| <= gamma_{L-1}`` (a term goes through at most ``L - 1``
      additions, in whatever order torch adds), and
    - ``S = S* (1 + t')``, ``|t'| <= gamma_h``, ``h = (c - 1) + (m - 1)``,

    hence ``S_t`` lies in ``[S (1 - r), S (1 + r)]`` with ``r`` of ``_window``. Since
    ``x -> f32(f64(x / L))`` does not decrease, when both ends give the same float32, that
    float is ``a``; otherwise (a float32 rounding boundary inside the window: for a 4096 x
    4096 tensor ``r`` is about ``2^-29``, which catches 3 to 6 % of tensors) ``None``,
    and the eager path computes ``a`` itself. One read of ``blocks`` instead of a float64
    copy of it (4096 x 4096, one thread: ~100 ms -> ~5 ms)."""
    if blocks.dtype != torch.float32 or blocks.dim() != 2 or not _usable(blocks):
        return None
    n, length = blocks.shape
    m = _pieces(length) if blocks.is_contiguous() else 1
    parts = _kernel_layout(blocks) if m == 1 else blocks.view(n, m, length // m)
    partial = _run(_abs_sum_kernel, "abs_sum", parts, options=_float64_options())
    if partial is _FAILED:
        return None
    r = _window(length, (length // m - 1) + (m - 1))
    if r is None:
        return None
    total = partial.reshape(n, -1).sum(dim=1, keepdim=True)
    lo = (total * (1.0 - r) / length).to(torch.float32)
    hi = (total * (1.0 + r) / length).to(torch.float32)
    if not torch.equal(lo, hi):  # NaN (from an Inf) is unequal too: eager decides
        return None
    return hi


def _window(length: int, h: int) -> float | None:
    """``r`` with ``S_t`` in ``[S (1 - r), S (1 + r)]`` (``absmean``), or ``None`` for
    rows too long to bound this way (``gamma_h > 2^-11``, beyond ``2^41`` values).

    ``S* = S / (1 + t')``, so ``S_t / S`` lies within ``(1 - gamma_t) / (1 + gamma_h)``
    and ``(1 + gamma_t) / (1 - gamma_h)``, within ``1 -+ (gamma_t + gamma_h) (1 +
    2^-10)`` when ``gamma_h <= 2^-11``; ``2^-50`` more covers the roundings of ``1 -+ r``
    and of the products by them (at most ``u`` each)."""
    g_h = _gamma(h)
    if g_h > 2.0**-11 or length - 1 >= 1 / _U:
        return None
    return (_gamma(length - 1) + g_h) * (1.0 + 2.0**-10) + 2.0**-50


def count_beyond(
    blocks: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor
) -> tuple[int, int] | None:
    """How many entries of ``blocks`` (float32 ``[n, L]``) lie below their row's ``lo`` and
    above its ``hi`` (one value per row), in one pass; counts are exact in any order.
    ``None``: run eagerly."""
    if blocks.dtype != torch.float32 or not _usable(blocks):
        return None
    out = _run(_beyond_kernel, "beyond", _kernel_layout(blocks), _column(lo), _column(hi))
    if out is _FAILED:
        return None
    return int(out[0]), int(out[1])


def bin_indices(
    x: torch.Tensor, lo: torch.Tensor, per_unit: torch.Tensor, top: torch.Tensor
) -> torch.Tensor | None:
    """uint8 ``clamp(floor((x - lo) * per_unit), 0, top)`` of a 1-D float32 ``x`` (0-d
    float32 ``lo``, ``per_unit``, ``top``; ``top`` <= 255), the eager formula's operations
    in its order. ``None``: run eagerly."""
    if x.dtype != torch.float32 or not _usable(x):
        return None
    out = _run(_bin_kernel, "bins", x.contiguous(), lo, per_unit, top)
    return None if out is _FAILED else out
