"""Dense bit packing of integer codes.

Layout (LSB first): code ``i`` occupies bits ``[i*b, (i+1)*b)`` of the little-endian bit
stream, so the first code sits in the lowest bits of the first byte. Example, ``b = 3``,
codes ``[1, 2, 3]`` -> bytes ``[0xD1, 0x00]``: byte 0 is ``1 | 2 << 3 | (3 & 0b11) << 6``,
and the top bit of the last code (0) opens byte 1.
"""

from __future__ import annotations

import math

import torch

__all__ = ["MAX_PACK_BITS", "pack", "packed_size", "unpack"]

MAX_PACK_BITS = 16
_INT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def _check_bits(bits: object) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int):
        raise TypeError(f"bits must be an int, got {bits!r}")
    if not 1 <= bits <= MAX_PACK_BITS:
        raise ValueError(f"bits={bits} is outside the supported range 1..{MAX_PACK_BITS}")
    return bits


def packed_size(count: int, bits: int) -> int:
    """Bytes needed for ``count`` codes of ``bits`` each: ``ceil(count * bits / 8)``."""
    return math.ceil(count * _check_bits(bits) / 8)


def pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Pack ``codes`` (any integer dtype and shape, flattened in order) into uint8.

    Each code's low ``bits`` bits are stored (two's complement, so signed codes in
    ``[-2^(b-1), 2^(b-1)-1]`` round-trip with ``unpack(..., signed=True)``). Raises
    ``ValueError`` if a code does not fit in ``bits`` as signed or unsigned.
    """
    bits = _check_bits(bits)
    if not isinstance(codes, torch.Tensor) or codes.dtype not in _INT_DTYPES:
        got = codes.dtype if isinstance(codes, torch.Tensor) else type(codes).__name__
        raise TypeError(f"codes must be an integer tensor, got {got}")
    flat = codes.reshape(-1).to(torch.int64)
    if flat.numel():
        lo, hi = int(flat.min()), int(flat.max())
        if lo < -(1 << (bits - 1)) or hi > (1 << bits) - 1:
            raise ValueError(f"codes span [{lo}, {hi}], which does not fit in {bits} bits")
    flat = flat & ((1 << bits) - 1)
    shifts = torch.arange(bits, device=flat.device)
    bitstream = ((flat.unsqueeze(1) >> shifts) & 1).reshape(-1).to(torch.uint8)
    pad = (-bitstream.numel()) % 8
    if pad:
        bitstream = torch.cat([bitstream, bitstream.new_zeros(pad)])
    weights = (1 << torch.arange(8, device=flat.device)).to(torch.uint8)
    return (bitstream.reshape(-1, 8) * weights).sum(dim=1, dtype=torch.int64).to(torch.uint8)


def unpack(
    packed: torch.Tensor,
    bits: int,
    count: int,
    signed: bool = True,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Inverse of ``pack``: the first ``count`` codes of ``packed`` (uint8, 1-D).

    ``signed=True`` sign-extends to ``[-2^(b-1), 2^(b-1)-1]``; ``signed=False`` gives
    ``[0, 2^b - 1]``. Default dtype: int8 when the codes fit in it, else int16 (int32 for
    16-bit unsigned).
    """
    bits = _check_bits(bits)
    if not isinstance(packed, torch.Tensor) or packed.dtype != torch.uint8:
        raise TypeError("packed must be a uint8 tensor")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a non-negative int, got {count!r}")
    needed = packed_size(count, bits)
    if packed.numel() < needed:
        raise ValueError(
            f"{count} codes of {bits} bits need {needed} bytes, but packed holds {packed.numel()}"
        )
    data = packed.reshape(-1)[:needed].to(torch.int64)
    stream = ((data.unsqueeze(1) >> torch.arange(8, device=data.device)) & 1).reshape(-1)
    stream = stream[: count * bits].reshape(count, bits)
    values = (stream << torch.arange(bits, device=data.device)).sum(dim=1)
    if signed:
        values = torch.where(values >= (1 << (bits - 1)), values - (1 << bits), values)
    if dtype is None:
        if (signed and bits <= 8) or (not signed and bits <= 7):
            dtype = torch.int8
        elif (signed and bits <= 16) or (not signed and bits <= 15):
            dtype = torch.int16
        else:
            dtype = torch.int32
    return values.to(dtype)
