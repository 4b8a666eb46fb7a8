"""Honest storage accounting: codes plus scales plus zero points, and the second level of
two-level formats (scales of scales), counted from the real layout."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .config import (
    DoubleQuantScales,
    FloatScales,
    Format,
    FP8Scales,
    PowerOfTwoScales,
    QuantConfig,
    SuperBlockScales,
)
from .formats.scales import check_super_blocks
from .granularity import layout_for

__all__ = ["StoragePart", "StorageReport", "storage_cost"]


@dataclass(frozen=True)
class StoragePart:
    """One kind of stored item: ``count`` of them at ``bits`` each (``what`` names it:
    ``"codes"``, ``"scales"``, ``"super-block scales"``, ...). ``total_bits = count *
    bits``; ``bits`` may be fractional for packed codes (TQ1_0: ``52 * 8 / 256``)."""

    what: str
    count: int
    bits: float

    @property
    def total_bits(self) -> int:
        return round(self.count * self.bits)


@dataclass(frozen=True)
class StorageReport:
    """Storage of one tensor quantized under a config, codes packed densely.

    ``total_bits = n_elements * bits + n_scales * scale_bits + n_zero_points *
    zero_point_bits`` (+ the second level of two-level formats, see ``parts``): an integer
    zero point (``ZeroPoint.INCLUDE_ZERO``/``COURSE_CLAMP``) lies in ``[qmin, qmax]`` and is
    stored at the code width; the float offset ``m`` of ``ZeroPoint.FLOAT_MIN`` at the
    scale dtype's width (or, in a super-block format, as a block integer like the scale);
    ``bits_per_element = total_bits / n_elements``; ``total_bytes = ceil(total_bits / 8)``;
    ``ratio_vs_fp32 = 32 * n_elements / total_bits`` (how many times smaller), likewise fp16.

    ``scale_bits``: bits of one block scale as stored (16 for fp16, 8 for E8M0 and FP8, the
    integer width in a super-block). ``parts``: every stored item, codes first, summing to
    ``total_bits``: where the bits go.
    """

    n_elements: int
    n_scales: int
    n_zero_points: int
    code_bits: int
    scale_bits: int
    zero_point_bits: int
    total_bits: int
    bits_per_element: float
    total_bytes: int
    fp32_bytes: int
    fp16_bytes: int
    ratio_vs_fp32: float
    ratio_vs_fp16: float
    parts: tuple[StoragePart, ...] = field(default=())

    def breakdown(self) -> str:
        """``parts`` in words with bits per element: ``"4-bit codes 4 + 8 scales x 6 bits
        0.375 + ..."``."""
        out = []
        for p in self.parts:
            per = p.total_bits / self.n_elements
            bits = f"{p.bits:g}" if p.bits != int(p.bits) else str(int(p.bits))
            out.append(f"{p.count:,} {p.what} x {bits} bits ({per:.4g} b/value)")
        return " + ".join(out)


def _code_part(cfg: QuantConfig, n: int, n_blocks: int, block_len: int) -> StoragePart:
    if cfg.format is Format.TERNARY_PACKED:
        # five trits per byte, each block's codes padded to whole bytes (TQ1_0: 52 of 256)
        per_block = 8 * math.ceil(block_len / 5)
        return StoragePart("codes (5 per byte)", n, per_block / block_len)
    return StoragePart(f"{cfg.bits}-bit codes", n, cfg.bits)


