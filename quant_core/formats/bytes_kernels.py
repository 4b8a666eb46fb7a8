"""Decoding GGUF block bytes in few passes over memory (used by ``gguf_bytes`` and
``kquant_bytes``):

- ``k4_scales`` (Q4_K's and Q5_K's ``d``, ``dmin``, 6-bit scales and mins, and the
  products ``d sc``, ``-(dmin m)``) and ``q4_k_blocks`` (a whole Q4_K decode: those and the
  signed nibbles, Q4_K's codes): one compiled loop each (``quant_core.kernels``' machinery:
  ``torch.compile`` where it may run, else eager: ``signed_nibbles_eager`` for the codes),
  the same bits as their eager paths (integer operations, exact fp16 -> float32
  conversions, one IEEE multiply per value); ``tests/core/test_formats_bytes_kernels.py``
  checks both against the readable formulas.
- ``legacy_blocks`` (Q4_0, Q8_0: the codes and ``d``), ``q6_k_blocks`` (Q6_K: codes,
  int8 scales, ``d``, ``d sc``), ``q3_k_blocks`` (Q3_K: codes, signed scales, ``d``,
  ``d (l - 32)``; both from blocks widened to a whole count of int32 words by one copy,
  ``_widened``), ``q2_k_blocks`` (Q2_K: ``d``, ``dmin``, scales, mins, ``d sc``,
  ``-(dmin m)`` and the codes) and ``q5_k_blocks`` (Q5_K: ``k4_scales``' six and the
  codes, as ``q4_k_blocks``): one compiled call each, the codes written into a
  ``host_words`` buffer, eagerly the functions below (the same bits).
- ``legacy_blocks`` also decodes Q5_0 and IQ4_NL, ``min_blocks`` Q4_1 and Q5_1 (codes,
  ``d`` and ``min``), ``mxfp4_blocks`` MXFP4 (codes, code 8 read as ``+0`` or kept, ``e``
  and ``2^(e - 127)``; two 17-byte blocks at a time as 17 int16 halves): one compiled call
  each, the same bits as their eager paths.
- ``block_nibbles``, ``block_halves``: eager, for the 17- to 20-byte blocks (the eager
  paths of Q4_0, Q4_1, IQ4_NL, MXFP4), and the fp16 scales of every block type.
- ``block_codes``: the codes of Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, Q2_K, Q3_K, Q5_K and
  Q6_K blocks (any even size) in one compiled loop each, over int32 words made of two
  int16 halves; eagerly the same function. 4096 x 4096 float32 randn, one thread: the
  byte decode went from several times gguf-py's numpy dequantize (TQ1_0 ~1.4 s, Q5_0
  ~0.8 s with the loaded machine of the day) to a few milliseconds.

Why. Decoding a 4096 x 4096 Q4_K tensor is reading 9.4 MB and writing 16.8 MB of int8
codes. A chain of torch operators makes a pass over memory per operator (and a fresh
buffer each, whose pages the kernel faults in), and an operator on short rows (the 32
bytes where low and high nibbles interleave, the 4 bytes of a block's scales) costs a loop
per row, more than its arithmetic. The nibble kernel reads each 32-bit word of packed
nibbles once and writes the two words of codes it holds, 8 words at a time in SIMD lanes
(SWAR: per byte of a word, no carry crosses a byte). It took the decode from 12x to 5x a
copy of the bytes (``benchmarks/formats_speed.py``, one thread).

Reading int32 vectors. Inductor's C++ reads a vector of 8 int32 as
``Vectorized<int32_t>::loadu(ptr, 8)``, which (torch 2.13, unlike its float version)
copies the 32 bytes into a stack buffer and loads them back; g++ 12 (``-march=native``,
znver3 here) moves them as two 16-byte halves, and the 32-byte load back waits for both
stores: a store-forwarding stall on every vector read. It, not the memory, held the
nibble pass to about 3 GB/s of codes (4096 x 4096 Q4_K: 5.7 ms of an 8.6 ms decode, and
in a C++ copy of the loop 0.7 ms -> 2.4 ms from that load alone). ``q4_k_blocks`` reads
its nibble words through a ``pad`` that Inductor turns into masked loads
(``vpmaskmovd``, no stack copy; g++ folds the mask, which is always true). The other
kernels here that read int32 vectors still pay it (``fp4_plus_zero``, and
``block_codes``' last pass: Q6_K's compiles to two scalar loops over the int16 halves and
a vector pass over an int32 temporary; ``q6_k_blocks`` reads through the pad instead, and
``legacy_blocks``' loops are scalar: the 4 words of a Q4_0 block are half a vector).

Signed nibbles (Q4_K's, Q4_0's and Q4_1's ``u - 8``), per byte of a word of nibbles
``u < 16`` (``_minus_8``): ``((u | 0x80) - 8) ^ 0x80``; no borrow crosses a byte, and
``u`` is read once (Inductor repeats a masked load for every use of its value). The eager
path (``signed_nibbles_eager``) flips ``b ^ 0x88`` and sign-extends each nibble with
arithmetic shifts of int8 bytes.
"""

from __future__ import annotations

import numpy as np
import torch

from ..kernels import switch

__all__ = [
    "aligned",
    "block_codes",
    "block_codes_types",
    "block_halves",
    "block_nibbles",
    "f16_bytes",
    "fp4_plus_zero",
    "host_words",
    "k4_scales",
    "legacy_blocks",
    "legacy_blocks_types",
    "min_blocks",
    "min_blocks_types",
    "mxfp4_blocks",
    "q2_k_blocks",
    "q3_k_blocks",
    "q4_k_blocks",
    "q5_k_blocks",
    "q6_k_blocks",
    "signed_nibbles_eager",
]

_LOW = 0x0F0F0F0F  # the low nibble of each byte of a word
_TOP = 0x80808080 - (1 << 32)  # 0x80 in every byte, as an int32


def f16_bytes(v: torch.Tensor) -> torch.Tensor:
    """Float32 values of fp16 (any shape, ``n`` in all) -> ``[n, 2]`` uint8, little-endian,
    as a block stores its ``d``. Written into a fresh buffer: a one-block tensor's ``d``,
    read out of a wider kernel output, has shape ``[1]`` and stride 55, which
    ``contiguous()`` keeps (a size-1 dimension counts as contiguous) and ``view(uint8)``
    refuses."""
    h = torch.empty(v.numel(), dtype=torch.float16, device=v.device)
    return h.copy_(v.reshape(-1)).view(torch.uint8).reshape(-1, 2)


def aligned(raw: torch.Tensor) -> torch.Tensor:
    """``raw`` (bytes), or a copy of it when it does not start on a 4-byte boundary (a
    ``memoryview`` into a file at any offset), so that views of it as int32 words or fp16
    halves read aligned values."""
    return raw.clone() if raw.data_ptr() % 4 else raw


