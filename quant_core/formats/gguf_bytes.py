"""GGUF block bytes: a ``QuantizedTensor`` of a GGUF type to the bytes llama.cpp stores, and
back, bit for bit.

A tensor of shape ``[..., n]`` is stored row by row, each row as ``n / block_size`` blocks
of ``type_size`` bytes (``gguf_types``), little-endian. The legacy and ternary layouts are
drawn below; the K-quants' and IQ4's live in ``kquant_bytes``.

Q4_0 (18 bytes): ``d`` fp16 | 16 bytes, byte ``j`` = ``u[j] | u[j + 16] << 4``.
Q4_1 (20): ``d`` | ``min`` | the same 16 bytes.
Q5_0 (22): ``d`` | ``qh`` (uint32, bit ``j`` = bit 4 of ``u[j]``) | 16 bytes of low nibbles.
Q5_1 (24): ``d`` | ``min`` | ``qh`` | 16 bytes.
Q8_0 (34): ``d`` | 32 int8 codes.
MXFP4 (17): ``e`` (E8M0) | 16 bytes of FP4 codes, byte ``j`` = ``c[j] | c[j + 16] << 4``.
  FP4 code 8 is ``+0`` here too (``kvalues_mxfp4[8] = 0``, where OCP's code 8 is ``-0``):
  read as code 0, as for NVFP4 below.
NVFP4 (36): 4 scale bytes ``u_0 .. u_3`` (UE4M3, one per 16 values) | 32 bytes of FP4
  codes, 8 per 16 values: byte ``8 k + j`` = ``c[16 k + j] | c[16 k + j + 8] << 4``. FP4
  code 8 (``-0``) is llama.cpp's ``+0`` (``kvalues_mxfp4[8] = 0``): it is read as code 0,
  which its quantizer writes for a zero (the values are then llama.cpp's, bit for bit).
Q1_0 (18): ``d`` | 16 bytes, bit ``j % 8`` of byte ``j / 8`` = ``c[j]`` (1: ``+d``, 0: ``-d``).
TQ2_0 (66): 64 bytes | ``d``; value ``128 g + 32 r + k`` (``g < 2``, ``r < 4``, ``k < 32``)
  is bits ``2r, 2r + 1`` of byte ``32 g + k``; trit ``t = q + 1``.
TQ1_0 (54): 48 bytes of 5 trits | 4 bytes of 4 trits | ``d``. Trits ``t_0 .. t_4`` of a
  byte are ``3^4 t_0 + ... + t_4`` scaled to ``ceil(v 256 / 243)``; byte ``k < 32`` holds
  values ``k, 32 + k, ... 128 + k``; byte ``32 + k`` (``k < 16``) values ``160 + k, ...,
  224 + k``; the 4 bytes ``k < 4`` values ``240 + k, 244 + k, 248 + k, 252 + k``.
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

import torch

from ..granularity import layout_for
from .bytes_kernels import (
    block_codes,
    block_halves,
    f16_bytes,
    fp4_plus_zero,
    legacy_blocks,
    min_blocks,
    mxfp4_blocks,
)
from .gguf_types import GGMLType, ggml_type, gguf_type_of
from .scales import StoredScales, ue4m3_values

if TYPE_CHECKING:
    from ..quantized_tensor import QuantizedTensor

__all__ = ["from_ggml_bytes", "ggml_byte_size", "to_ggml_bytes"]


def ggml_byte_size(type_name: str, shape: tuple[int, ...]) -> int:
    """Bytes a tensor of ``shape`` takes in ``type_name``; ``ValueError`` when its rows do
    not divide into the type's blocks."""
    record = ggml_type(type_name)
    _check_rows(record, shape)
    return math.prod(shape) // record.block_size * record.type_size


def _check_rows(record: GGMLType, shape: tuple[int, ...]) -> None:
    if not shape or min(shape) < 1:
        raise ValueError(f"shape {shape} has no values")
    if shape[-1] % record.block_size:
        raise ValueError(
            f"{record.name} stores rows in blocks of {record.block_size} values; rows of "
            f"{shape[-1]} (shape {shape}) do not divide into them"
        )