def storage_cost(shape: tuple[int, ...] | torch.Size, cfg: QuantConfig) -> StorageReport:
    """Storage of a tensor of ``shape`` under ``cfg`` (scales in ``cfg.scale_format``).

    Example: ``[4096, 4096]``, int4 asymmetric, groups of 128, fp16 scales:
    ``4 + 16/128 + 4/128 = 4.156`` bits per element. GGUF's blocks of 32 with an fp16 scale:
    Q4_0 (int4 symmetric) ``4 + 16/32 = 4.5``, Q8_0 ``8 + 16/32 = 8.5``, Q4_1 (int4
    float-min, an fp16 min) ``4 + 16/32 + 16/32 = 5.0``. Two-level: Q4_K ``4 + (6 + 6)/32 +
    (16 + 16)/256 = 4.5``, Q2_K ``2 + (4 + 4)/16 + 32/256 = 2.625``, MXFP4 ``4 + 8/32 =
    4.25``, NVFP4 ``4 + 8/16 = 4.5`` (+ 32 bits per tensor; GGUF's NVFP4 has none), NF4
    with double quantization ``4 + 8/64 + 32/(64 * 256) = 4.127`` (+ 32 bits per tensor).
    Raises ``TypeError`` for a ``cfg`` that is not a ``QuantConfig`` and ``ValueError`` for
    a shape ``layout_for`` rejects (0-d, empty, an axis out of range, a group size that
    does not divide the last dimension) or whose rows do not divide a format's super-blocks.
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    check_super_blocks(tuple(shape), cfg)
    layout = layout_for(tuple(shape), cfg.granularity)
    n = math.prod(layout.shape)
    n_blocks = layout.n_blocks
    parts = [_code_part(cfg, n, n_blocks, layout.block_len)]
    sf = cfg.scale_format
    n_zp = n_blocks if cfg.has_zero_point else 0
    if isinstance(sf, FloatScales):
        scale_bits = cfg.scale_dtype.bits
        zp_bits = (scale_bits if cfg.float_offset else cfg.bits) if n_zp else 0
        parts.append(StoragePart(f"{cfg.scale_dtype.value} scales", n_blocks, scale_bits))
        if n_zp:
            kind = f"{cfg.scale_dtype.value} mins" if cfg.float_offset else "zero points"
            parts.append(StoragePart(kind, n_zp, zp_bits))
    elif isinstance(sf, SuperBlockScales):
        scale_bits = sf.bits
        zp_bits = sf.bits if n_zp else 0
        n_super = n // sf.super_block
        parts.append(StoragePart(f"{sf.bits}-bit block scales", n_blocks, sf.bits))
        if n_zp:
            parts.append(StoragePart(f"{sf.bits}-bit block mins", n_zp, sf.bits))
        dtype = cfg.scale_dtype.value
        parts.append(StoragePart(f"{dtype} super-block scales d", n_super, cfg.scale_dtype.bits))
        if n_zp:
            parts.append(
                StoragePart(f"{dtype} super-block mins dmin", n_super, cfg.scale_dtype.bits)
            )
    elif isinstance(sf, PowerOfTwoScales):
        scale_bits, zp_bits = 8, 0
        parts.append(StoragePart("E8M0 scales", n_blocks, 8))
    elif isinstance(sf, FP8Scales):
        scale_bits, zp_bits = 8, 0
        parts.append(StoragePart("FP8 E4M3 scales", n_blocks, 8))
        if sf.tensor_scale:
            parts.append(StoragePart("fp32 tensor scale", 1, 32))
    elif isinstance(sf, DoubleQuantScales):
        scale_bits, zp_bits = 8, 0
        parts.append(StoragePart("8-bit scale codes", n_blocks, 8))
        runs = math.ceil(n_blocks / sf.block)
        parts.append(StoragePart(f"fp32 absmax per {sf.block} scales", runs, 32))
        parts.append(StoragePart("fp32 scale offset", 1, 32))
    else:  # pragma: no cover - QuantConfig admits no other
        raise TypeError(f"unknown scale format {sf!r}")
    total = sum(p.total_bits for p in parts)
    return StorageReport(
        n_elements=n,
        n_scales=n_blocks,
        n_zero_points=n_zp,
        code_bits=cfg.bits,
        scale_bits=scale_bits,
        zero_point_bits=zp_bits,
        total_bits=total,
        bits_per_element=total / n,
        total_bytes=math.ceil(total / 8),
        fp32_bytes=4 * n,
        fp16_bytes=2 * n,
        ratio_vs_fp32=32 * n / total,
        ratio_vs_fp16=16 * n / total,
        parts=tuple(parts),
    )
