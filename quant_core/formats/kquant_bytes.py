"""GGUF block bytes of the K-quants and IQ4 types (``block_q2_K`` ... ``block_iq4_xs`` in
llama.cpp's ``ggml-common.h``), to and from ``QuantizedTensor``.

Every layout is per super-block of 256 values (IQ4_NL: per block of 32), little-endian;
``d``, ``dmin`` are fp16; ``u`` the stored codes (``q - qmin`` for the min types, ``q + 4``
for Q3_K, ``q + 32`` for Q6_K, the level index for IQ4); ``u[i]`` is value ``i`` of the
super-block. "Bits of ``k``": ``u[32 b + k]`` for ``b = 0..7`` in bit ``b`` of byte ``k``.

Q2_K (84): scales[16] | qs[64] | d | dmin.
  scales[j] = sc_j | m_j << 4 (block j of 16).
  qs[32 h + k] = u[128 h + k] | u[128 h + 32 + k] << 2 | u[.. + 64 + k] << 4 | u[.. + 96 + k] << 6.
Q3_K (110): hmask[32] | qs[64] | scales[12] | d.
  hmask: bit 2 of u, "bits of k"; qs: the low 2 bits, as Q2_K's qs.
  scales, ``l_j = sc_j + 32`` (6 bits), drawn as gguf-py does (A..P = l_0 .. l_15):
       0: IIIIAAAA   4: MMMMEEEE   8: MMIIEEAA
       1: JJJJBBBB   5: NNNNFFFF   9: NNJJFFBB
       2: KKKKCCCC   6: OOOOGGGG  10: OOKKGGCC
       3: LLLLDDDD   7: PPPPHHHH  11: PPLLHHDD
  (low nibbles in bytes 0..7; the high two bits of l_{i + 4 k} in bits 2k of byte 8 + i).
Q4_K (144): d | dmin | scales[12] | qs[128].
  scales, 6-bit sc_j (A..H) and m_j (a..h) for the 8 blocks of 32:
       0: EEAAAAAA   4: eeaaaaaa   8: eeeeEEEE
       1: FFBBBBBB   5: ffbbbbbb   9: ffffFFFF
       2: GGCCCCCC   6: ggcccccc  10: ggggGGGG
       3: HHDDDDDD   7: hhdddddd  11: hhhhHHHH
  qs[32 c + k] = u[64 c + k] | u[64 c + 32 + k] << 4.
Q5_K (176): d | dmin | scales[12] (as Q4_K) | qh[32] | qs[128].
  qh: bit 4 of u, "bits of k"; qs: the low 4 bits, as Q4_K's qs.
Q6_K (210): ql[128] | qh[64] | scales[16] (int8 sc_j) | d.
  for half h (128 values) and k < 32, with lo = u & 15, hi = u >> 4 of u[128 h + 32 r + k]:
  ql[64 h + k] = lo(r=0) | lo(r=2) << 4; ql[64 h + 32 + k] = lo(r=1) | lo(r=3) << 4;
  qh[32 h + k] = hi(r=0) | hi(r=1) << 2 | hi(r=2) << 4 | hi(r=3) << 6.
IQ4_NL (18): d | qs[16], qs[k] = u[k] | u[16 + k] << 4.
IQ4_XS (136): d | scales_h (uint16) | scales_l[4] | qs[128].
  ``l_j = sc_j + 32`` (6 bits): low nibble of l_j in scales_l[j / 2] (j even: low, odd: high
  nibble), its high 2 bits in bits 2j of scales_h; qs: per block of 32 as IQ4_NL's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ..granularity import layout_for
from .bytes_kernels import (
    aligned,
    block_halves,
    f16_bytes,
    k4_scales,
    legacy_blocks,
    q2_k_blocks,
    q3_k_blocks,
    q4_k_blocks,
    q5_k_blocks,
    q6_k_blocks,
)
from .gguf_types import QK_K, ggml_type
from .scales import StoredScales, super_block_shape

if TYPE_CHECKING:
    from ..quantized_tensor import QuantizedTensor

__all__ = ["from_blocks", "to_blocks"]

KQUANT_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS")


def _f16_values(b: torch.Tensor) -> torch.Tensor:
    """``[n, 2]`` uint8 -> ``[n]`` float32."""
    return b.contiguous().view(torch.float16).reshape(-1).to(torch.float32)


def _shifts(k: int, step: int) -> torch.Tensor:
    return torch.arange(0, k * step, step, dtype=torch.int32)


def _pack(fields: torch.Tensor, width: int) -> torch.Tensor:
    """``[..., k, m]`` fields of ``width`` bits -> ``[..., m]`` bytes: field ``i`` in bits
    ``width * i``."""
    k = fields.shape[-2]
    shifted = fields.to(torch.int32) << _shifts(k, width).reshape(k, 1)
    return shifted.sum(dim=-2).to(torch.uint8)


def _unpack(b: torch.Tensor, k: int, width: int) -> torch.Tensor:
    """Inverse of ``_pack``: ``[..., m]`` bytes (uint8, any strides) -> ``[..., k, m]`` uint8
    fields. Byte-wide passes, each writing a contiguous field, and one stack: no int32
    temporaries, no strided writes (decoding a 4096 x 4096 Q4_K tensor took 250x a copy of
    its bytes with int32 fields)."""
    mask = (1 << width) - 1
    fields = []
    for i in range(k):
        f = b & mask if i == 0 else b >> (width * i)
        if i and width * (i + 1) < 8:  # the top field needs no mask
            f.bitwise_and_(mask)
        fields.append(f)
    return torch.stack(fields, dim=-2)


def _bits_of_k(bit: torch.Tensor) -> torch.Tensor:
    """``[n, 256]`` bits -> ``[n, 32]`` bytes: bit ``b`` of byte ``k`` is ``bit[32 b + k]``."""
    return _pack(bit.reshape(-1, 8, 32), 1)


def _unbits_of_k(b: torch.Tensor) -> torch.Tensor:
    return _unpack(b, 8, 1).reshape(-1, QK_K)


def _nibbles(u: torch.Tensor, run: int) -> torch.Tensor:
    """``[n, L]`` values < 16 -> ``[n, L / 2]`` bytes: per run of ``2 run`` values, byte
    ``k`` holds value ``k`` (low nibble) and ``run + k`` (high)."""
    n = u.shape[0]
    return _pack(u.reshape(n, -1, 2, run), 4).reshape(n, -1)


def _unnibbles(b: torch.Tensor, run: int) -> torch.Tensor:
    n = b.shape[0]
    return _unpack(b.reshape(n, -1, run), 2, 4).reshape(n, -1)


def _crumbs(u: torch.Tensor) -> torch.Tensor:
    """``[n, 256]`` values < 4 -> ``[n, 64]``: per half ``h``, byte ``32 h + k`` holds
    ``u[128 h + 32 r + k]`` in bits ``2 r``."""
    n = u.shape[0]
    return _pack(u.reshape(n, 2, 4, 32), 2).reshape(n, 64)


def _uncrumbs(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    return _unpack(b.reshape(n, 2, 32), 4, 2).reshape(n, QK_K)


def _k4_scales(sc: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Q4_K/Q5_K: 6-bit ``sc``, ``m`` ``[n, 8]`` -> the 12 scale bytes (module table)."""
    lo_sc, hi_sc = sc[:, :4], sc[:, 4:]
    lo_m, hi_m = m[:, :4], m[:, 4:]
    first = lo_sc | ((hi_sc >> 4) << 6)
    second = lo_m | ((hi_m >> 4) << 6)
    third = (hi_sc & 0xF) | ((hi_m & 0xF) << 4)
    return torch.cat([first, second, third], dim=1).to(torch.uint8)