def block_halves(raw: torch.Tensor, start: int) -> torch.Tensor:
    """``[n, size]`` uint8 blocks -> ``[n]`` float32: the fp16 at byte ``start`` of each.
    Read as one strided column of int16 where ``start``, ``size`` and the address are even
    (one loop over ``n``); else through a copy of the two bytes (a loop per block)."""
    n, size = raw.shape
    if start % 2 == 0 and size % 2 == 0 and raw.data_ptr() % 2 == 0 and raw.is_contiguous():
        column = raw.view(torch.int16)[:, start // 2].view(torch.float16)
        # contiguous_format: a single block's column keeps its stride under preserve_format
        return column.to(torch.float32, memory_format=torch.contiguous_format)
    # clone, not contiguous(): one block's two bytes are contiguous already, and a view
    # at an odd storage offset cannot be read as fp16
    pair = raw[:, start : start + 2].clone(memory_format=torch.contiguous_format)
    return pair.view(torch.float16).reshape(n).float()


def block_nibbles(raw: torch.Tensor, start: int, signed: bool) -> torch.Tensor:
    """``[n, size]`` uint8 blocks (contiguous) whose 16 bytes at ``start`` hold 32 nibbles,
    byte ``j`` = ``u[j] | u[j + 16] << 4`` (Q4_0, Q4_1, IQ4_NL, MXFP4) -> ``[n, 32]``: ``u``
    as uint8, or ``u - 8`` as int8 when ``signed``.

    Every pass runs over all the bytes as one flat array (the block heads' results are
    dropped at the end) and a single ``cat`` interleaves the low and high nibbles per
    block: an operator on rows of 16 bytes costs a loop per block, shorter than one SIMD
    vector (4096 x 4096 Q4_0: 524,288 of them), several times its work."""
    n, size = raw.shape
    flat = raw.reshape(-1)
    if signed:  # y = b ^ 0x88: its nibbles sign-extended are u - 8 (module docstring)
        lo = torch.bitwise_xor(flat, 0x88).view(torch.int8)
        hi = lo >> 4  # arithmetic shift: the high nibble, sign-extended
        lo.bitwise_left_shift_(4).bitwise_right_shift_(4)
    else:
        lo = flat & 0x0F
        hi = flat >> 4
    run = slice(start, start + 16)
    return torch.cat([lo.view(n, size)[:, run], hi.view(n, size)[:, run]], dim=1)


def _fp4_plus_zero_kernel(w: torch.Tensor) -> torch.Tensor:
    low3 = w & 0x07070707
    nonzero_low3 = (low3 | (low3 >> 1) | (low3 >> 2)) & 0x01010101
    is8 = (w >> 3) & 0x01010101 & ~nonzero_low3
    return w ^ (is8 << 3)


def fp4_plus_zero(codes: torch.Tensor) -> torch.Tensor:
    """uint8 FP4 codes (values below 16) with code 8 (OCP's ``-0``) replaced by code 0: in
    llama.cpp's MXFP4 and NVFP4 tables ``kvalues_mxfp4[8]`` is ``0``, a ``+0``. A new
    tensor of ``codes``' shape.

    Compiled (where ``quant_core.kernels`` allows, and the codes fill whole int32 words):
    one pass over the codes as int32 words, per byte ``b``: ``b`` is 8 when bit 3 is set
    and bits 0 to 2 are clear, and then bit 3 is flipped off (shifts stay inside a byte
    where they are read: bit 0 of each byte sees bits 1 and 2 of its own byte only). 4096
    x 4096 codes, one thread: 6.6 ms, against 38 ms for ``torch.where`` on uint8 and 50 ms
    for an indexed assignment. Else ``torch.where``: the same codes."""
    if codes.dtype != torch.uint8:
        raise TypeError(f"codes must be uint8, got {codes.dtype}")
    if codes.is_contiguous() and codes.numel() % 4 == 0 and codes.data_ptr() % 4 == 0:
        w = codes.view(-1).view(torch.int32)
        out = switch.try_compiled(_fp4_plus_zero_kernel, "fp4_plus_zero", w)
        if out is not None:
            return out.view(torch.uint8).view(codes.shape)
    return torch.where(codes == 8, 0, codes)


def signed_nibbles_eager(w: torch.Tensor) -> torch.Tensor:
    """``[..., k]`` int32 words of packed nibbles (byte ``j``: ``u_j | v_j << 4``) ->
    ``[..., 2, k]`` int32 words whose bytes are int8 codes: ``[..., 0, :]`` the low
    nibbles ``u - 8``, ``[..., 1, :]`` the high ones ``v - 8``, byte for byte in order
    (``w`` may be a strided view: rows of a block layout). Q4_K's codes on the eager path
    (``q4_k_blocks`` compiles them), with torch operators on bytes: four passes (flip, the
    high nibbles' arithmetic shift, the low ones' shift up and back) and one copy that
    interleaves them (``cat`` of contiguous pieces: a memory copy per run)."""
    y = torch.bitwise_xor(w.view(torch.uint8), 0x88).view(torch.int8)
    hi = y >> 4  # arithmetic: the high nibble of y, sign-extended
    y.bitwise_left_shift_(4).bitwise_right_shift_(4)  # the low nibble, sign-extended
    return torch.stack([y, hi], dim=-2).view(torch.int32)


def _half(h: torch.Tensor) -> torch.Tensor:
    """int32 values whose low 16 bits are an fp16 -> that value as float32 (exact)."""
    return h.to(torch.int16).view(torch.float16).to(torch.float32)


def _k4_scales_kernel(
    w: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    d = _half(w[:, 0] & 0xFFFF)  # int16 from int32 keeps the low 16 bits
    dmin = _half(w[:, 0] >> 16)
    # column j of [n, 8] reads byte j % 4 of the words; a select, not a cat, so that the
    # compiled loop runs over whole rows of 8 (one SIMD vector) rather than halves of 4
    j = torch.arange(8, dtype=torch.int32, device=w.device)
    shifts = (j & 3) * 8
    first, second, third = ((w[:, i : i + 1] >> shifts) & 0xFF for i in range(1, 4))
    high = j >= 4
    sc = torch.where(high, (third & 0xF) | ((first >> 6) << 4), first & 63)
    m = torch.where(high, (third >> 4) | ((second >> 6) << 4), second & 63)
    scale = d.unsqueeze(1) * sc.to(torch.float32)
    offset = -(dmin.unsqueeze(1) * m.to(torch.float32))
    return d, dmin, sc, m, scale, offset


def k4_scales(
    w: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_K's and Q5_K's first 16 bytes as four int32 words ``w`` ``[n, 4]`` (any strides;
    ``d | dmin``, then bytes ``first``, ``second``, ``third`` of ``get_scale_min_k4``,
    little-endian) -> the super-blocks' ``d``, ``dmin`` ``[n]`` float32, ``sc``, ``m``
    ``[n, 8]`` int32 (the 6-bit block scales and mins) and the block scales ``d sc`` and
    offsets ``-(dmin m)``, ``[n, 8]`` float32. One compiled loop where
    ``quant_core.kernels`` allows (exact conversions and one IEEE multiply per value: the
    same bits as eager), else the same function eagerly."""
    return switch.compiled_or(_k4_scales_kernel, "k4_scales", w)


def _q4_k_codes(w: torch.Tensor) -> torch.Tensor:
    """``[n, 36]`` int32 words of whole Q4_K blocks -> ``[n, 4, 2, 8]`` words of codes (as
    ``signed_nibbles_eager`` of words 4..35) The 4 and 8 are constants of the graph, so
    that Inductor's loop over a block's 32 words has fixed bounds (no tail test, no
    division of a symbolic size per vector).

    The nibble words are read through a ``pad`` by one empty row of 8 words, dropped at
    once: the values are the same, but Inductor then reads each vector of 8 words with a
    masked load (``VecMask::loadu``, one ``vpmaskmovd``) instead of
    ``Vectorized<int32_t>::loadu(ptr, 8)``, which copies the 32 bytes into a stack buffer
    (g++ 12 moves them as two 16-byte halves) and reads them back as one 32-byte vector:
    a store-forwarding stall on every vector read. That stall, not the memory, made the
    nibble pass write its 16.8 MB of codes (4096 x 4096) at about a quarter of a copy's
    speed; the mask (``row < 4`` inside a loop of 4 rows) folds away when compiled.

    ``u - 8`` per byte as ``((u | 0x80) - 8) ^ 0x80`` (``_minus_8``: ``u`` used once),
    where a sign extension of the flipped nibble (``v | (v & 8) * 30``) read it twice:
    Inductor repeats a masked load and its arithmetic for every use, so each store cost
    two loads and five operations more. The same bytes; 4096 x 4096, one thread, a
    fresh read: about 6% to 10% less time in this kernel (``docs/maintainers.md``).

    The low and high nibbles are a broadcast over ``[n, row, half, 8]`` (shifted by ``4
    half``), not a ``cat`` of the two: a pointwise expression, which Inductor stores
    straight into the buffer it is copied into (``_q4_k_into_kernel``), where a ``cat``
    is written into a buffer of its own and then copied."""
    q = torch.nn.functional.pad(w[:, 4:].reshape(-1, 4, 8), (0, 0, 0, 1))[:, :4].unsqueeze(2)
    shift = torch.arange(2, dtype=torch.int32, device=w.device).reshape(1, 1, 2, 1) * 4
    return _minus_8((q >> shift) & _LOW)


def _minus_8(u: torch.Tensor) -> torch.Tensor:
    """Per byte of int32 words whose bytes are ``u < 16``: ``u - 8`` as int8. ``u | 0x80``
    is ``u + 128``; minus 8 borrows nothing (``u + 120`` in 120..135), and the xor takes
    128 off again modulo 256."""
    return ((u | _TOP) - 0x08080808) ^ _TOP


def _q4_k_into_kernel(w: torch.Tensor, codes: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``[n, 36]`` int32 words of whole Q4_K blocks -> ``_k4_scales_kernel``'s six tensors,
    the codes (``_q4_k_codes``) written into ``codes`` (``[n, 4, 2, 8]`` int32, a
    ``host_words`` buffer) rather than into a buffer of Inductor's. The scales are
    returned: written into given buffers they lost their vectorized ``[n, 8]`` loop
    (``docs/maintainers.md``, "two tries that lost")."""
    codes.copy_(_q4_k_codes(w))
    return _k4_scales_kernel(w[:, :4])


def host_words(count: int) -> torch.Tensor:
    """``[count]`` int32, uninitialized, in memory from ``malloc`` (a NumPy array's): for a
    decode's largest output, so that its pages are reused from one decode to the next.

    Why not ``torch.empty``. With ``THP_MEM_ALLOC_ENABLE=1`` (the served app's setting)
    torch's CPU allocator asks glibc for every buffer of 2 MB or more with a large
    alignment (``posix_memalign``); glibc serves such a block with an ``mmap`` of its own
    and unmaps it at free, and the alignment's padding keeps every later request above the
    threshold glibc raises to the freed block's size, so each decode's 16 MB of Q4_K codes
    (4096 x 4096) landed on fresh pages: 520 page faults and the kernel zeroing 16 MB per
    load, about a quarter of the load's time (``perf``: ``clear_page_erms``). A plain
    ``malloc`` of the same size is served from the heap once a block that large has been
    freed (glibc's dynamic threshold), so its pages stay mapped: 4096 x 4096 Q4_K, read +
    decode, thread CPU time, separate processes alternating: 6.0x to 6.3x the read ->
    3.9x to 4.4x, faults 620 to 670 -> 140 to 170 per load. NumPy also advises huge pages
    on blocks this large, as torch does. The tensor shares the array's memory
    (``torch.from_numpy``) and keeps it alive."""
    return torch.from_numpy(np.empty(count, dtype=np.int32))


def _q4_k_eager(w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (*_k4_scales_kernel(w[:, :4]), signed_nibbles_eager(w[:, 4:].reshape(-1, 4, 8)))


def q4_k_blocks(
    w: torch.Tensor,
) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor
]:
    """Whole Q4_K blocks as int32 words ``w`` ``[n, 36]`` (contiguous rows of 144 bytes:
    ``d | dmin``, 3 words of scales, 32 words of nibbles) -> ``k4_scales``' six tensors
    (``d``, ``dmin``, ``sc``, ``m``, ``d sc``, ``-(dmin m)``) and the codes ``[n, 4, 2, 8]``
    int32 words whose bytes are int8 ``u - 8`` (``signed_nibbles_eager`` of words 4..35).

    One compiled kernel where ``quant_core.kernels`` allows (one call for the whole decode
    rather than two, the 32 nibble words per block a loop of fixed bounds; the codes
    written into a ``host_words`` buffer, whose pages a later decode reuses), else the
    same formulas eagerly: the same bits either way."""
    if switch.runs_compiled(w):
        codes = host_words(w.shape[0] * 64).view(-1, 4, 2, 8)
        out = switch.try_compiled(_q4_k_into_kernel, "q4_k_blocks_into", w, codes)
        if out is not None:
            return (*out, codes)
    return _q4_k_eager(w)


def _q5_k_codes(w: torch.Tensor) -> torch.Tensor:
    """``[n, 44]`` int32 words of whole Q5_K blocks -> ``[n, 4, 2, 8]`` words of int8
    ``u - 16`` (``block_codes("Q5_K")``'s, in its order: per 64 values ``c``, the low
    nibbles of ``qs`` word row ``c``, then the high ones; bit 4 is bit ``2 c`` or ``2 c + 1``
    of the ``qh`` byte of the same position). ``qh`` (words 4..11) and ``qs`` (12..43) are
    read through a pad, as ``_q4_k_codes`` reads its nibbles (masked loads, no
    store-forwarding stall), and ``u - 16`` per byte is ``((u | 0x80) - 16) ^ 0x80``
    (``_q6_k_code_words``: ``u`` used once)."""
    pad = torch.nn.functional.pad
    qh = pad(w[:, 4:12].reshape(-1, 1, 8), (0, 0, 0, 1))[:, :1]  # [n, 1, 8]
    qs = pad(w[:, 12:44].reshape(-1, 4, 8), (0, 0, 0, 1))[:, :4]  # [n, 4, 8]
    nibble = (torch.arange(2, dtype=torch.int32, device=w.device) * 4).reshape(1, 1, 2, 1)
    lo = (qs.unsqueeze(2) >> nibble) & _LOW  # [n, c, half, 8]
    bit = torch.arange(8, dtype=torch.int32, device=w.device).reshape(1, 4, 2, 1)
    u = lo | (((qh.unsqueeze(1) >> bit) & 0x01010101) << 4)
    return ((u | _TOP) - 0x10101010) ^ _TOP


def _q5_k_into_kernel(w: torch.Tensor, codes: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The codes written into ``codes`` (``[n, 4, 2, 8]`` int32, a ``host_words`` buffer:
    a pointwise expression, stored there in its own loop), the scales returned, as
    ``_q4_k_into_kernel``."""
    codes.copy_(_q5_k_codes(w))
    return _k4_scales_kernel(w[:, :4])


def q5_k_blocks(
    raw: torch.Tensor, eager: bool = False
) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor
]:
    """``[n, 176]`` uint8 Q5_K blocks (contiguous, any address) -> ``k4_scales``' six
    tensors (``d``, ``dmin``, ``sc``, ``m``, ``d sc``, ``-(dmin m)``) and the codes ``[n,
    256]`` int8 ``u - 16`` (``block_codes("Q5_K", raw)``).

    A Q5_K block is 44 whole int32 words: one compiled kernel where ``quant_core.kernels``
    allows, as ``q4_k_blocks`` (``block_codes`` read int16 halves one at a time, and the
    scales were a second call; the codes written into a ``host_words`` buffer); else
    (``eager``: always) ``_k4_scales_kernel`` and ``block_codes`` eagerly: the same bits
    either way."""
    n = raw.shape[0]
    w = aligned(raw).reshape(-1).view(torch.int32).reshape(n, 44)
    if not eager and switch.runs_compiled(w):
        words = host_words(n * 64)
        out = switch.try_compiled(
            _q5_k_into_kernel, "q5_k_blocks_into", w, words.view(n, 4, 2, 8)
        )
        if out is not None:
            return (*out, words.view(torch.int8).reshape(n, 256))
    return (*_k4_scales_kernel(w[:, :4]), block_codes("Q5_K", raw, eager=True))


def _crumb_codes(qs: torch.Tensor, hm: torch.Tensor | None) -> torch.Tensor:
    """Q2_K's or Q3_K's ``qs`` as ``[m, 2, 8]`` int32 words (byte ``32 g + k``: crumb ``r``
    is ``u[128 g + 32 r + k]``'s low 2 bits) and, for Q3_K, ``hmask`` ``hm`` ``[m, 8]``
    words ("bits of ``k``": bit ``4 g + r`` of byte ``k`` is bit 2 of the same ``u``) ->
    ``[m, 2, 4, 8]`` words of int8 codes, value ``128 g + 32 r + 4 i + byte``: ``u - 2``
    (Q2_K) or ``u - 4`` (Q3_K), per byte as ``((u | 0x80) - half) ^ 0x80`` (``_minus_8``:
    ``u`` used once). A broadcast over ``[g, r, word]``: one loop, no ``cat``."""
    r = torch.arange(4, dtype=torch.int32, device=qs.device).reshape(1, 1, 4, 1)
    u = (qs.unsqueeze(2) >> (2 * r)) & 0x03030303
    if hm is None:
        return ((u | _TOP) - 0x02020202) ^ _TOP
    g = torch.arange(2, dtype=torch.int32, device=qs.device).reshape(1, 2, 1, 1)
    u = u | (((hm.reshape(-1, 1, 1, 8) >> (4 * g + r)) & 0x01010101) << 2)
    return ((u | _TOP) - 0x04040404) ^ _TOP


def _q2_k_scales(w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Q2_K's scale words ``w[:, 0:4]`` and ``d | dmin`` word ``w[:, 20]`` (``[n, 21]``
    words of whole blocks) -> ``d``, ``dmin`` ``[n]`` float32, ``sc``, ``m`` ``[n, 16]``
    int32 (byte ``j``'s low and high nibble), ``d sc`` and ``-(dmin m)`` ``[n, 16]``
    float32 (exact conversions, one IEEE multiply per value)."""
    j = torch.arange(16, dtype=torch.int32, device=w.device)
    word = torch.where(
        j < 8,
        torch.where(j < 4, w[:, 0:1], w[:, 1:2]),
        torch.where(j < 12, w[:, 2:3], w[:, 3:4]),
    )  # a select per column, not a gather: one loop over rows of 16
    b = (word >> ((j & 3) * 8)) & 0xFF
    sc, m = b & 0xF, b >> 4
    d = _half(w[:, 20] & 0xFFFF)
    dmin = _half(w[:, 20] >> 16)
    scale = d.unsqueeze(1) * sc.to(torch.float32)
    offset = -(dmin.unsqueeze(1) * m.to(torch.float32))
    return d, dmin, sc, m, scale, offset


def _q2_k_into_kernel(w: torch.Tensor, codes: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``[n, 21]`` int32 words of whole Q2_K blocks (84 bytes: scales[16] | qs[64] | d |
    dmin) -> ``_q2_k_scales``' six tensors; the codes (``_crumb_codes``, ``qs`` read
    through a pad: masked vector loads, ``_q4_k_codes``) written into ``codes`` (``[n, 2,
    4, 8]`` int32, a ``host_words`` buffer), as ``_q4_k_into_kernel``."""
    qs = _through_pad(w, 4, 16).reshape(-1, 2, 8)
    codes.copy_(_crumb_codes(qs, None))
    return _q2_k_scales(w)


def q2_k_blocks(
    raw: torch.Tensor, eager: bool = False
) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor
]:
    """``[n, 84]`` uint8 Q2_K blocks (contiguous, any address) -> ``d``, ``dmin`` ``[n]``
    float32, the 4-bit block scales ``sc`` and mins ``m`` ``[n, 16]`` int32, ``d sc`` and
    ``-(dmin m)`` ``[n, 16]`` float32, and the codes ``[n, 256]`` int8 ``u - 2``
    (``block_codes("Q2_K", raw)``'s bytes).

    A Q2_K block is 21 whole int32 words: one compiled kernel where
    ``quant_core.kernels`` allows, codes and scales from one read of the bytes, the codes
    written into a ``host_words`` buffer (``block_codes`` read int16 halves one at a time
    in scalar loops, and the scales were five eager passes). Else (``eager``: always)
    ``block_codes`` and ``_q2_k_scales`` eagerly: the same bits either way."""
    n = raw.shape[0]
    w = aligned(raw).reshape(-1).view(torch.int32).reshape(n, 21)
    if not eager and switch.runs_compiled(w):
        words = host_words(n * 64)
        out = switch.try_compiled(_q2_k_into_kernel, "q2_k_blocks_into", w, words.view(n, 2, 4, 8))
        if out is not None:
            return (*out, words.view(torch.int8).reshape(n, 256))
    return (*_q2_k_scales(w), block_codes("Q2_K", raw, eager=True))


def _q3_k_scales(s: torch.Tensor, dh: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q3_K's 12 scale bytes as ``[m, 3]`` int32 words ``s`` and ``d``'s fp16 bits ``dh``
    ``[m]`` (low 16 bits) -> the signed block scales ``l - 32`` ``[m, 16]`` int32 (``l_j``:
    the low nibble of byte ``j`` (``j < 8``) or the high nibble of byte ``j - 8``, and
    bits ``2 (j / 4)`` of byte ``8 + j % 4`` above it; ``kquant_bytes``' table) and ``d``
    ``[m]`` float32. Shifts per column from ``arange``: one loop over rows of 16."""
    j = torch.arange(16, dtype=torch.int32, device=s.device)
    low_word = torch.where((j & 7) < 4, s[:, 0:1], s[:, 1:2])
    low = (low_word >> ((j & 3) * 8 + (j >> 3) * 4)) & 0xF
    high = (s[:, 2:3] >> ((j & 3) * 8 + (j >> 2) * 2)) & 3
    return (low | (high << 4)) - 32, _half(dh)


def _q3_k_into_kernel(
    w: torch.Tensor, codes: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[n, 28]`` int32 words of Q3_K blocks widened to 112 bytes (``_widened``: hmask
    words 0..7, qs 8..23, scales 24..26, ``d`` the low half of word 27, two bytes of
    padding) -> the signed scales ``l - 32`` ``[n, 16]`` int32, ``d`` ``[n]`` and ``d (l -
    32)`` ``[n, 16]``; the codes (``_crumb_codes``, ``hmask`` and ``qs`` read through a pad:
    masked vector loads, ``_q4_k_codes``) written into ``codes`` (``[n, 2, 4, 8]`` int32,
    a ``host_words`` buffer), as ``_q4_k_into_kernel``."""
    n = w.shape[0]
    codes.copy_(_crumb_codes(_through_pad(w, 8, 16).reshape(n, 2, 8), _through_pad(w, 0, 8)))
    signed, d = _q3_k_scales(w[:, 24:27], w[:, 27])
    return signed, d, d.unsqueeze(1) * signed.to(torch.float32)


def _widened(raw: torch.Tensor, size: int) -> torch.Tensor:
    """``[n, k]`` uint8 blocks -> ``[n, size / 4]`` int32 words (``size >= k``, a multiple
    of 4): each block copied to the start of ``size`` bytes of a ``host_words`` buffer
    (the padding left unwritten, never read), so that every block starts on a word
    boundary. One strided copy of the bytes (4096 x 4096 Q3_K: about 1 ms, a read of
    them), where a block of 110 bytes read in place is either int16 halves one at a time
    or, two blocks at a time, one kernel per block of the pair: a graph that writes both
    halves of one buffer is functionalized into a loop that computes both and reads the
    buffer back (``docs/maintainers.md``, December 7, twelfth stop)."""
    n, k = raw.shape
    words = host_words(n * size // 4)
    words.view(torch.uint8).view(n, size)[:, :k].copy_(raw)
    return words.view(n, size // 4)


def q3_k_blocks(
    raw: torch.Tensor, eager: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[n, 110]`` uint8 Q3_K blocks (contiguous, any address) -> codes ``[n, 256]`` int8
    ``u - 4`` (``block_codes("Q3_K", raw)``'s bytes), the signed block scales ``l - 32``
    ``[n, 16]`` int32, ``d`` ``[n]`` float32 and ``d (l - 32)`` ``[n, 16]`` (one IEEE
    multiply each).

    Compiled where ``quant_core.kernels`` allows: the blocks widened to 112 bytes, 28
    aligned int32 words each (``_widened``: one copy), then one kernel for codes, scales
    and ``d`` (``_q3_k_into_kernel``), the codes written into a ``host_words`` buffer
    (``block_codes`` read int16 halves one at a time in scalar loops, and the scale
    unpacking was an eager chain of byte passes and ``cat``s). Else (``eager``: always)
    ``block_codes`` and ``_q3_k_scales`` over int16 halves: the same bits."""
    n = raw.shape[0]
    if not eager and switch.runs_compiled(raw):
        w = _widened(raw, 112)
        words = host_words(n * 64)
        out = switch.try_compiled(_q3_k_into_kernel, "q3_k_blocks_into", w, words.view(n, 2, 4, 8))
        if out is not None:
            return (words.view(torch.int8).reshape(n, 256), *out)
    codes = block_codes("Q3_K", raw, eager=eager)
    h = aligned(raw).view(torch.int16)  # scales at halves 48..53, d at half 54
    signed, d = _q3_k_scales(_words(h, 48, 3), h[:, 54].to(torch.int32))
    return codes, signed, d, d.unsqueeze(1) * signed.to(torch.float32)


# --- word kernels over int16 views of blocks of any even size ---------------------------
#
# A block of ``size`` bytes (``size`` even: Q5_0's 22, TQ1_0's 54, ...) read as ``size / 2``
# int16 halves: two halves make an int32 word of 4 consecutive bytes, whatever the
# block's alignment (a block of 22 bytes starts on a 4-byte boundary one time in two).
# Every kernel below reads its words once and writes the codes as int32 words (4 int8 or
# uint8 codes each), so that Inductor emits one vectorized loop over blocks (its code for
# uint8 tensors is poor); eagerly the same functions are a few passes over int32 words.


def _words(h: torch.Tensor, first: int, count: int) -> torch.Tensor:
    """``[n, k]`` int16 halves -> ``[n, count]`` int32 words: word ``i`` is the 4 bytes at
    halves ``first + 2 i``, ``first + 2 i + 1`` (little-endian)."""
    stop = first + 2 * count
    lo = h[:, first:stop:2].to(torch.int32) & 0xFFFF
    return lo | (h[:, first + 1 : stop : 2].to(torch.int32) << 16)


def _crumbs_of(w: torch.Tensor, r: int) -> torch.Tensor:
    """Per byte of words ``w``: bits ``2 r, 2 r + 1``."""
    return (w >> (2 * r)) & 0x03030303


def _bit_of(w: torch.Tensor, b: int) -> torch.Tensor:
    """Per byte of words ``w``: bit ``b``, as 0 or 1."""
    return (w >> b) & 0x01010101


def _signed(u: torch.Tensor, bits: int) -> torch.Tensor:
    """Per byte of int32 words whose bytes are ``u < 2^bits``: ``u - 2^(bits - 1)`` as int8
    (two's complement). ``v = u ^ half`` is that value's low ``bits`` bits; its sign bit
    (``half``) copied into the bits above it gives the byte (shifts and ORs: no carry
    crosses a byte, and no multiply overflows int32)."""
    half = (1 << (bits - 1)) * 0x01010101
    v = u ^ half
    m = v & half
    for s in range(1, 9 - bits):
        v = v | (m << s)
    return v


def _spread4(nibble: torch.Tensor) -> torch.Tensor:
    """4-bit values -> int32 words whose byte ``j`` is bit ``j`` of the value (0 or 1): the
    multiply puts bit ``j`` at bit ``8 j`` (the four shifted copies 0, 7, 14, 21 bits up
    do not overlap: no carries)."""
    return (nibble * 0x00204081) & 0x01010101


def _q5_words(h: torch.Tensor, qh_at: int, qs_at: int) -> torch.Tensor:
    """Q5_0/Q5_1: ``[n, 8]`` words of ``u - 16`` as int8 (``u`` = low nibble | bit ``j``
    of ``qh`` << 4 for value ``j``)."""
    qh = _words(h, qh_at, 1)
    w = _words(h, qs_at, 4)
    low = torch.cat([w & _LOW, (w >> 4) & _LOW], dim=1)  # values 0..15, then 16..31
    j = torch.arange(8, dtype=torch.int32, device=h.device)
    high = _spread4((qh >> (4 * j)) & 0xF) << 4
    return _signed(low | high, 5)


def _q5_0_kernel(h: torch.Tensor) -> torch.Tensor:
    return _q5_words(h, 1, 3)  # d | qh | qs


def _q5_1_kernel(h: torch.Tensor) -> torch.Tensor:
    return _q5_words(h, 2, 4)  # d | min | qh | qs


def _q8_0_kernel(h: torch.Tensor) -> torch.Tensor:
    return _words(h, 1, 8)  # d | 32 int8 codes


def _tq2_0_kernel(h: torch.Tensor) -> torch.Tensor:
    n = h.shape[0]
    w = _words(h, 0, 16).reshape(n, 2, 1, 8)  # 64 bytes: [half g, word of k]
    return torch.cat([_crumbs_of(w, r) for r in range(4)], dim=2).reshape(n, 64)


_TRIT_POWERS = (1, 3, 9, 27, 81)


def _trit_words(w: torch.Tensor, count: int) -> torch.Tensor:
    """``[n, k]`` words of TQ1_0 bytes -> ``[n, count, k]`` words: per byte ``b``, trit
    ``i`` = ``((b 3^i) & 0xFF) 3 >> 8``, computed on the even and the odd bytes of each
    word as two 16-bit lanes (``b 81 < 2^15``: no lane overflows into the next, and the
    high lane stays below 2^31)."""
    even = w & 0x00FF00FF
    odd = (w >> 8) & 0x00FF00FF
    out = []
    for p in _TRIT_POWERS[:count]:
        t_even = ((((even * p) & 0x00FF00FF) * 3) >> 8) & 0x00030003
        t_odd = ((((odd * p) & 0x00FF00FF) * 3) >> 8) & 0x00030003
        out.append(t_even | (t_odd << 8))
    return torch.stack(out, dim=1)


def _tq1_0_kernel(h: torch.Tensor) -> torch.Tensor:
    n = h.shape[0]
    w = _words(h, 0, 13)  # 52 bytes: 32 of values k + 32 i, 16 of 160 + k + 16 i, 4
    parts = (_trit_words(w[:, :8], 5), _trit_words(w[:, 8:12], 5), _trit_words(w[:, 12:], 4))
    return torch.cat([p.reshape(n, -1) for p in parts], dim=1)


def _q2_k_kernel(h: torch.Tensor) -> torch.Tensor:
    n = h.shape[0]
    qs = _words(h, 8, 16).reshape(n, 2, 1, 8)  # scales[16] | qs[64] | d | dmin
    u = torch.cat([_crumbs_of(qs, r) for r in range(4)], dim=2)
    return _signed(u, 2).reshape(n, 64)


def _q3_k_kernel(h: torch.Tensor) -> torch.Tensor:
    n = h.shape[0]
    hm = _words(h, 0, 8)  # hmask[32] | qs[64] | scales[12] | d
    qs = _words(h, 16, 16).reshape(n, 2, 8)
    rows = [
        _crumbs_of(qs[:, g], r) | (_bit_of(hm, 4 * g + r) << 2)
        for g in range(2)
        for r in range(4)
    ]
    return _signed(torch.stack(rows, dim=1), 3).reshape(n, 64)


def _q5_k_kernel(h: torch.Tensor) -> torch.Tensor:
    n = h.shape[0]
    qh = _words(h, 8, 8)  # d | dmin | scales[12] | qh[32] | qs[128]
    qs = _words(h, 24, 32).reshape(n, 4, 8)
    rows = []
    for c in range(4):
        w = qs[:, c]
        rows.append((w & _LOW) | (_bit_of(qh, 2 * c) << 4))
        rows.append(((w >> 4) & _LOW) | (_bit_of(qh, 2 * c + 1) << 4))
    return _signed(torch.stack(rows, dim=1), 5).reshape(n, 64)


def _q6_k_kernel(h: torch.Tensor) -> torch.Tensor:
    n = h.shape[0]
    ql = _words(h, 0, 32).reshape(n, 2, 2, 8)  # ql[128] | qh[64] | scales[16] | d
    qh = _words(h, 64, 16).reshape(n, 2, 8)
    rows = []
    for g in range(2):
        for r in range(4):
            w = ql[:, g, r % 2]
            lo = w & _LOW if r < 2 else (w >> 4) & _LOW
            rows.append(lo | (_crumbs_of(qh[:, g], r) << 4))
    return _signed(torch.stack(rows, dim=1), 6).reshape(n, 64)


_BLOCK_KERNELS = {
    "Q5_0": _q5_0_kernel,
    "Q5_1": _q5_1_kernel,
    "Q8_0": _q8_0_kernel,
    "TQ2_0": _tq2_0_kernel,
    "TQ1_0": _tq1_0_kernel,
    "Q2_K": _q2_k_kernel,
    "Q3_K": _q3_k_kernel,
    "Q5_K": _q5_k_kernel,
    "Q6_K": _q6_k_kernel,
}


_VALUES = {name: 32 if name in ("Q5_0", "Q5_1", "Q8_0") else 256 for name in _BLOCK_KERNELS}
_PIECE_WORDS = 1 << 15  # int32 words of codes per eager piece: 128 KiB temporaries


def _eager_in_pieces(fn: object, h: torch.Tensor, words: int) -> torch.Tensor:
    """``fn(h)`` (``[n, words]`` int32) run eagerly on pieces of rows into one output: each
    operator's temporary is a piece's (128 KiB, reused by the allocator and in cache)
    rather than the whole tensor's (fresh pages, faulted in one by one: 4096 x 4096 Q5_0
    took several times longer in one piece)."""
    n = h.shape[0]
    rows = max(1, _PIECE_WORDS // words)
    if n <= rows:
        return fn(h)  # type: ignore[operator]
    out = torch.empty((n, words), dtype=torch.int32)
    for start in range(0, n, rows):
        out[start : start + rows] = fn(h[start : start + rows])  # type: ignore[operator]
    return out


def block_codes(name: str, raw: torch.Tensor, eager: bool = False) -> torch.Tensor:
    """``[n, size]`` uint8 GGUF blocks of type ``name`` (one of ``block_codes_types``,
    ``size`` even, contiguous, any address) -> ``[n, values per block]`` codes, byte for
    byte as the readable decoders give them: int8 ``u + qmin`` (Q5_0, Q5_1: ``u - 16``;
    Q8_0 the stored int8; Q2_K ``u - 2``, Q3_K ``u - 4``, Q5_K ``u - 16``, Q6_K
    ``u - 32``), uint8 trits ``t`` for TQ1_0 and TQ2_0. One compiled loop where
    ``quant_core.kernels`` allows, else the same function eagerly (``eager``: always)."""
    n = raw.shape[0]
    h = aligned(raw).view(torch.int16)
    fn = _BLOCK_KERNELS[name]
    out = None if eager else switch.try_compiled(fn, f"block_codes_{name}", h)
    if out is None:
        out = _eager_in_pieces(fn, h, _VALUES[name] // 4)
    dtype = torch.uint8 if name.startswith("TQ") else torch.int8
    return out.view(dtype).reshape(n, -1)


block_codes_types = tuple(_BLOCK_KERNELS)


# --- whole blocks: codes and fp16 d in one compiled call --------------------------------
#
# Q4_0 and Q8_0 (18 and 34 bytes: d, then the codes) and Q6_K (210 bytes: codes, int8
# scales, d). Each used to be several passes: ``block_nibbles``' eager chain (4096 x 4096
# Q4_0: a ``cat`` of strided slices alone ~12 ms, 10x the read of its bytes), and for every
# type the fp16 ``d`` read again by ``block_halves`` (a second pass over all the bytes:
# one strided int16 per block touches every cache line), Q6_K's scales copied, widened and
# multiplied eagerly.


def _nibble_words(h: torch.Tensor, first: int, signed: bool) -> torch.Tensor:
    """16 nibble bytes at halves ``first .. first + 7`` (byte ``j``: ``u[j] | u[j + 16] <<
    4``) -> ``[n, 8]`` words of codes: the low nibbles (values 0..15), then the high ones
    (16..31); int8 ``u - 8`` when ``signed`` (Q4_0, Q4_1), else uint8 ``u`` (IQ4_NL)."""
    n = h.shape[0]
    y = _words(h, first, 4).reshape(n, 1, 4)
    half = torch.arange(2, dtype=torch.int32, device=h.device).reshape(1, 2, 1) * 4
    if not signed:
        return ((y >> half) & _LOW).reshape(n, 8)
    return _minus_8((y >> half) & _LOW).reshape(n, 8)


def _q5_code_words(h: torch.Tensor, qh_at: int, qs_at: int) -> torch.Tensor:
    """Q5_0's or Q5_1's ``qh`` word (halves ``qh_at``, ``qh_at + 1``) and 16 bytes of low
    nibbles (from half ``qs_at``) -> ``[n, 8]`` words of int8 ``u - 16`` (``_q5_words``'
    bytes): value ``4 k + i`` of word ``k`` takes bit ``4 k + i`` of ``qh`` (``_spread4``).
    ``u - 16`` per byte as ``((u | 0x80) - 16) ^ 0x80`` (``_q6_k_code_words``), and the
    nibble words as a broadcast over ``[half, word]`` rather than a ``cat``."""
    n = h.shape[0]
    qh = _words(h, qh_at, 1).reshape(n, 1, 1)
    w = _words(h, qs_at, 4).reshape(n, 1, 4)
    half = torch.arange(2, dtype=torch.int32, device=h.device).reshape(1, 2, 1) * 4
    k = torch.arange(8, dtype=torch.int32, device=h.device).reshape(1, 2, 4) * 4
    u = ((w >> half) & _LOW) | (_spread4((qh >> k) & 0xF) << 4)
    return (((u | _TOP) - 0x10101010) ^ _TOP).reshape(n, 8)


def _q4_0_blocks_kernel(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _nibble_words(h, 1, signed=True), _half(h[:, 0])  # d | qs


def _q8_0_blocks_kernel(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _q8_0_kernel(h), _half(h[:, 0])  # d | 32 int8


def _q5_0_blocks_kernel(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _q5_code_words(h, 1, 3), _half(h[:, 0])  # d | qh | qs


def _iq4_nl_blocks_kernel(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _nibble_words(h, 1, signed=False), _half(h[:, 0])  # d | qs


_LEGACY_KERNELS = {
    "Q4_0": _q4_0_blocks_kernel,
    "Q8_0": _q8_0_blocks_kernel,
    "Q5_0": _q5_0_blocks_kernel,
    "IQ4_NL": _iq4_nl_blocks_kernel,
}


def legacy_blocks(
    name: str, raw: torch.Tensor, eager: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[n, size]`` uint8 Q4_0, Q8_0, Q5_0 or IQ4_NL blocks (contiguous, any address) ->
    the codes ``[n, 32]`` (Q4_0: int8 ``u - 8``, as ``block_nibbles(raw, 2, signed=True)``;
    Q8_0: the stored int8; Q5_0: int8 ``u - 16``, as ``block_codes``; IQ4_NL: the uint8
    level indices ``u``, as ``block_nibbles(raw, 2, signed=False)``) and ``d`` ``[n]``
    float32 (``block_halves(raw, 0)``: an exact fp16 conversion). One compiled loop where
    ``quant_core.kernels`` allows (codes and ``d`` from one read of the bytes, fused: no
    temporaries), else (``eager``: always) the eager functions named: the same bits
    either way."""
    n = raw.shape[0]
    if not eager:
        h = aligned(raw).view(torch.int16)
        out = switch.try_compiled(_LEGACY_KERNELS[name], f"legacy_blocks_{name}", h)
        if out is not None:
            words, d = out
            dtype = torch.uint8 if name == "IQ4_NL" else torch.int8
            return words.view(dtype).reshape(n, 32), d
    # eager: the compiled path is off, too small, or failed just now
    if name in ("Q4_0", "IQ4_NL"):
        codes = block_nibbles(raw, 2, signed=name == "Q4_0")
    else:
        codes = block_codes(name, raw, eager=True)
    return codes, block_halves(raw, 0)


legacy_blocks_types = tuple(_LEGACY_KERNELS)


def _q4_1_blocks_kernel(h: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return _nibble_words(h, 2, signed=True), _half(h[:, 0]), _half(h[:, 1])  # d | m | qs


def _q5_1_blocks_kernel(h: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return _q5_code_words(h, 2, 4), _half(h[:, 0]), _half(h[:, 1])  # d | m | qh | qs


_MIN_KERNELS = {"Q4_1": _q4_1_blocks_kernel, "Q5_1": _q5_1_blocks_kernel}


def min_blocks(
    name: str, raw: torch.Tensor, eager: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[n, size]`` uint8 Q4_1 or Q5_1 blocks (contiguous, any address) -> the codes
    ``[n, 32]`` int8 (Q4_1: ``u - 8``, as ``block_nibbles(raw, 4, signed=True)``; Q5_1:
    ``u - 16``, as ``block_codes``), ``d`` and ``min`` ``[n]`` float32
    (``block_halves(raw, 0)``, ``block_halves(raw, 2)``). One compiled loop where
    ``quant_core.kernels`` allows, as ``legacy_blocks`` (Q4_1 used to be three passes
    over the bytes and an eager chain; Q5_1 three calls), else (``eager``: always) the
    eager functions named: the same bits either way."""
    n = raw.shape[0]
    if not eager:
        h = aligned(raw).view(torch.int16)
        out = switch.try_compiled(_MIN_KERNELS[name], f"min_blocks_{name}", h)
        if out is not None:
            words, d, m = out
            return words.view(torch.int8).reshape(n, 32), d, m
    if name == "Q4_1":
        codes = block_nibbles(raw, 4, signed=True)
    else:
        codes = block_codes(name, raw, eager=True)
    return codes, block_halves(raw, 0), block_halves(raw, 2)


min_blocks_types = tuple(_MIN_KERNELS)


def _plus_zero_words(v: torch.Tensor) -> torch.Tensor:
    """Per byte of int32 words whose bytes are FP4 codes (below 16): code 8 -> 0, the rest
    kept (``fp4_plus_zero``). ``x = v ^ 8`` is 0 exactly for code 8, and ``x + 15`` sets
    bit 4 of its byte exactly when ``x`` is not 0 (at most 30: no carry leaves the byte),
    so ``nz * 255`` is a byte mask that keeps ``v`` or clears it."""
    nz = (((v ^ 0x08080808) + 0x0F0F0F0F) >> 4) & 0x01010101
    return v & (nz * 255)


def _e8m0_bits(e: torch.Tensor) -> torch.Tensor:
    """int32 E8M0 exponents ``e`` (0..255) -> the float32 bits of ``2^(e - 127)``, as
    ``torch.ldexp(1, e - 127)`` gives them: ``e << 23`` for ``e`` 1..254, the subnormal
    ``2^-127`` (bit 22) for 0, ``inf`` (``255 << 23``) for 255."""
    return torch.where(e == 0, 0x00400000, e << 23)


def _mxfp4_pairs_kernel(
    h: torch.Tensor, plus_zero: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[m, 17]`` int16 halves of pairs of MXFP4 blocks (34 bytes: ``e`` | 16 bytes, the
    first block's nibble bytes at byte 1, the second's ``e`` at byte 17 and nibbles at
    byte 18, half 9) -> codes ``[2 m, 8]`` words, ``e`` ``[2 m]`` int32, the float32 bits
    of ``2^(e - 127)`` ``[2 m]``. The first block's word ``i`` (bytes ``1 + 4 i ..``) is
    the top 3 bytes of the word at byte ``4 i`` and the low byte of the word at
    ``4 i + 4``."""
    m = h.shape[0]
    a, b = _words(h, 0, 4), _words(h, 2, 4)
    first = (((a >> 8) & 0x00FFFFFF) | (b << 24)).reshape(m, 1, 1, 4)
    second = _words(h, 9, 4).reshape(m, 1, 1, 4)
    block = torch.arange(2, dtype=torch.int32, device=h.device)
    # a where over [pair, block, half, word], not a stack: one loop, no buffer between
    y = torch.where(block.reshape(1, 2, 1, 1) == 0, first, second)
    half = torch.arange(2, dtype=torch.int32, device=h.device).reshape(1, 1, 2, 1) * 4
    codes = (y >> half) & _LOW
    if plus_zero:
        codes = _plus_zero_words(codes)
    e0 = h[:, :1].to(torch.int32) & 0xFF
    e1 = (h[:, 8:9].to(torch.int32) >> 8) & 0xFF
    e = torch.where(block.reshape(1, 2) == 0, e0, e1).reshape(2 * m)
    return codes.reshape(2 * m, 8), e, _e8m0_bits(e)


def _mxfp4_kernel(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _mxfp4_pairs_kernel(h, plus_zero=True)


def _mxfp4_signed_zero_kernel(h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _mxfp4_pairs_kernel(h, plus_zero=False)


def _even_blocks(raw: torch.Tensor) -> torch.Tensor:
    """``[n, size]`` uint8 blocks, ``n`` odd -> ``[n + 1, size]``: a copy of them (on an
    aligned address) and one block of zero bytes after them, so that a kernel over pairs
    of blocks covers them all."""
    n, size = raw.shape
    even = torch.empty((n + 1, size), dtype=torch.uint8, device=raw.device)
    even[:n] = raw
    even[n:] = 0
    return even


def mxfp4_blocks(
    raw: torch.Tensor, plus_zero: bool = True, eager: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[n, 17]`` uint8 MXFP4 blocks (contiguous, any address) -> the FP4 codes ``[n, 32]``
    uint8 (``block_nibbles(raw, 1, signed=False)``, code 8 read as 0 when ``plus_zero``:
    ``fp4_plus_zero``), the E8M0 exponents ``e`` ``[n]`` int32 and the scales
    ``2^(e - 127)`` ``[n]`` float32 (``torch.ldexp``'s bits).

    Compiled where ``quant_core.kernels`` allows: two blocks are 17 int16 halves (one
    block's 17 bytes are never a whole count of halves), read in one loop for codes,
    ``e`` and scales (the eager path is five passes: the nibble chain, the ``e`` column,
    ``ldexp``, and ``fp4_plus_zero``'s). An odd ``n`` is decoded as ``n + 1`` blocks, the
    bytes copied once after a zero block (``_even_blocks``), and the results are views
    of their first ``n`` rows: a copy of the bytes costs about a read of them, the eager
    path several times that. Else (``eager``: always) the eager functions named: the
    same bits either way."""
    n = raw.shape[0]
    if not eager and switch.runs_compiled(raw):
        source = aligned(raw) if n % 2 == 0 else _even_blocks(raw)
        h = source.reshape(-1).view(torch.int16).reshape(-1, 17)
        kernel = _mxfp4_kernel if plus_zero else _mxfp4_signed_zero_kernel
        key = "mxfp4_blocks" if plus_zero else "mxfp4_blocks_signed_zero"
        out = switch.try_compiled(kernel, key, h)
        if out is not None:
            words, e, bits = out
            codes = words.view(torch.uint8).reshape(-1, 32)
            return codes[:n], e[:n], bits.view(torch.float32)[:n]
    e = raw[:, 0].to(torch.int32)
    s = torch.ldexp(torch.ones(n), (e - 127).to(torch.float32))
    codes = block_nibbles(raw, 1, signed=False)
    if plus_zero:
        codes = torch.where(codes == 8, 0, codes)  # fp4_plus_zero's eager form
    return codes, e, s


def _through_pad(w: torch.Tensor, first: int, count: int) -> torch.Tensor:
    """``w[:, first : first + count]`` (``count`` a multiple of 8) read through a ``pad`` by
    one empty row of 8 words, dropped at once: the same values, but Inductor reads each
    vector of 8 words with a masked load (``_q4_k_codes``: no store-forwarding stall)."""
    rows = count // 8
    q = w[:, first : first + count].reshape(-1, rows, 8)
    return torch.nn.functional.pad(q, (0, 0, 0, 1))[:, :rows].reshape(-1, count)


def _q6_k_code_words(ql: torch.Tensor, qh: torch.Tensor) -> torch.Tensor:
    """One Q6_K block per row: ``ql`` ``[m, 32]`` and ``qh`` ``[m, 16]`` words -> ``[m, 64]``
    words of int8 ``u - 32`` (``_q6_k_kernel``'s, as broadcasts over ``[half g, nibble s,
    word pair p, 8]``: value row ``r = 2 s + p``, one loop, no ``stack``).

    ``u - 32`` per byte (``u < 64``) as ``((u | 0x80) - 32) ^ 0x80``: ``u | 0x80`` is
    ``u + 128`` and minus 32 borrows nothing (``u + 96`` in 96..159), and the xor takes 128
    off again modulo 256. ``u`` is used once (``_signed`` reads it three times, and
    Inductor repeats a masked load and its arithmetic for every use). In int32 the top
    byte's subtraction wraps around (two's complement, as every other path here)."""
    m = ql.shape[0]
    s = torch.arange(2, dtype=torch.int32, device=ql.device).reshape(2, 1, 1) * 4
    lo = (ql.reshape(m, 2, 1, 2, 8) >> s) & _LOW
    r = torch.arange(4, dtype=torch.int32, device=ql.device).reshape(4, 1) * 2
    hi = ((qh.reshape(m, 2, 1, 8) >> r) & 0x03030303).reshape(m, 2, 2, 2, 8)
    u = lo | (hi << 4)
    return (((u | _TOP) - 0x20202020) ^ _TOP).reshape(m, 64)


def _int8_bytes(s: torch.Tensor) -> torch.Tensor:
    """``[m, k]`` words -> ``[m, 4 k]`` int32: their bytes as int8, sign-extended."""
    m = s.shape[0]
    j = torch.arange(4, dtype=torch.int32, device=s.device) * 8
    return ((s.unsqueeze(2) << (24 - j)) >> 24).reshape(m, -1)


def _q6_k_into_kernel(
    w: torch.Tensor, codes: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[n, 53]`` int32 words of Q6_K blocks widened to 212 bytes (``_widened``: ql words
    0..31, qh 32..47, int8 scales 48..51, ``d`` the low half of word 52) -> scales ``[n,
    16]`` int32, ``d`` ``[n]``, ``d sc`` ``[n, 16]``; the codes (``_q6_k_code_words``, ``ql``
    and ``qh`` read through a pad: masked vector loads) written into ``codes`` (``[n, 64]``
    int32 words, a ``host_words`` buffer), as ``_q4_k_into_kernel``."""
    codes.copy_(_q6_k_code_words(_through_pad(w, 0, 32), _through_pad(w, 32, 16)))
    sc = _int8_bytes(w[:, 48:52])
    d = _half(w[:, 52])
    return sc, d, d.unsqueeze(1) * sc.to(torch.float32)


def q6_k_blocks(
    raw: torch.Tensor, eager: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[n, 210]`` uint8 Q6_K blocks (contiguous, any address) -> codes ``[n, 256]`` int8
    ``u - 32`` (``block_codes("Q6_K", raw)``), the int8 block scales ``sc`` ``[n, 16]`` as
    int32, ``d`` ``[n]`` float32 and the block scales ``d sc`` ``[n, 16]`` (one IEEE
    multiply each).

    Compiled where ``quant_core.kernels`` allows: the blocks widened to 212 bytes, 53
    aligned int32 words each (``_widened``: one copy of the bytes), then one kernel for
    codes, scales and ``d`` (``_q6_k_into_kernel``), the codes written into a
    ``host_words`` buffer. It replaced a kernel over pairs of blocks (105 words, the
    second block's words joined from two) that wrote each block's codes into its half of
    the buffer: functionalized into one loop that computed both blocks' codes for every
    vector and read the buffer back (4096 x 4096, thread CPU time, same process: 12.6 to
    13.5 ms -> 9.6 to 10.1 ms). Else (``eager``: always) ``block_codes`` and eager
    operators: the same bits."""
    n = raw.shape[0]
    if not eager and switch.runs_compiled(raw):
        w = _widened(raw, 212)
        words = host_words(n * 64)
        out = switch.try_compiled(_q6_k_into_kernel, "q6_k_blocks_into", w, words.view(n, 64))
        if out is not None:
            return (words.view(torch.int8).reshape(n, 256), *out)
    codes = block_codes("Q6_K", raw, eager=eager)
    sc = raw[:, 192:208].contiguous().view(torch.int8).to(torch.int32)
    d = block_halves(raw, 208)
    return codes, sc, d, d.unsqueeze(1) * sc.to(torch.float32)