def _f16_values(b: torch.Tensor) -> torch.Tensor:
    """``[n, 2]`` uint8 -> ``[n]`` float32 (fp16 values)."""
    return b.contiguous().view(torch.float16).reshape(-1).to(torch.float32)


def _nibbles(u: torch.Tensor) -> torch.Tensor:
    """``[n, 32]`` values < 16 -> ``[n, 16]`` bytes ``u[j] | u[j + 16] << 4``."""
    return (u[:, :16] | (u[:, 16:] << 4)).to(torch.uint8)


def _unnibble(b: torch.Tensor, minus: int = 0) -> torch.Tensor:
    """``[n, 16]`` bytes -> ``[n, 32]`` nibbles ``- minus`` (int8 when ``minus``, else
    uint8), written in place into one tensor (no concatenation copy)."""
    out = torch.empty((b.shape[0], 32), dtype=torch.int8 if minus else torch.uint8)
    lo, hi = out[:, :16], out[:, 16:]
    if minus:
        torch.bitwise_and(b, 0x0F, out=lo.view(torch.uint8))
        torch.bitwise_right_shift(b, 4, out=hi.view(torch.uint8))
        out.sub_(minus)  # 0..15 - minus fits int8
    else:
        torch.bitwise_and(b, 0x0F, out=lo)
        torch.bitwise_right_shift(b, 4, out=hi)
    return out


def _high_bits(u: torch.Tensor) -> torch.Tensor:
    """``[n, 32]`` 5-bit values -> ``[n, 4]`` bytes of the uint32 whose bit ``j`` is bit 4 of
    ``u[j]``."""
    bits = ((u >> 4) & 1).to(torch.int64).reshape(-1, 4, 8)
    return (bits << torch.arange(8)).sum(dim=2).to(torch.uint8)


def _unhigh_bits(b: torch.Tensor) -> torch.Tensor:
    return ((b.to(torch.int64).unsqueeze(2) >> torch.arange(8)) & 1).reshape(-1, 32)


_TRIT_POWERS = (81, 27, 9, 3, 1)