def _unk4_scales(b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of ``_k4_scales`` (``get_scale_min_k4``)."""
    b = b.to(torch.int32)
    first, second, third = b[:, :4], b[:, 4:8], b[:, 8:12]
    sc = torch.cat([first & 63, (third & 0xF) | ((first >> 6) << 4)], dim=1)
    m = torch.cat([second & 63, (third >> 4) | ((second >> 6) << 4)], dim=1)
    return sc, m


def _q3_scales(l6: torch.Tensor) -> torch.Tensor:
    """Q3_K: ``l = sc + 32`` ``[n, 16]`` (6 bits) -> the 12 scale bytes (module table)."""
    low = l6 & 0xF
    nibbles = low[:, :8] | (low[:, 8:] << 4)
    high = _pack((l6 >> 4).reshape(-1, 4, 4), 2)  # byte i: l_{i + 4k} >> 4 in bits 2k
    return torch.cat([nibbles.to(torch.uint8), high], dim=1)


def _unq3_scales(b: torch.Tensor) -> torch.Tensor:
    b32 = b.to(torch.int32)
    low = torch.cat([b32[:, :8] & 0xF, b32[:, :8] >> 4], dim=1)
    high = _unpack(b[:, 8:12], 4, 2).reshape(-1, 16)
    return low | (high << 4)


def _super_values(t: torch.Tensor | None, what: str, name: str) -> torch.Tensor:
    if t is None:
        raise ValueError(f"a {name} tensor's stored scales lack {what}")
    return t.detach().cpu().reshape(-1).to(torch.float32)


def to_blocks(name: str, qt: QuantizedTensor) -> torch.Tensor:
    """``[n_blocks, type_size]`` uint8: the GGUF blocks of ``qt`` (a tensor of type
    ``name``, one of the K-quants or IQ4), from its codes and stored scales (``d sc``
    is what llama.cpp stores, so ``qt.scale`` is not read but for IQ4_NL's ``d``)."""
    record = ggml_type(name)
    codes = qt.codes.detach().cpu().to(torch.int32).reshape(-1, record.block_size)
    n = codes.shape[0]
    if name == "IQ4_NL":
        d = qt.scale.detach().cpu().reshape(n)
        return torch.cat([f16_bytes(d), _nibbles(codes, 16)], dim=1)
    stored = qt.stored
    if stored is None:
        raise ValueError(f"a {name} tensor stores its scales per super-block: stored is None")
    sc = stored.codes.detach().cpu().to(torch.int32).reshape(n, -1)
    d = f16_bytes(_super_values(stored.super_scale, "d", name))
    if name in ("Q2_K", "Q4_K", "Q5_K"):
        u = codes - qt.config.qmin
        if stored.min_codes is None:
            raise ValueError(f"a {name} tensor's stored scales lack the mins")
        m = stored.min_codes.detach().cpu().to(torch.int32).reshape(n, -1)
        dmin = f16_bytes(_super_values(stored.super_min, "dmin", name))
        if name == "Q2_K":
            scales = (sc | (m << 4)).to(torch.uint8)
            return torch.cat([scales, _crumbs(u), d, dmin], dim=1)
        head = [d, dmin, _k4_scales(sc, m)]
        if name == "Q4_K":
            return torch.cat([*head, _nibbles(u, 32)], dim=1)
        return torch.cat([*head, _bits_of_k(u >> 4), _nibbles(u & 0xF, 32)], dim=1)
    if name == "Q3_K":
        u = codes + 4
        return torch.cat(
            [_bits_of_k(u >> 2), _crumbs(u & 3), _q3_scales(sc + 32), d], dim=1
        )
    if name == "Q6_K":
        u = (codes + 32).reshape(n, 2, 4, 32)
        lo, hi = u & 0xF, u >> 4
        ql = torch.cat(
            [_pack(lo[:, :, 0::2], 4), _pack(lo[:, :, 1::2], 4)], dim=2
        ).reshape(n, 128)
        qh = _pack(hi, 2).reshape(n, 64)
        return torch.cat([ql, qh, (sc & 0xFF).to(torch.uint8), d], dim=1)
    if name == "IQ4_XS":
        l6 = sc + 32
        bits = ((l6 >> 4) << _shifts(8, 2)).sum(dim=1, keepdim=True)  # the uint16
        scales_h = torch.cat([bits & 0xFF, bits >> 8], dim=1).to(torch.uint8)
        scales_l = (l6[:, 0::2] & 0xF) | ((l6[:, 1::2] & 0xF) << 4)
        return torch.cat(
            [d, scales_h, scales_l.to(torch.uint8), _nibbles(codes, 16)], dim=1
        )
    raise ValueError(f"{name!r} is not a K-quant or IQ4 type: {', '.join(KQUANT_TYPES)}")


def _readable_codes(name: str, raw: torch.Tensor, qmin: int) -> torch.Tensor:
    """``[n, 256]`` int8 codes ``u + qmin`` of Q2_K, Q3_K, Q5_K or Q6_K blocks ``raw``, by
    the module docstring's tables (byte-wide passes; the reference of ``bytes_kernels``'
    decoders)."""
    n = raw.shape[0]
    if name == "Q2_K":
        u = _uncrumbs(raw[:, 16:80])
    elif name == "Q3_K":
        u = _uncrumbs(raw[:, 32:96]) | (_unbits_of_k(raw[:, :32]) << 2)
    elif name == "Q5_K":
        u = _unnibbles(raw[:, 48:], 32) | (_unbits_of_k(raw[:, 16:48]) << 4)
    else:  # Q6_K
        ql = _unpack(raw[:, :128].reshape(n, 2, 2, 32), 2, 4)  # [n, h, half, r_pair, k]
        lo = torch.stack(
            [ql[:, :, 0, 0], ql[:, :, 1, 0], ql[:, :, 0, 1], ql[:, :, 1, 1]], dim=2
        )
        hi = _unpack(raw[:, 128:192].reshape(n, 2, 32), 4, 2)
        u = (lo | (hi << 4)).reshape(n, QK_K)
    return u.view(torch.int8).add_(qmin)  # u < 64: the same bits as int8


def from_blocks(name: str, raw: torch.Tensor, shape: tuple[int, ...]) -> QuantizedTensor:
    """The ``QuantizedTensor`` (float32 on CPU, config ``ggml_type(name).config``) stored in
    the GGUF blocks ``raw`` (``[n_blocks, type_size]`` uint8) of a tensor of ``shape``."""
    from ..quantized_tensor import QuantizedTensor

    record = ggml_type(name)
    cfg = record.config
    layout = layout_for(shape, cfg.granularity)
    n = raw.shape[0]
    per = record.block_size // layout.block_len  # scales per GGUF block
    offset = None
    stored = None
    z = None  # zeros unless a min type sets qmin
    if name == "IQ4_NL":
        codes, d = legacy_blocks(name, raw)  # level indices, d: one kernel
        scale = d
    else:
        if name in ("Q2_K", "Q4_K", "Q5_K"):
            if name == "Q2_K":
                if cfg.qmin == -2:  # scales | qs | d | dmin: one kernel
                    d, dmin, sc, m, scale, offset, codes = q2_k_blocks(raw)
                else:
                    b = raw[:, :16].to(torch.int32)
                    sc, m = b & 0xF, b >> 4
                    codes = _readable_codes(name, raw, cfg.qmin)
                    d, dmin = block_halves(raw, 80), block_halves(raw, 82)
                    scale = d.unsqueeze(1) * sc.to(torch.float32)
                    offset = -(dmin.unsqueeze(1) * m.to(torch.float32))
            else:
                raw = aligned(raw)
                w = raw.view(torch.int32)
                if name == "Q4_K":  # d | dmin | scales | nibbles: one kernel
                    d, dmin, sc, m, scale, offset, words = q4_k_blocks(w)
                    codes = words.view(torch.int8)
                elif cfg.qmin == -16:  # d | dmin | scales | qh | qs: one kernel
                    d, dmin, sc, m, scale, offset, codes = q5_k_blocks(raw)
                else:
                    d, dmin, sc, m, scale, offset = k4_scales(w[:, :4])  # d | dmin | scales
                    codes = _readable_codes(name, raw, cfg.qmin)
            z = torch.full((n * per,), cfg.qmin, dtype=torch.int32)
            signed = sc
        elif name == "Q3_K":
            if cfg.qmin == -4:  # codes, scales, d and d (l - 32): one kernel
                codes, signed, d, scale = q3_k_blocks(raw)
            else:
                codes = _readable_codes(name, raw, cfg.qmin)
                signed = _unq3_scales(raw[:, 96:108]) - 32
                d = block_halves(raw, 108)
                scale = d.unsqueeze(1) * signed.to(torch.float32)
            m = dmin = None
        elif name == "Q6_K":
            if cfg.qmin == -32:  # codes, scales, d and d sc: one kernel
                codes, signed, d, scale = q6_k_blocks(raw)
            else:
                codes = _readable_codes(name, raw, cfg.qmin)
                signed = raw[:, 192:208].contiguous().view(torch.int8).to(torch.int32)
                d = block_halves(raw, 208)
                scale = d.unsqueeze(1) * signed.to(torch.float32)
            m = dmin = None
        elif name == "IQ4_XS":
            d = _f16_values(raw[:, :2])
            h = raw[:, 2].to(torch.int32) | (raw[:, 3].to(torch.int32) << 8)
            high = (h.unsqueeze(1) >> _shifts(8, 2)) & 3
            lows = raw[:, 4:8].to(torch.int32)
            low = torch.stack([lows & 0xF, lows >> 4], dim=2).reshape(n, 8)
            signed = (low | (high << 4)) - 32
            codes = _unnibbles(raw[:, 8:], 16)
            m = dmin = None
        else:
            raise ValueError(f"{name!r} is not a K-quant or IQ4 type: {', '.join(KQUANT_TYPES)}")
        if name not in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"):
            scale = d.unsqueeze(1) * signed.to(torch.float32)
        scale = scale.reshape(-1)
        if offset is not None:
            offset = offset.reshape(-1)
        sup = super_block_shape(layout, cfg.scale_format)  # type: ignore[arg-type]
        stored = StoredScales(
            codes=signed.reshape(layout.scale_shape),
            min_codes=None if m is None else m.reshape(layout.scale_shape),
            super_scale=d.reshape(sup),
            super_min=None if dmin is None else dmin.reshape(sup),
        )
    shaped = layout.scale_shape
    if z is None:
        z = torch.zeros(n * per, dtype=torch.int32)
    return QuantizedTensor(
        codes=codes.reshape(shape),
        scale=scale.reshape(shaped),
        zero_point=z.reshape(shaped),
        config=cfg,
        layout=layout,
        input_dtype=torch.float32,
        offset=None if offset is None else offset.reshape(shaped),
        stored=stored,
    )
