"""llama.cpp's reference quantizers (``quantize_row_*_ref`` in ggml-quants.c, as llama.cpp's
``gguf`` package ports them to numpy), for ``Recipe.LLAMA_CPP`` configs: the same float32
operations in the same order, so the codes and scales, and so the GGUF bytes, are
llama.cpp's.

Legacy types, per block of 32 (``d``, ``min`` stored as fp16, computed in float32):

- Q4_0 / Q5_0: ``max`` = the value of largest magnitude (the first, on ties), signed;
  ``d = max / -8`` (``/ -16``), ``id = 1/d`` (0 when ``d = 0``), stored code
  ``u = min(15, trunc(x id + 8.5))`` (``31``, ``16.5``); ``x_hat = d (u - 8)``: the largest
  magnitude lands exactly on level -8, the grid's one-sided end.
- Q4_1 / Q5_1: ``d = (max - min) / 15`` (31), ``u = min(15, trunc((x - min) id + 0.5))``,
  ``x_hat = d u + min``.
- Q8_0: ``d = amax / 127``, ``q = roundf(x id)`` (half away from zero).
- TQ1_0 / TQ2_0 (blocks of 256): ``d = amax``, ``q = roundf(x / d)`` in ``{-1, 0, 1}``.
- MXFP4: ``e = floor(log2 amax) - 2 + 127``, each value the FP4 level nearest to it on
  ``2^(e - 127)``, an exact tie going to the level listed first in llama.cpp's table
  (``0, 0.5, 1, ... 6``, then ``-0, -0.5, ...``): towards zero, and ``+0`` for ``-0``.
- Q1_0 (blocks of 128): ``d = (sum |x|) / 128``, the sum in float32 in the block's order
  (``((0 + |x_0|) + |x_1|) + ...``), a set bit for ``x >= 0`` (``-0`` included).
- NVFP4 (blocks of 64, scaled per 16): ``ue = ue4m3(amax / 6)`` (llama.cpp's rounding,
  ``ue4m3_from_float``), each value the FP4 level nearest to it on ``ue4m3(ue)``, ties as
  MXFP4's.

Here every code is the lab's: ``q = u - 8`` (``- 16``) for Q4_0/Q5_0, ``q = u + qmin`` with
``z = qmin`` and ``m = min`` for Q4_1/Q5_1 (``x_hat = s (q - qmin) + m``), ternary and FP4
codes as stored. The K-quants and IQ4 types live in ``kquants``.

Where ``x id`` (or ``(x - min) id``) is not finite (a block whose ``d`` is subnormal, so
``1/d = inf``; Q4_1/Q5_1's ``max - min`` overflowing) the stored code is 0, as llama.cpp's
float-to-int casts and the ``gguf`` package give it on x86 (``_finite_or_zero``).

Each type's large passes run as compiled kernels where ``quant_core.kernels`` allows (the
same bits): one pass per type, each block's extremes and its codes (Q4_0/Q5_0 redo the rare
blocks whose max and min tie in magnitude eagerly; Q4_1/Q5_1 those with a zero extreme).

``quantize_dequantize`` of NVFP4_GGUF, MXFP4_GGUF and Q1_0 (December 7, branch ``fmt7``):
profiled first (4096 x 4096 float32, huge pages, 2 threads, load 3 to 4): after the
compiled passes came eager steps over the blocks' columns, each a fifth to a third of a
clone there: ``isfinite(amax).all()`` over NVFP4's 1M blocks, a fresh ``torch.zeros`` for
the zero points (the 4 MiB fill was the one costly ``aten::fill_``), ``scales_finite``'s
``aminmax`` over the scales; Q1_0 also read ``x`` once more for the finiteness check
(``block_extremes``). The ``aten::fill_`` calls that torch's profiler counts (walked
up ``cpu_parent``): the initial values of small reductions, ``amin``/``amax``/``all`` on
``[1, 1]`` outputs, 3 per piece of ``map_rows`` in ``quantize._all_finite_rows`` (Q1_0's
131K blocks: 6 pieces, 18 of its 22 fills; 32-value blocks at 4096 x 4096: 22 pieces, so
~66: the ~70 seen before), 2 in ``scales_finite``'s ``aminmax``, microseconds each; and
one costly one, the zero points' fresh ``torch.zeros`` (NVFP4_GGUF 7.5 ms, the lab's
MXFP4 15.5 ms in ``scales._zeros``, loaded). NVFP4_GGUF and Q1_0 now make none. Now the scale
passes reduce their peaks to ``[1, 1]`` (``_peak``), Q1_0's largest sum is its finiteness
check (a sum of ``|x|`` is finite only where the values are; where it overflowed on
finite values the caller checks them), the FP4 scales are finite by construction and
Q1_0's checked in its pass (``Quantized.finite_scales``), the zero points one zero
expanded. NVFP4_GGUF's codes-and-values pass (3.5 to 4 clones alone) counts midpoints
instead of the running minimum of errors (``_mxfp4_code_numbers_counted``, the same
codes below ``2^20 d_half``) and adds each value's level up beside the count
(``_fp4_counted_values``): 104 against 129 ms for the pass (clone 37 ms, loaded); the
counting alone, decoding the code's bits after, gained only ~5%. Base ``b67516b`` against
this, alternating fresh processes, 6 pairs of medians of 9, ratios to the clone timed in
the same process, load 2.1 to 4.2: NVFP4_GGUF 5.4 -> 3.9x, Q1_0 4.2 -> 3.0x, head ahead in
every pair (noisy: single pairs 4.7 -> 4.0 to 6.8 -> 3.5); ``python -m quant_core.bench``
on the head alone at load 4.4: 4.93 and 3.72. Left: NVFP4_GGUF's pass writes 80 MB of
fresh pages (an ``empty`` + ``fill_`` of its two outputs alone took 1.5 clones there);
Q1_0's two reads of ``x`` (the C-order sums, then codes and values). Re-timed December 7
(fourteenth stop, ``bench_formats.time_format``, two threads, load 3.5 to 5, medians of 3
runs of 9): NVFP4_GGUF 3.95x the clone, Q1_0 3.52x, and MXFP4_GGUF, which shares the FP4
counting, 3.90x: no faster than NVFP4_GGUF; ``python -m quant_core.bench`` at load 1.2
to 1.7, twice: NVFP4_GGUF 3.03 and 3.01, Q1_0 3.29 and 3.30, MXFP4_GGUF 3.06 and 4.77.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..config import Format, QuantConfig, Recipe
from ..granularity import BlockLayout
from ..kernels import encode_values_with, switch
from ..kernels.bodies import clamp_finite_by_selects
from .codebooks import codebook_for
from .gguf_types import gguf_type_of
from .scales import BlockParams, StoredScales, power_of_two

__all__ = [
    "Quantized",
    "check_importance",
    "checks_finiteness",
    "fuses_values",
    "fuses_values_compiled",
    "quantize_blocks",
    "roundf",
    "ue4m3_from_float",
]


@dataclass(frozen=True)
class Quantized:
    """``quantize_blocks``' result for ``[n_blocks, block_len]`` blocks: ``codes`` (their
    shape), ``params`` (each ``[n_blocks, 1]``) and, for the types of
    ``checks_finiteness``, ``peaks`` ``[n_blocks, 1]``: a value each block's pass reduced
    from all its values (its largest magnitude, signed or not), finite exactly when they all
    are, or ``[1, 1]``: the largest of those over all blocks (MXFP4, NVFP4: reduced in
    their scale pass; Q1_0: its largest sum of ``|x|``, ``None`` where that overflowed);
    ``None`` for the other types. ``values`` (float32, ``codes``' shape): the
    dequantized values, bit for bit what ``QuantizedTensor.dequantize`` makes of ``codes``
    and ``params``, where the caller asked for them and the type has a fused pass
    (``fuses_values``; ``fuses_values_compiled`` where it runs compiled); else ``None``."""

    codes: torch.Tensor
    params: BlockParams
    peaks: torch.Tensor | None = None
    values: torch.Tensor | None = None
    finite_scales: bool = False
    """``True`` where every stored scale is known finite without looking (MXFP4's E8M0
    ``2^(e - 127)``, ``e <= 254``; NVFP4's UE4M3, at most 448) or was checked in the
    type's pass (Q1_0, which then gives ``values`` only when they are): the caller needs no
    ``scales_finite`` pass over them (NVFP4's 1M scales at 4096 x 4096: a fifth of a
    clone)."""


_F32_MAX = torch.finfo(torch.float32).max


def roundf(v: torch.Tensor) -> torch.Tensor:
    """C's ``roundf`` (half away from zero), as the ``gguf`` package computes it:
    ``sign(v) (floor(a) + floor(2 (a - floor(a))))``, ``a = |v|``: every step exact."""
    a = v.abs()
    floored = a.floor()
    return torch.sign(v) * (floored + (2 * (a - floored)).floor())


def _fp16(v: torch.Tensor) -> torch.Tensor:
    """``v`` rounded to float16 (as GGUF stores ``d``), back in float32."""
    return v.to(torch.float16).to(torch.float32)


def _inverse(d: torch.Tensor) -> torch.Tensor:
    return torch.where(d == 0, torch.zeros_like(d), 1.0 / torch.where(d == 0, 1.0, d))


def _finite_or_zero(v: torch.Tensor) -> torch.Tensor:
    """``v`` with every NaN and infinity replaced by ``0``, before it becomes a code.

    ``x id`` is finite except in a block whose ``d`` is subnormal (``1/d = inf``; then
    ``0 * inf = NaN``) or, for Q4_1/Q5_1, whose ``max - min`` overflows (``inf * 0``).
    llama.cpp's ``(int8_t)`` / ``lroundf`` and the ``gguf`` package's ``astype`` turn such
    a value into code 0 on x86 (``cvttss2si``'s 0x80000000, truncated); torch's own
    conversions of NaN differ between its eager and compiled kernels, so it is made 0 here,
    in both paths. Finite values pass unchanged. Such a block stores ``d = 0`` as fp16."""
    return torch.where(torch.isfinite(v), v, torch.zeros_like(v))


def _kernel(fn: Callable[..., Any], *args: torch.Tensor) -> Any:
    """``fn(*args)`` (tensors only) as one compiled pass where ``quant_core.kernels`` runs
    compiled passes (CPU, the compiled backend, ``args[0]`` large enough), else eagerly;
    the same bits either way (Inductor keeps the order of the operations and contracts none
    into an FMA). Eagerly, these formulas are chains of full-size temporaries: Q8_0 over
    4096 x 4096 took 4.7x ``gguf.quants``' numpy."""
    return switch.compiled_or(fn, "llama_cpp", *args)


def _signed_absmax_pass(blocks: torch.Tensor) -> torch.Tensor:
    idx = blocks.abs().argmax(dim=1, keepdim=True)
    return blocks.gather(1, idx)


def _absmax_pass(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.abs().amax(dim=1, keepdim=True)


def _symmetric_codes(blocks: torch.Tensor, inv: torch.Tensor, half: torch.Tensor) -> torch.Tensor:
    """Q4_0/Q5_0's ``min(2 half - 1, trunc(x id + half + 0.5)) - half`` (int8)."""
    u = torch.trunc(_finite_or_zero(blocks * inv + (half + 0.5)))
    u = u.clamp(min=0).clamp(max=2 * half - 1)
    return (u - half).to(torch.int8)


def _q8_codes(blocks: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    return roundf(_finite_or_zero(blocks * inv)).to(torch.int8)


def _zeros(n: int, device: torch.device) -> torch.Tensor:
    """The ``[n, 1]`` int32 zero points of a type without one: a single zero expanded
    (stride 0), read-only. A fresh ``torch.zeros`` of NVFP4's 1M blocks (4096 x 4096) was
    a fill of 4 MiB of new pages, 7 to 15 ms on the loaded 2-core machine: a third of a
    clone, for values every reader takes as 0."""
    return torch.zeros((1, 1), dtype=torch.int32, device=device).expand(n, 1)


def _symmetric_pass(
    blocks: torch.Tensor, half: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_0/Q5_0 in one pass: each block's ``hi = max``, ``lo = min`` and the codes under
    ``d = mx / -half``, ``mx`` the one of larger magnitude (``lo`` only where ``-lo > hi``).
    That is the signed value of largest magnitude except on a tie ``hi = -lo`` (zero
    blocks included), where it is the first one: ``_legacy_symmetric`` redoes those blocks.
    A min/max reduction is cheaper than ``argmax`` and a gather in a compiled kernel."""
    hi = blocks.amax(dim=1, keepdim=True)
    lo = blocks.amin(dim=1, keepdim=True)
    mx = torch.where(-lo > hi, lo, hi)
    return hi, lo, _symmetric_codes(blocks, _inverse(mx / -half), half)


def _legacy_symmetric(blocks: torch.Tensor, cfg: QuantConfig) -> Quantized:
    half = 1 << (cfg.bits - 1)  # 8 for Q4_0, 16 for Q5_0
    half_t = torch.tensor(float(half), device=blocks.device)
    out = switch.try_compiled(_symmetric_pass, "llama_cpp", blocks, half_t)
    if out is None:  # eagerly: the first value of largest magnitude, then the codes
        mx = _signed_absmax_pass(blocks)
        codes = _symmetric_codes(blocks, _inverse(mx / -half), half_t)
    else:
        hi, lo, codes = out
        mx = torch.where(-lo > hi, lo, hi)
        tie = (hi == -lo).reshape(-1)
        if bool(tie.any()):  # the eager path's own steps on those blocks (rows alone)
            rows = blocks[tie]
            mx[tie] = _signed_absmax_pass(rows)
            codes[tie] = _symmetric_codes(rows, _inverse(mx[tie] / -half), half_t)
    s = _fp16(mx / -half)
    return Quantized(codes, BlockParams(s, _zeros(len(s), s.device), None, s), mx)


def _min_pass(
    blocks: torch.Tensor, top: torch.Tensor, qmin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_1/Q5_1 in one pass: each block's ``hi = max``, ``lo = min`` (``[n_blocks, 1]``)
    and its codes ``min(top, trunc((x - lo) id + 0.5)) + qmin`` (int8), ``id = 1/d``
    (0 when ``d = 0``), ``d = (hi - lo) / top``: the eager formulas in their order (``top``
    and ``qmin`` 0-d tensors, so the division stays one). The codes do not depend on the
    sign of a zero ``lo`` or ``d`` (``x - lo`` is then ``+-x``, ``id`` 0 or its value)."""
    hi = blocks.amax(dim=1, keepdim=True)
    lo = blocks.amin(dim=1, keepdim=True)
    d = (hi - lo) / top
    u = torch.trunc(_finite_or_zero((blocks - lo) * _inverse(d) + 0.5))
    u = u.clamp(min=0).clamp(max=top)
    return hi, lo, (u + qmin).to(torch.int8)


def _legacy_min(blocks: torch.Tensor, cfg: QuantConfig) -> Quantized:
    top = (1 << cfg.bits) - 1  # 15 for Q4_1, 31 for Q5_1
    dev = blocks.device
    top_t = torch.tensor(float(top), device=dev)
    qmin_t = torch.tensor(float(cfg.qmin), device=dev)
    out = switch.try_compiled(_min_pass, "llama_cpp", blocks, top_t, qmin_t)
    if out is None:
        hi, lo, codes = _min_pass(blocks, top_t, qmin_t)
    else:  # a compiled reduction may give a zero extreme the other sign
        hi, lo, codes = out
        _eager_zero_extremes(blocks, hi, lo)
    d = (hi - lo) / top
    s, m = _fp16(d), _fp16(lo)
    z = torch.full(s.shape, cfg.qmin, dtype=torch.int32, device=dev)
    # max(hi, -lo): NaN and infinities carry through, and no finite pair overflows
    return Quantized(codes, BlockParams(s, z, m, s), torch.maximum(hi, -lo))


def _eager_zero_extremes(blocks: torch.Tensor, hi: torch.Tensor, lo: torch.Tensor) -> None:
    """Rewrite, in place, a zero ``hi``/``lo`` with the sign eager ``amax``/``amin`` give it.

    The sign of a zero extreme depends on the order in which a reduction meets ``-0`` and
    ``+0``, and it reaches the bytes (``m = fp16(lo)``; ``d = hi - lo`` is ``-0`` for
    ``hi = -0``, ``lo = +0``), so a compiled min/max may differ from torch's there. Only
    blocks with a zero extreme are reduced again (eagerly: few, as a rule); torch's
    reduction of a contiguous block does not depend on the other rows, so a gathered copy
    of those rows gives the full tensor's result (for other layouts, the whole is reduced)."""
    zero = ((hi == 0) | (lo == 0)).reshape(-1)
    if not bool(zero.any()):
        return
    if blocks.is_contiguous():
        rows = blocks[zero]
        hi[zero] = rows.amax(dim=1, keepdim=True)
        lo[zero] = rows.amin(dim=1, keepdim=True)
    else:
        hi[zero] = blocks.amax(dim=1, keepdim=True)[zero]
        lo[zero] = blocks.amin(dim=1, keepdim=True)[zero]


def _q8_pass(blocks: torch.Tensor, top: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q8_0 in one pass: ``d = max |x| / 127`` per block and ``roundf(x id)`` (int8)."""
    d = _absmax_pass(blocks) / top
    return d, _q8_codes(blocks, _inverse(d))


def _q8_0(blocks: torch.Tensor, cfg: QuantConfig) -> Quantized:
    d, codes = _kernel(_q8_pass, blocks, torch.tensor(127.0, device=blocks.device))
    s = _fp16(d)  # may overflow to inf on finite values: d itself is the peak
    return Quantized(codes, BlockParams(s, _zeros(len(s), s.device), None, s), d)


def _ternary_pass(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """TQ1_0/TQ2_0 in one pass: ``d = max |x|`` per block (``+0`` for a zero block: ``|x|``
    has no ``-0``) and the stored codes ``roundf(x id) + 1`` (uint8), ``id = 1/d`` (0 when
    ``d = 0``): ``roundf``'s exact steps, in the eager order."""
    d = blocks.abs().amax(dim=1, keepdim=True)
    return d, (roundf(_finite_or_zero(blocks * _inverse(d))) + 1).to(torch.uint8)


def _ternary(blocks: torch.Tensor, cfg: QuantConfig) -> Quantized:
    d, codes = _kernel(_ternary_pass, blocks)
    s = _fp16(d)
    return Quantized(codes, BlockParams(s, _zeros(len(s), s.device), None, s), d)


# llama.cpp's kvalues_mxfp4 (doubled E2M1 levels) in its order; index = FP4 code.
_MXFP4_KVALUES = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)


def _mxfp4_codes(blocks: torch.Tensor, d_half: torch.Tensor) -> torch.Tensor:
    """``_mxfp4_code_numbers`` as the stored uint8 codes."""
    return _mxfp4_code_numbers(blocks, d_half).to(torch.uint8)


def _mxfp4_code_numbers(blocks: torch.Tensor, d_half: torch.Tensor) -> torch.Tensor:
    """The eager loop's ``argmin_i |kv_i d_half - x|`` (uint8) as one compiled pass: the
    same float32 errors (``kv_i d_half`` is exact, a small integer times a power of two),
    kept as a running minimum in the table's order with a strict ``<``, so the first
    smallest wins as in ``argmin``. The eager argmin over a ``[rows, 32, 16]`` tensor of
    errors took 1.3 s for 4096 x 4096 on one thread (30x a copy).

    Only the 7 levels of ``|x|``'s sign are tried, on ``a = |x|``: a level of the other
    sign has the error ``fl(k d + a) >= a``, code 0's, so it never wins a strict ``<``
    (nor does code 8, llama.cpp's second zero: its error is ``a`` too), and a level
    ``-k`` of a negative ``x`` has the error ``fl(|a - k d|)``, level ``k``'s on ``a``
    (rounding to nearest is symmetric). A negative ``x`` whose best ``a`` level is
    ``k > 0`` takes code ``k + 8``; ``-0`` is not negative and stays at code 0. Half the
    operations of the 15 comparisons: 4096 x 4096, one thread, 23 ms against 43 ms.
    int32 codes (``_mxfp4_codes`` stores them as uint8), so that a fused pass computes
    their values from them (``_fp4_codes_values``)."""
    a = blocks.abs()
    best = a  # |0 d_half - x|, code 0
    code = torch.zeros_like(blocks, dtype=torch.int32)
    for i, kv in enumerate(_MXFP4_KVALUES[1:8], start=1):
        err = (kv * d_half - a).abs()
        better = err < best
        best = torch.where(better, err, best)
        code = torch.where(better, i, code)
    return torch.where((blocks < 0) & (code > 0), code + 8, code)


def _mxfp4_code_numbers_counted(blocks: torch.Tensor, d_half: torch.Tensor) -> torch.Tensor:
    """``_mxfp4_code_numbers`` by counting the midpoints below ``a = |x|``: the level index
    is the number of ``m_j d_half < a`` over the 7 midpoints ``m_j`` of the doubled levels
    ``0, 1, 2, 3, 4, 6, 8, 12`` (``0.5, 1.5, 2.5, 3.5, 5, 7, 10``), a tie staying on the
    lower level, with ``x < 0`` adding 8 where the index is not 0 and code 0 where
    ``d_half = 0`` (every error is then ``a``). Three operations a level against the
    running minimum's six. The same codes wherever ``a < 2^20 d_half`` (``_FP4_COUNTED``):

    - ``m_j d_half`` is exact (``d_half`` a power of two, or NVFP4's UE4M3 value over 2,
      4 significant bits; ``m_j`` has at most 3; no overflow, and subnormals are exact);
    - between adjacent levels ``L1 <= a <= L2`` (``L2 <= 2 L1`` except ``L1 = 0``, whose
      error ``a`` is exact) both errors are exact (Sterbenz), so the running minimum's
      ``<`` between them is ``a > (L1 + L2) / 2``, ties to ``L1``;
    - a farther level's true error is larger by at least ``d_half / 2``; the float32
      rounding is monotonic, and with ``ulp(a) < d_half`` it cannot bring that error down
      to the nearer one's, so the farther level never wins.

    Past ``2^20 d_half`` (NVFP4 blocks whose ``amax / 6`` clamps to UE4M3's 448, beyond
    about 2.3e8) rounded errors tie, and the running minimum keeps the first level: there
    the caller runs ``_mxfp4_code_numbers``. NaN (every ``>`` false) gives 0 as there."""
    a = blocks.abs()
    mag = torch.zeros_like(blocks, dtype=torch.int32)
    for mid in _MXFP4_MIDPOINTS:
        mag = mag + (a > mid * d_half).to(torch.int32)
    mag = torch.where(d_half > 0, mag, 0)
    return torch.where((blocks < 0) & (mag > 0), mag + 8, mag)


_MXFP4_MIDPOINTS = (0.5, 1.5, 2.5, 3.5, 5.0, 7.0, 10.0)
"""The midpoints of ``_MXFP4_KVALUES[:8]`` (doubled E2M1 levels), ascending."""

_FP4_COUNTED = True
"""The FP4 search of MXFP4_GGUF and NVFP4_GGUF by counting midpoints
(``_mxfp4_code_numbers_counted``) where every block has ``amax < 2^20 d_half`` (the scale
passes' ``_wide``); ``False``: always the running minimum (the tests compare the two)."""

_WIDE = 2.0**20


def _wide(amax: torch.Tensor, d_half: torch.Tensor) -> torch.Tensor:
    """``[1, 1]`` bool: whether some block has ``amax >= 2^20 d_half > 0`` (or an inf
    ``amax``), where counting midpoints could differ from llama.cpp's running minimum."""
    return ((d_half > 0) & (amax >= _WIDE * d_half)).any().reshape(1, 1)


def _mxfp4(blocks: torch.Tensor, cfg: QuantConfig, values: bool = False) -> Quantized:
    """MXFP4 (``quantize_row_mxfp4_ref``); ``values``: the dequantized values from the
    codes' pass where it runs compiled (``_fp4_codes_values``), else ``None``."""
    if _MXFP4_SCALE_KERNEL:
        # amax exact in any order (+0 for an all-zero block); the exponent from its bits
        # and a table of numpy's own roundings (``_mxfp4_scale_pass``)
        up = _log2_rounds_up_from(blocks.device)
        amax, e, d_half, s, wide = _kernel(_mxfp4_scale_pass, blocks, up)
    else:
        amax = _kernel(_absmax_pass, blocks)
        e = _mxfp4_exponents_numpy(amax)
        d_half = power_of_two(e - 128)  # 2^(e - 128), as torch.ldexp
        s = 2 * d_half  # the lab's FP4 levels are kv / 2: x_hat = 2^(e - 127) fp4[q]
        wide = _wide(amax, d_half)
        amax = _peak(amax)
    codes, fused = _fp4_codes_values(blocks, d_half, s, values, not bool(wide.any()))
    stored = StoredScales(codes=e.reshape(-1))
    params = BlockParams(s, _zeros(len(s), s.device), None, s, None, stored)
    return Quantized(codes, params, amax, fused, finite_scales=True)


def _mxfp4_exponents_numpy(amax: torch.Tensor) -> torch.Tensor:
    """MXFP4's E8M0 exponents ``clip(floor(log2 a) - 2 + 127, 0, 254)`` (int32, ``amax``'s
    shape; 0 where ``a`` is not ``> 0``) with numpy's float32 log2, as the ``gguf``
    package computes them: the reference for ``_mxfp4_scale_pass``."""
    a = amax.cpu().numpy()
    with np.errstate(divide="ignore"):
        e_np = np.where(a > 0, np.floor(np.log2(a)) - 2 + 127, 0)
    # below 2^-125 the package's uint8 cast wraps around; the smallest exponent is kept
    e = torch.from_numpy(np.clip(e_np, 0, 254).astype(np.int32)).to(amax.device)
    return e.reshape(amax.shape)


@functools.cache
def _log2_rounds_up_table() -> torch.Tensor:
    """Per float32 exponent field ``b`` (0..255), the smallest mantissa field ``m`` whose
    float32 ``2^(b - 127) (1 + m 2^-23)`` numpy's float32 ``log2`` rounds up to ``b - 126``
    (``floor(log2 a)`` one more than ``a``'s own exponent: the last few values below a
    power of two, where ``log2`` is within half an ulp of the integer), ``2^23`` where
    none does (int32 ``[256]``). Found by bisection on this process's numpy, whose SIMD
    ``log2`` the ``gguf`` package calls: its roundings, not a model of them (it rounds up
    monotonically within a binade, checked on every mantissa of sample binades in
    ``tests/core/test_mxfp4_scale_pass.py``). ``b = 0`` (subnormals, whose exponents clip
    to 0 either way): none; ``b = 255`` (Inf; NaN's ``a > 0`` fails first): 0, so that
    Inf gets ``log2 = inf``'s clipped 254."""
    b = np.arange(1, 255, dtype=np.int64)
    lo = np.zeros_like(b)  # the predicate is false at m = 0: log2(2^k) = k exactly
    hi = np.full_like(b, 1 << 23)  # first m where it holds, 2^23 for none

    def rounds_up(m: np.ndarray) -> np.ndarray:
        a = ((b << 23) | np.minimum(m, (1 << 23) - 1)).astype(np.int32).view(np.float32)
        return (np.floor(np.log2(a)) > b - 127) & (m < 1 << 23)

    while bool((lo < hi).any()):
        mid = (lo + hi) // 2
        up = rounds_up(mid)
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid + 1)
    table = np.concatenate([[1 << 23], hi, [0]]).astype(np.int32)
    return torch.from_numpy(table)


def _log2_rounds_up_from(device: torch.device) -> torch.Tensor:
    return _log2_rounds_up_table().to(device)


def _mxfp4_scale_pass(
    blocks: torch.Tensor, up: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """MXFP4's per-block ``amax``, E8M0 exponent ``e`` (int32) and scales ``d_half =
    2^(e - 128)``, ``s = 2 d_half`` in one pass (a kernel: eagerly, numpy's log2 and
    half a dozen operations on ``[n_blocks, 1]`` cost about a copy): ``floor(log2 a)`` as
    numpy's float32 ``log2`` gives it is ``a``'s exponent field ``b`` less 127, plus one
    where the mantissa field is at least ``up[b]`` (``_log2_rounds_up_table``); then
    ``_mxfp4_exponents_numpy``' ``clip(... - 2 + 127, 0, 254)``, 0 where ``a > 0``
    fails (NaN; zero). The same integers, so the same scales, as that reference."""
    amax = _absmax_pass(blocks)
    bits = amax.view(torch.int32)
    b = (bits >> 23) & 0xFF
    above = ((bits & 0x7FFFFF) >= up[b]).to(torch.int32)
    e = torch.where(amax > 0, b - 2 + above, 0).clamp(0, 254)
    d_half = power_of_two(e - 128)
    return _peak(amax), e, d_half, 2 * d_half, _wide(amax, d_half)


def _peak(amax: torch.Tensor) -> torch.Tensor:
    """The largest of the blocks' ``amax`` (``[n_blocks, 1]``, each ``>= 0`` or NaN) as
    ``[1, 1]``: NaN where one is NaN (``amax`` propagates it, eagerly and compiled), inf
    where one is inf, so finite exactly when every block is (``Quantized.peaks``). Reduced
    in the scale pass's kernel: an eager ``isfinite(amax).all()`` over NVFP4's 1M blocks
    wrote a 1 MB bool tensor and read it again (about a third of a clone, loaded)."""
    return amax.amax().reshape(1, 1)


_MXFP4_SCALE_KERNEL = True
"""MXFP4's exponents from ``_mxfp4_scale_pass`` (compiled where kernels run); ``False``:
numpy's log2 on the blocks' maxima (``_mxfp4_exponents_numpy``, the tests' reference)."""


def _fp4_codes_values(
    blocks: torch.Tensor, d_half: torch.Tensor, s: torch.Tensor, values: bool, counted: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``_fp4_codes`` and, where ``values`` asks and the pass runs compiled, the values
    ``clamp(s fp4[q])`` (``s`` the stored scale, ``[n_blocks, 1]``) from the same loop
    (``kernels.encode_values_with``: the FP4 decode's formula on the int32 code, so the
    bits of ``dequantize``); else ``None`` for the values: the caller decodes. ``counted``:
    no block is ``_wide``, so the midpoints may be counted (``_FP4_COUNTED``)."""
    if values:
        if counted and _FP4_COUNTED:
            both = _counted_values_pass(blocks, d_half.contiguous(), s)
        else:
            table = codebook_for(Format.FP4_E2M1, blocks.device).decode_table
            both = encode_values_with(
                _mxfp4_code_numbers, "llama_cpp_fp4", table, s, blocks, d_half.contiguous()
            )
        if both is not None:
            return both
    return _fp4_codes(blocks, d_half, counted), None


def _counted_values_pass(
    blocks: torch.Tensor, d_half: torch.Tensor, s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``_fp4_counted_values`` compiled, or ``None`` where kernels do not run compiled."""
    return switch.try_compiled(_fp4_counted_values, "llama_cpp_fp4_counted", blocks, d_half, s)


# each midpoint's step in the lab's FP4 levels (kv / 2: 0, 0.5, 1, 1.5, 2, 3, 4, 6)
_FP4_STEPS = (0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 2.0)


def _fp4_counted_values(
    blocks: torch.Tensor, d_half: torch.Tensor, s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``_mxfp4_code_numbers_counted``' codes (uint8) and their values ``clamp(s fp4[q])``
    in one kernel, the level's magnitude added up beside the count (each step exact: the
    sums are the levels ``fp4[q]`` exactly), signed as ``0 - level`` for a negative ``x``
    (``+0`` where the level is 0: code 0 decodes to ``+0``), times the stored scale and
    clamped by selects as the decode does: its bits. Against the counted codes then the
    FP4 decode from the code's bits (``kernels.encode_values_with``): 4096 x 4096 NVFP4,
    the pass 104 against 129 ms (clone 37 ms, loaded)."""
    a = blocks.abs()
    mag = torch.zeros_like(blocks, dtype=torch.int32)
    level = torch.zeros_like(blocks)
    for mid, step in zip(_MXFP4_MIDPOINTS, _FP4_STEPS, strict=True):
        above = a > mid * d_half
        mag = mag + above.to(torch.int32)
        level = level + torch.where(above, step, 0.0)
    some = d_half > 0
    mag = torch.where(some, mag, 0)
    level = torch.where(some, level, 0.0)
    negative = blocks < 0
    code = torch.where(negative & (mag > 0), mag + 8, mag)
    value = torch.where(negative, 0.0 - level, level) * s
    return code.to(torch.uint8), clamp_finite_by_selects(value)


def _mxfp4_codes_counted(blocks: torch.Tensor, d_half: torch.Tensor) -> torch.Tensor:
    """``_mxfp4_code_numbers_counted`` as the stored uint8 codes."""
    return _mxfp4_code_numbers_counted(blocks, d_half).to(torch.uint8)


def _fp4_codes(blocks: torch.Tensor, d_half: torch.Tensor, counted: bool = False) -> torch.Tensor:
    """``best_index_mxfp4`` of every value (uint8 codes): llama.cpp compares
    ``|kv d_half - x|`` in float32 over its table, the first index winning a tie (argmin
    returns the first minimum); ``d_half`` ``[n_blocks, 1]``. ``counted``: every block's
    values below ``2^20 d_half``, so the compiled pass may count midpoints instead."""
    fn = _mxfp4_codes_counted if counted and _FP4_COUNTED else _mxfp4_codes
    d_half = d_half.contiguous()
    return switch.compiled_or(fn, "llama_cpp", blocks, d_half, fallback=_fp4_codes_eager)


def _fp4_codes_eager(blocks: torch.Tensor, d_half: torch.Tensor) -> torch.Tensor:
    """``_fp4_codes`` in pieces of rows (each value's 16 errors at once, ~16 MB a piece)."""
    kv = torch.tensor(_MXFP4_KVALUES, dtype=torch.float32, device=blocks.device)
    codes = torch.empty(blocks.shape, dtype=torch.uint8, device=blocks.device)
    step = max(1, (1 << 22) // (blocks.shape[1] * 16))  # rows per piece: ~16 MB of errors
    for start in range(0, blocks.shape[0], step):
        sl = slice(start, start + step)
        errs = (kv * d_half[sl].unsqueeze(-1) - blocks[sl].unsqueeze(-1)).abs()
        codes[sl] = errs.argmin(dim=-1).to(torch.uint8)
    return codes


def ue4m3_from_float(x: torch.Tensor) -> torch.Tensor:
    """llama.cpp's ``ggml_fp32_to_ue4m3`` (int32 codes 0..0x7E) of float32 ``x``, step by
    step: 0 unless ``x > 0`` (NaN included); ``x`` clamped to 448; with ``E`` its unbiased
    float32 exponent and ``e = E + 7``:

    - ``e <= 0`` (``x < 2^-6``): the subnormal ``man = trunc(x 512 + 0.5)`` (float32; ``x
      512`` is exact), clamped to 7 (``x`` in ``[7.5, 8) 2^-9`` stays at ``7 2^-9`` rather
      than rounding up to ``2^-6``), 0 below 1;
    - ``e >= 15`` (``x >= 256``): ``0x7E`` (448), as is a mantissa that rounds up into it;
    - else the top 3 mantissa bits plus the next bit (half away from zero), a carry into
      the exponent: ``(e << 3) | man``.
    """
    x = torch.where(x > 0, x, torch.zeros_like(x)).clamp(max=448.0).contiguous()
    bits = x.view(torch.int32)
    e = ((bits >> 23) & 0xFF) - 127 + 7
    sub = torch.trunc(x * 512.0 + 0.5).clamp(max=7).to(torch.int32)  # < 1 is 0 already
    man = ((bits >> 20) & 7) + ((bits >> 19) & 1)
    carry = man > 7
    e_n = torch.where(carry, e + 1, e)
    normal = torch.where(e_n >= 15, 0x7E, (e_n << 3) | torch.where(carry, 0, man))
    code = torch.where(e <= 0, sub, normal)
    return torch.where(x > 0, code, 0)


def _abs_sums_in_order(blocks: torch.Tensor) -> torch.Tensor:
    """``sum |x|`` per block (``[n_blocks, n]`` -> ``[n_blocks]``) from 0, one value at a
    time in the block's order, in float32 (the C loop's sum; a pairwise ``sum`` rounds
    differently). A kernel: compiled, one loop over the blocks; eagerly, each column a
    strided pass over all of memory, so ``_q1_0`` transposes first."""
    acc = blocks[:, 0].abs() + 0.0
    for i in range(1, blocks.shape[1]):
        acc = acc + blocks[:, i].abs()
    return acc


def _abs_sums_transposed(blocks: torch.Tensor) -> torch.Tensor:
    """``_abs_sums_in_order`` eagerly: the blocks transposed (``[n, n_blocks]``), then one
    add per position, in place."""
    columns = blocks.abs().t().contiguous()
    acc = columns[0] + 0.0
    for column in columns[1:]:
        acc.add_(column)
    return acc


def _q1_0_scale_pass(
    blocks: torch.Tensor, n: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q1_0's stored scale ``fp16(sum_abs / n)`` (``[n_blocks, 1]``, float32) in the sums'
    pass: ``n`` the block length as a 0-d float32 tensor, so the division stays a true one
    (``/ 128`` is exact, as C's division is), and the float16 rounding (round to nearest
    even, as torch's eager cast) in the same kernel instead of three eager passes over the
    blocks' scales. Compiled with ``_ROUNDING_CASTS``. Also, each ``[1, 1]``, the largest
    sum (``_peak``: finite only where every value is, since ``|x|`` adds no ``-inf``; it may
    overflow on finite values, then the caller checks the values) and the largest scale
    (finite exactly when every scale is: ``sum / n`` may pass float16's 65504)."""
    sums = _abs_sums_in_order(blocks).reshape(-1, 1)
    s = _fp16(sums / n)
    return s, _peak(sums), _peak(s)


_ROUNDING_CASTS = {"emulate_precision_casts": True}
"""Inductor keeps a float32 -> float16 -> float32 round trip (else it drops the pair as
a no-op, and the scale is not rounded to float16)."""


def _q1_0_scales(
    blocks: torch.Tensor, n: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_q1_0_scale_pass`` eagerly, its sums by ``_abs_sums_transposed``."""
    sums = _abs_sums_transposed(blocks).reshape(-1, 1)
    s = _fp16(sums / n)
    return s, _peak(sums), _peak(s)


def _q1_0_code_numbers(blocks: torch.Tensor) -> torch.Tensor:
    """Q1_0's codes ``x >= 0`` as int32 (the fused pass's encoder)."""
    return (blocks >= 0).to(torch.int32)


def _q1_0(blocks: torch.Tensor, cfg: QuantConfig, values: bool = False) -> Quantized:
    """Q1_0 (``quantize_row_q1_0_ref``): ``d = fp16(sum_abs / 128)``, ``sum_abs`` added up
    one value at a time from 0 in float32 as the C loop does (``_abs_sums_in_order``), and
    the codes ``x >= 0`` (1: ``+d``, 0: ``-d``). 4096 x 4096, one thread: the sums 249 ms
    eagerly (transposed), 24 ms compiled. ``values``: the dequantized values ``clamp(s
    [-1, 1][q])`` from the codes' pass where it runs compiled, else ``None``."""
    n = torch.tensor(float(blocks.shape[1]), device=blocks.device)
    s, sum_peak, s_peak = switch.compiled_or(
        _q1_0_scale_pass,
        "llama_cpp_fp16",
        blocks,
        n,
        fallback=_q1_0_scales,
        options=_ROUNDING_CASTS,
    )
    params = BlockParams(s, _zeros(len(s), s.device), None, s)
    # the largest sum as the peaks where finite (then so is every value: no separate pass
    # over ``x`` for the check); a finite sum can overflow, so where it is not, ``None``
    # sends the caller to check the values themselves
    peaks = sum_peak if bool(torch.isfinite(sum_peak).all()) else None
    finite_scales = bool(torch.isfinite(s_peak).all())
    if values and finite_scales:
        table = codebook_for(cfg.format, blocks.device).decode_table
        both = encode_values_with(_q1_0_code_numbers, "llama_cpp_q1_0", table, s, blocks)
        if both is not None:
            return Quantized(both[0], params, peaks, both[1], finite_scales=True)
    codes = (blocks >= 0).to(torch.uint8)
    return Quantized(codes, params, peaks, finite_scales=finite_scales)


def _nvfp4_scale_pass(
    blocks: torch.Tensor, six: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """The blocks' largest ``amax`` (``_peak``; ``+0`` for an all-zero block, inf for an
    inf) and each block's ``ue =
    ue4m3_from_float(amax / 6)`` (int32) in one pass: max is exact in any order, ``six``
    a 0-d tensor so that the division stays a true one (a scalar divisor may become a
    multiply by 1/6), the rest integer steps and ``trunc(x 512 + 0.5)`` (exact). Eagerly
    ``ue4m3_from_float``'s dozen operations on a million blocks (4096 x 4096) cost about
    half a copy. Also the scale ``s = ue4m3_values(ue)`` and ``s * 0.5`` (llama.cpp's
    ``d``) from the code's bits (``_ue4m3_value``, exact: no gather, which Inductor runs
    as a scalar loop, and two fewer passes over a million blocks eagerly)."""
    amax = _absmax_pass(blocks)
    ue = ue4m3_from_float(amax / six)
    s = _ue4m3_value(ue)
    d = s * 0.5
    return _peak(amax), ue, s, d, _wide(amax, d)


def _ue4m3_value(ue: torch.Tensor) -> torch.Tensor:
    """``scales.ue4m3_values`` of codes ``ue`` (int32, 0..0x7E as ``ue4m3_from_float``
    writes them) by arithmetic instead of the table: ``man 2^-9`` for ``e = 0``, else
    ``(8 + man) 2^(e - 10)`` (every value exact in float32), 0 for ``0x00`` and ``0x7F``;
    the table's own formula, so its entries bit for bit."""
    exp, man = (ue >> 3) & 0xF, (ue & 7).to(torch.float32)
    raw = torch.where(exp == 0, man * 2.0**-9, (8 + man) * power_of_two(exp - 10))
    return torch.where((ue == 0) | (ue == 0x7F), 0.0, raw)


def _nvfp4(blocks: torch.Tensor, cfg: QuantConfig, values: bool = False) -> Quantized:
    """GGUF NVFP4 (``quantize_row_nvfp4_ref``) per sub-block of 16: ``ue =
    ue4m3_from_float(amax / 6)``, ``d = ue4m3(ue) / 2`` and each code
    ``best_index_mxfp4(x, d)`` (MXFP4's search: ties towards zero). The lab's scale is
    ``2 d``, the UE4M3 value itself (its FP4 levels are llama.cpp's doubled ones halved).
    ``values``: as ``_mxfp4``'s."""
    six = torch.tensor(6.0, device=blocks.device)
    amax, ue, s, d, wide = _kernel(_nvfp4_scale_pass, blocks, six)
    codes, fused = _fp4_codes_values(blocks, d, s, values, not bool(wide.any()))
    stored = StoredScales(codes=ue.reshape(-1))
    params = BlockParams(s, _zeros(len(s), s.device), None, s, None, stored)
    return Quantized(codes, params, amax, fused, finite_scales=True)


# -- fused round trips: codes and dequantized values from one pass ------------------------
#
# ``quantize(x, cfg).dequantize()`` reads ``x`` in the quantize pass and the codes back in a
# second one: torch converts the int8 codes to float32 (a full-size write), then the
# compiled affine map runs over them in place (Inductor loads int8 lanes badly, see
# ``kernels.passes.decode_int``). The fused passes below write the dequantized values in
# the loop that writes the codes, from the float code before it becomes an integer: a
# reduction pass (each block's extremes, as the type's own pass computes them), the
# per-block scales eagerly (the fp16 rounding included, on ``[n_blocks, 1]`` only), then
# one pass for codes and values. Each value is the decode's formula on the same float
# code: ``float(int8(q)) = q + 0`` for an integer ``q`` in range (``+ 0`` makes a ``-0``
# from ``roundf`` the ``+0`` that an integer converts to), so the bits are
# ``dequantize``'s. 4096 x 4096 Q8_0, one thread: quantize + dequantize 3.5x a clone, the
# fused pass 2.7x.


def _scale_of(d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(1/d or 0, fp16(d))`` per block: what every legacy type derives from its ``d``."""
    return _inverse(d), _fp16(d)


def _absmax_scales(
    blocks: torch.Tensor, top: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q8_0's (``top = 127``) or TQ1_0/TQ2_0's (``top = 1``) reduction pass: per block
    ``1/d`` and ``fp16(d)`` of ``d = max |x| / top`` (as ``_q8_pass``, ``_ternary_pass``),
    and the largest ``d`` of all (``[1, 1]``; NaN propagates: finite exactly when every
    value is), so that the ``[n_blocks, 1]`` steps run in the same loop, not as eager ops."""
    d = blocks.abs().amax(dim=1, keepdim=True) / top
    inv, s = _scale_of(d)
    return inv, s, d.amax(dim=0, keepdim=True)


def _symmetric_scales(
    blocks: torch.Tensor, half: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Q4_0/Q5_0's reduction pass (``_symmetric_pass``' ``mx``): per block ``mx``, ``1/d``
    and ``fp16(d)`` for ``d = mx / -half``; whether ``hi = -lo`` (a tie, or a zero block,
    which the caller redoes eagerly) and whether any block ties; the largest ``|mx|``
    (``[1, 1]``, finite exactly when every value is)."""
    hi = blocks.amax(dim=1, keepdim=True)
    lo = blocks.amin(dim=1, keepdim=True)
    mx = torch.where(-lo > hi, lo, hi)
    inv, s = _scale_of(mx / -half)
    tie = hi == -lo
    return mx, inv, s, tie, tie.any(), torch.maximum(hi, -lo).amax(dim=0, keepdim=True)


def _min_params(
    hi: torch.Tensor, lo: torch.Tensor, top: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_1/Q5_1's per-block ``1/d``, ``fp16(d)`` and ``fp16(min)``, ``d = (hi - lo) /
    top``, as ``_legacy_min`` computes them."""
    inv, s = _scale_of((hi - lo) / top)
    return inv, s, _fp16(lo)


def _min_scales(blocks: torch.Tensor, top: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Q4_1/Q5_1's reduction pass: per block ``hi``, ``lo``, ``_min_params``, whether an
    extreme is zero (its sign may be the compiled reduction's: the caller redoes those
    blocks eagerly) and whether any is; the largest ``max(hi, -lo)`` (``[1, 1]``)."""
    hi = blocks.amax(dim=1, keepdim=True)
    lo = blocks.amin(dim=1, keepdim=True)
    inv, s, m = _min_params(hi, lo, top)
    zero = (hi == 0) | (lo == 0)
    peak = torch.maximum(hi, -lo).amax(dim=0, keepdim=True)
    return hi, lo, inv, s, m, zero, zero.any(), peak


def _clamped(v: torch.Tensor) -> torch.Tensor:
    return v.clamp(-_F32_MAX, _F32_MAX)


def _q8_values(
    blocks: torch.Tensor, inv: torch.Tensor, s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Q8_0's codes ``roundf(x id)`` (int8) and values ``clamp(q s)``."""
    q = roundf(_finite_or_zero(blocks * inv))
    return q.to(torch.int8), _clamped((q + 0.0) * s)


def _ternary_values(
    blocks: torch.Tensor, inv: torch.Tensor, s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """TQ1_0/TQ2_0's stored codes ``roundf(x id) + 1`` (uint8) and values ``clamp(t s)``,
    ``t = roundf(x id) + 0`` the ternary table's entry of the code (``-1, +0, 1``)."""
    q = roundf(_finite_or_zero(blocks * inv))
    return (q + 1).to(torch.uint8), clamp_finite_by_selects((q + 0.0) * s)


def _symmetric_values(
    blocks: torch.Tensor, inv: torch.Tensor, half: torch.Tensor, s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_0/Q5_0's codes ``_symmetric_codes`` (int8) and values ``clamp(q s)``; ``q = u -
    half`` of two integers is never ``-0``."""
    u = torch.trunc(_finite_or_zero(blocks * inv + (half + 0.5)))
    q = u.clamp(min=0).clamp(max=2 * half - 1) - half
    return q.to(torch.int8), _clamped(q * s)


def _min_values(
    blocks: torch.Tensor,
    lo: torch.Tensor,
    inv: torch.Tensor,
    top: torch.Tensor,
    qmin: torch.Tensor,
    s: torch.Tensor,
    m: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_1/Q5_1's codes (``_min_pass``'s, int8) and values ``clamp((q - qmin) s + m)``,
    ``decode_int_offset``'s formula with ``z = qmin``."""
    u = torch.trunc(_finite_or_zero((blocks - lo) * inv + 0.5))
    q = u.clamp(min=0).clamp(max=top) + qmin
    return q.to(torch.int8), _clamped((q - qmin) * s + m)


# Inductor drops a float32 -> float16 -> float32 round trip inside a kernel unless told to
# emulate the casts: without it ``fp16(d)`` came out as ``d`` itself (Q4_1, TQ2_0).
_CASTS = {"emulate_precision_casts": True}


def _run_pass(fn: Callable[..., Any], *args: torch.Tensor) -> Any:
    """``fn(*args)`` compiled where allowed (keeping the casts), else eagerly."""
    return switch.compiled_or(fn, "llama_cpp_values", *args, options=_CASTS)


def _absmax_values(blocks: torch.Tensor, cfg: QuantConfig, top: float) -> Quantized:
    """Q8_0 (``top = 127``) or TQ1_0/TQ2_0 (``top = 1``, stored codes ``q + 1``) fused."""
    inv, s, peak = _run_pass(_absmax_scales, blocks, torch.tensor(top, device=blocks.device))
    values_fn = _q8_values if top > 1 else _ternary_values
    codes, values = _run_pass(values_fn, blocks, inv, s)
    params = BlockParams(s, _zeros(len(s), s.device), None, s)
    return Quantized(codes, params, peak, values)


def _q8_0_values(blocks: torch.Tensor, cfg: QuantConfig) -> Quantized:
    return _absmax_values(blocks, cfg, 127.0)


def _ternary_values_pass(blocks: torch.Tensor, cfg: QuantConfig) -> Quantized:
    return _absmax_values(blocks, cfg, 1.0)


def _legacy_symmetric_values(blocks: torch.Tensor, cfg: QuantConfig) -> Quantized:
    half = 1 << (cfg.bits - 1)
    half_t = torch.tensor(float(half), device=blocks.device)
    out = switch.try_compiled(
        _symmetric_scales, "llama_cpp_values", blocks, half_t, options=_CASTS
    )
    if out is None:  # eagerly: the first value of largest magnitude
        mx = _signed_absmax_pass(blocks)
        inv, s = _scale_of(mx / -half)
        peak = mx
    else:  # max or min by magnitude; a tie's blocks (zero blocks too) as the eager path
        mx, inv, s, tie, any_tie, peak = out
        if bool(any_tie):
            rows = tie.reshape(-1)
            mx[rows] = _signed_absmax_pass(blocks[rows])
            inv[rows], s[rows] = _scale_of(mx[rows] / -half)
    codes, values = _run_pass(_symmetric_values, blocks, inv, half_t, s)
    params = BlockParams(s, _zeros(len(s), s.device), None, s)
    return Quantized(codes, params, peak, values)


def _legacy_min_values(blocks: torch.Tensor, cfg: QuantConfig) -> Quantized:
    top = (1 << cfg.bits) - 1
    dev = blocks.device
    top_t = torch.tensor(float(top), device=dev)
    out = switch.try_compiled(
        _min_scales, "llama_cpp_values", blocks, top_t, options=_CASTS
    )
    if out is None:
        hi = blocks.amax(dim=1, keepdim=True)
        lo = blocks.amin(dim=1, keepdim=True)
        inv, s, m = _min_params(hi, lo, top_t)
        peak = torch.maximum(hi, -lo)
    else:  # a compiled reduction may give a zero extreme the other sign: redo those
        hi, lo, inv, s, m, zero, any_zero, peak = out
        if bool(any_zero):
            _eager_zero_extremes(blocks, hi, lo)
            rows = zero.reshape(-1)
            inv[rows], s[rows], m[rows] = _min_params(hi[rows], lo[rows], top_t)
    qmin_t = torch.tensor(float(cfg.qmin), device=dev)
    codes, values = _run_pass(_min_values, blocks, lo, inv, top_t, qmin_t, s, m)
    z = torch.full(s.shape, cfg.qmin, dtype=torch.int32, device=dev)
    return Quantized(codes, BlockParams(s, z, m, s), peak, values)


_FUSED: dict[str, Callable[[torch.Tensor, QuantConfig], Quantized]] = {
    "Q4_0": _legacy_symmetric_values,
    "Q5_0": _legacy_symmetric_values,
    "Q4_1": _legacy_min_values,
    "Q5_1": _legacy_min_values,
    "Q8_0": _q8_0_values,
    "TQ1_0": _ternary_values_pass,
    "TQ2_0": _ternary_values_pass,
}


_FUSED_COMPILED: dict[str, Callable[..., Quantized]] = {
    "MXFP4": _mxfp4,
    "NVFP4": _nvfp4,
    "Q1_0": _q1_0,
}
"""The types whose codes' pass gives the dequantized values too where it runs compiled
(``kernels.encode_values_with``; eagerly: ``Quantized.values`` is ``None``)."""


def fuses_values(cfg: QuantConfig) -> bool:
    """Whether ``quantize_blocks(..., values=True)`` gives the dequantized values of
    ``cfg``'s GGUF type from its own pass (``Quantized.values``) on every path; the types
    of ``fuses_values_compiled`` give them on the compiled path only."""
    return gguf_type_of(cfg) in _FUSED


_IQ4 = frozenset(("IQ4_NL", "IQ4_XS"))
"""The IQ4 types, whose last pass (``kquants``) gives the values too where it runs compiled."""


def fuses_values_compiled(cfg: QuantConfig) -> bool:
    """Whether ``quantize_blocks(..., values=True)`` gives the dequantized values of
    ``cfg``'s GGUF type from its codes' pass where that runs compiled (MXFP4, NVFP4,
    Q1_0, IQ4_NL, IQ4_XS: llama.cpp's rounding, the decode's formula in the same loop)."""
    name = gguf_type_of(cfg)
    return cfg.recipe is Recipe.LLAMA_CPP and (name in _FUSED_COMPILED or name in _IQ4)


_QUANTIZERS: dict[str, Callable[[torch.Tensor, QuantConfig], Quantized]] = {
    "Q4_0": _legacy_symmetric,
    "Q5_0": _legacy_symmetric,
    "Q4_1": _legacy_min,
    "Q5_1": _legacy_min,
    "Q8_0": _q8_0,
    "TQ1_0": _ternary,
    "TQ2_0": _ternary,
    "MXFP4": _mxfp4,
    "NVFP4": _nvfp4,
    "Q1_0": _q1_0,
}


def check_importance(importance: object, n_columns: int) -> torch.Tensor:
    """``importance`` as float32 after checking it: a float tensor of shape
    ``[n_columns]``, finite and non-negative (``TypeError``/``ValueError`` naming it)."""
    if not isinstance(importance, torch.Tensor):
        raise TypeError(f"importance must be a torch.Tensor, got {type(importance).__name__}")
    if not importance.is_floating_point():
        raise TypeError(f"importance has dtype {importance.dtype}; expected a float tensor")
    if tuple(importance.shape) != (n_columns,):
        raise ValueError(
            f"importance has shape {tuple(importance.shape)}; expected [{n_columns}]: one "
            "weight per column (the last dimension) of the tensor"
        )
    w = importance.detach().to(torch.float32)
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError("importance must hold finite, non-negative weights")
    return w


# the types whose one pass reduces every block to a value finite exactly when the block is
_PEAKED = frozenset(
    ("Q4_0", "Q5_0", "Q4_1", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4", "NVFP4", "Q1_0")
)


def checks_finiteness(cfg: QuantConfig) -> bool:
    """Whether ``quantize_blocks`` gives ``peaks`` for ``cfg``'s GGUF type, so that a caller
    may check ``blocks``' finiteness on them after the pass instead of reading every value
    once more before it (4096 x 4096 Q8_0: the check's pass 5 of the quantize's 26 ms).
    On values that are not finite these types' passes run to the end (codes 0 where ``x
    id`` is not finite) and raise nothing. Q1_0's ``peaks`` (its largest sum of ``|x|``)
    are ``None`` where that sum overflowed on finite values: the caller checks ``blocks``."""
    return gguf_type_of(cfg) in _PEAKED


def quantize_blocks(
    blocks: torch.Tensor,
    cfg: QuantConfig,
    layout: BlockLayout,
    importance: torch.Tensor | None = None,
    *,
    values: bool = False,
) -> Quantized:
    """Codes (``[n_blocks, block_len]``) and block parameters of ``blocks`` (float32) under
    llama.cpp's quantizer of ``cfg``'s GGUF type; ``importance`` (``check_importance``d):
    its weighted quantizer (the K-quants and IQ4); ``peaks`` where ``checks_finiteness``;
    ``values``: the dequantized values too, where ``fuses_values(cfg)`` (the same codes,
    parameters and peaks)."""
    name = gguf_type_of(cfg)
    if name is None:
        raise ValueError(f"{cfg.describe()!r} is no GGUF type")
    fn = _FUSED.get(name) if values else None
    if values and name in _FUSED_COMPILED and importance is None:
        return _FUSED_COMPILED[name](blocks, cfg, values=True)
    fn = fn or _QUANTIZERS.get(name)
    if fn is None:
        from . import kquants

        codes, params, fused = kquants.quantize_blocks(
            name, blocks, cfg, layout, importance, values=values
        )
        return Quantized(codes, params, None, fused)
    if importance is not None:
        raise ValueError(
            f"importance weights llama.cpp's K-quants and IQ4 here; {name}'s weighted "
            "quantizer is not modelled (quantize without importance)"
        )
    return fn(blocks, cfg)