def _pack_trits(t: torch.Tensor) -> torch.Tensor:
    """TQ1_0's 256 trits per block -> 52 bytes (see the module docstring)."""
    n = t.shape[0]
    t = t.to(torch.int64)
    pw5 = torch.tensor(_TRIT_POWERS)
    a = (t[:, :160].reshape(n, 5, 32) * pw5.reshape(1, 5, 1)).sum(dim=1)
    b = (t[:, 160:240].reshape(n, 5, 16) * pw5.reshape(1, 5, 1)).sum(dim=1)
    c = (t[:, 240:].reshape(n, 4, 4) * pw5[:4].reshape(1, 4, 1)).sum(dim=1)
    v = torch.cat([a, b, c], dim=1)
    return ((v * 256 + 242) // 243).to(torch.uint8)


def _unpack_trits(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    pw = torch.tensor((1, 3, 9, 27, 81), dtype=torch.int64)
    b = b.to(torch.int64)

    def trits(part: torch.Tensor, powers: torch.Tensor) -> torch.Tensor:
        # multiplying by 3^i modulo 256 brings trit i to the top; * 3 >> 8 reads it
        shifted = (part.unsqueeze(1) * powers.reshape(1, -1, 1)) & 0xFF
        return ((shifted * 3) >> 8).reshape(n, -1)

    return torch.cat(
        [trits(b[:, :32], pw), trits(b[:, 32:48], pw), trits(b[:, 48:52], pw[:4])], dim=1
    )


def to_ggml_bytes(qt: QuantizedTensor) -> bytes:
    """The bytes llama.cpp stores for ``qt`` (a ``QuantizedTensor`` whose config is a GGUF
    type, ``config.gguf_type``): ``ggml_byte_size`` of them, row-major blocks."""
    from ..quantized_tensor import QuantizedTensor

    if not isinstance(qt, QuantizedTensor):
        raise TypeError(f"expected a QuantizedTensor, got {type(qt).__name__}")
    name = gguf_type_of(qt.config)
    if name is None:
        raise ValueError(
            f"{qt.config.describe()!r} is no GGUF type: GGUF bytes exist for the llama.cpp "
            "recipe's configs (QuantConfig.from_name('Q4_K'), ...) and MXFP4"
        )
    record = ggml_type(name)
    _check_rows(record, tuple(qt.shape))
    codes = qt.codes.detach().cpu().reshape(-1, record.block_size)
    n = codes.shape[0]
    if record.block_size == qt.layout.block_len:
        s = qt.scale.detach().cpu().reshape(n)
        m = None if qt.offset is None else qt.offset.detach().cpu().reshape(n)
    if name in ("Q4_0", "Q5_0"):
        half = 8 if name == "Q4_0" else 16
        u = (codes.to(torch.int16) + half).to(torch.uint8)
        if name == "Q4_0":
            blocks = torch.cat([f16_bytes(s), _nibbles(u)], dim=1)
        else:
            blocks = torch.cat([f16_bytes(s), _high_bits(u), _nibbles(u & 0x0F)], dim=1)
    elif name in ("Q4_1", "Q5_1"):
        u = (codes.to(torch.int16) - qt.config.qmin).to(torch.uint8)
        head = [f16_bytes(s), f16_bytes(m)]
        if name == "Q4_1":
            blocks = torch.cat([*head, _nibbles(u)], dim=1)
        else:
            blocks = torch.cat([*head, _high_bits(u), _nibbles(u & 0x0F)], dim=1)
    elif name == "Q8_0":
        blocks = torch.cat([f16_bytes(s), codes.contiguous().view(torch.uint8)], dim=1)
    elif name == "MXFP4":
        e = qt.stored.codes.detach().cpu().reshape(n, 1).to(torch.uint8)
        blocks = torch.cat([e, _nibbles(codes.to(torch.uint8))], dim=1)
    elif name == "NVFP4":
        u = qt.stored.codes.detach().cpu().reshape(n, 4).to(torch.uint8)
        c = codes.to(torch.uint8).reshape(n, 4, 16)
        qs = (c[:, :, :8] | (c[:, :, 8:] << 4)).reshape(n, 32)
        blocks = torch.cat([u, qs], dim=1)
    elif name == "Q1_0":
        c = codes.to(torch.uint8).reshape(n, 16, 8)
        packed = c[:, :, 0].clone()
        for k in range(1, 8):  # uint8 ORs: a sum over int64 shifts took 10x longer
            packed |= c[:, :, k] << k
        blocks = torch.cat([f16_bytes(s), packed], dim=1)
    elif name == "TQ2_0":
        t = codes.to(torch.int64).reshape(n, 2, 4, 32) << torch.tensor([0, 2, 4, 6]).reshape(
            1, 1, 4, 1
        )
        blocks = torch.cat([t.sum(dim=2).reshape(n, 64).to(torch.uint8), f16_bytes(s)], dim=1)
    elif name == "TQ1_0":
        blocks = torch.cat([_pack_trits(codes), f16_bytes(s)], dim=1)
    else:
        from .kquant_bytes import to_blocks

        blocks = to_blocks(name, qt)
    return blocks.contiguous().numpy().tobytes()


def from_ggml_bytes(
    data: bytes | bytearray | memoryview,
    type_name: str,
    shape: tuple[int, ...],
    *,
    signed_zero: bool = False,
) -> QuantizedTensor:
    """The ``QuantizedTensor`` (float32 on CPU, config ``ggml_type(type_name).config``) that
    the GGUF bytes ``data`` of a tensor of ``shape`` store; ``ValueError`` naming the
    type, shape and sizes when the bytes do not fit. MXFP4's and NVFP4's FP4 code 8 is read
    as llama.cpp reads it, code 0 (``+0``), unless ``signed_zero``: then it stays OCP's
    ``-0`` (the lab's own export of its OCP MXFP4, which stores those blocks)."""
    from ..quantized_tensor import QuantizedTensor

    record = ggml_type(type_name)
    shape = tuple(int(d) for d in shape)
    _check_rows(record, shape)
    want = math.prod(shape) // record.block_size * record.type_size
    if len(data) != want:
        raise ValueError(
            f"a {record.name} tensor of shape {shape} takes {want:,} bytes; got {len(data):,}"
        )
    with warnings.catch_warnings():
        # a read-only buffer (bytes): nothing here writes into it
        warnings.simplefilter("ignore", UserWarning)
        raw = torch.frombuffer(data, dtype=torch.uint8).reshape(-1, record.type_size)
    n = raw.shape[0]
    cfg = record.config
    # zeros, one per block, unless a branch sets them; made after the branches, as the
    # K-quants return from theirs without them
    z: torch.Tensor | None = None
    offset = None
    stored = None
    name = record.name
    if name in ("Q4_0", "Q5_0", "Q8_0"):
        codes, s = legacy_blocks(name, raw)  # u - 8, u - 16 or the int8 code, and d: one kernel
    elif name in ("Q4_1", "Q5_1"):
        if cfg.qmin == (-8 if name == "Q4_1" else -16):  # u - 8, u - 16; d, min: one kernel
            codes, s, offset = min_blocks(name, raw)
        else:
            s, offset = block_halves(raw, 0), block_halves(raw, 2)
            if name == "Q4_1":
                codes = _unnibble(raw[:, 4:20], minus=-cfg.qmin)
            else:
                u = _unnibble(raw[:, 8:24]) | (_unhigh_bits(raw[:, 4:8]).to(torch.uint8) << 4)
                codes = (u.to(torch.int16) + cfg.qmin).to(torch.int8)
        z = torch.full((n,), cfg.qmin, dtype=torch.int32)
    elif name == "MXFP4":
        # codes (llama.cpp's code 8 is +0 unless signed_zero: module docstring), e, 2^(e - 127)
        codes, e, s = mxfp4_blocks(raw, plus_zero=not signed_zero)
        # E8M0's 255 is NaN (OCP): its scale 2^128 is no float32, and its blocks decoded
        # to NaN and float32's max where llama.cpp's halved scale gives finite values. Its
        # quantizer writes at most 254: a damaged file, as the export's E8M0 codes are.
        bad = e == 255
        if bool(bad.any()):
            raise ValueError(
                f"MXFP4 block {int(bad.nonzero()[0]):,} (from 0) has the scale exponent 255, "
                "which is NaN in E8M0: damaged blocks"
            )
        stored = StoredScales(codes=e)
    elif name == "NVFP4":
        u = raw[:, :4].to(torch.int32).reshape(-1)
        s = ue4m3_values(u)
        qs = raw[:, 4:].reshape(n, 4, 8)
        codes = torch.cat([qs & 0x0F, qs >> 4], dim=2).reshape(n, 64)
        if not signed_zero:
            codes = fp4_plus_zero(codes)  # llama.cpp's code 8 is +0 (module docstring)
        z = torch.zeros(n * 4, dtype=torch.int32)
        stored = StoredScales(codes=u)
    elif name == "Q1_0":
        s = block_halves(raw, 0)
        bits = raw[:, 2:].unsqueeze(2) >> torch.arange(8, dtype=torch.uint8)
        codes = (bits & 1).reshape(n, 128)
    elif name == "TQ2_0":
        codes = block_codes(name, raw)
        # 2 bits hold 0..3 but a trit is 0..2: the codebook has no code 3 (it decoded to
        # NaN, silently; llama.cpp reads it as +2 d). No writer makes one: a damaged file.
        bad = (codes.reshape(n, -1) > 2).any(dim=1)
        if bool(bad.any()):
            raise ValueError(
                f"TQ2_0 block {int(bad.nonzero()[0]):,} (from 0) holds the 2-bit value 3, "
                "which is not a trit (0, 1, 2 store -1, 0, +1): damaged blocks"
            )
        s = block_halves(raw, 64)
    elif name == "TQ1_0":
        codes = block_codes(name, raw)
        s = block_halves(raw, 52)
    else:
        from .kquant_bytes import from_blocks

        return from_blocks(name, raw, shape)
    if z is None:
        z = torch.zeros(n, dtype=torch.int32)
    layout = layout_for(shape, cfg.granularity)
    shaped = layout.scale_shape
    if stored is not None:
        stored = StoredScales(codes=stored.codes.reshape(shaped))
    return QuantizedTensor(
        codes=codes.reshape(shape),
        scale=s.reshape(shaped),
        zero_point=z.reshape(shaped),
        config=cfg,
        layout=layout,
        input_dtype=torch.float32,
        offset=None if offset is None else offset.reshape(shaped),
        stored=stored,
    )
