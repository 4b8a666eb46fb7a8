"""Honest storage accounting: codes plus scales plus zero points."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .config import QuantConfig
from .granularity import layout_for

__all__ = ["StorageReport", "storage_cost"]


@dataclass(frozen=True)
class StorageReport:
    """Storage of one tensor quantized under a config, codes packed densely.

    ``total_bits = n_elements * bits + n_scales * scale_bits + n_zero_points *
    zero_point_bits``: an integer zero point (``ZeroPoint.INCLUDE_ZERO``/``COURSE_CLAMP``)
    lies in ``[qmin, qmax]`` and is stored at the code width; the float offset ``m`` of
    ``ZeroPoint.FLOAT_MIN`` at the scale dtype's width;
    ``bits_per_element = total_bits / n_elements``; ``total_bytes = ceil(total_bits / 8)``;
    ``ratio_vs_fp32 = 32 * n_elements / total_bits`` (how many times smaller), likewise fp16.
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


def storage_cost(shape: tuple[int, ...] | torch.Size, cfg: QuantConfig) -> StorageReport:
    """Storage of a tensor of ``shape`` under ``cfg`` (scales in ``cfg.scale_dtype``).

    Example: ``[4096, 4096]``, int4 asymmetric, groups of 128, fp16 scales:
    ``4 + 16/128 + 4/128 = 4.156`` bits per element. GGUF's blocks of 32 with an fp16 scale:
    Q4_0 (int4 symmetric) ``4 + 16/32 = 4.5``, Q8_0 ``8 + 16/32 = 8.5``, Q4_1 (int4
    float-min, an fp16 min) ``4 + 16/32 + 16/32 = 5.0``. Raises ``TypeError`` for a ``cfg`` that
    is not a ``QuantConfig`` and ``ValueError`` for a shape ``layout_for`` rejects (0-d,
    empty, an axis out of range, a group size that does not divide the last dimension).
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    layout = layout_for(tuple(shape), cfg.granularity)
    n = math.prod(layout.shape)
    n_scales = layout.n_blocks
    n_zp = n_scales if cfg.has_zero_point else 0
    scale_bits = cfg.scale_dtype.bits
    zp_bits = (scale_bits if cfg.float_offset else cfg.bits) if n_zp else 0
    code_bits = n * cfg.bits
    total = code_bits + n_scales * scale_bits + n_zp * zp_bits
    return StorageReport(
        n_elements=n,
        n_scales=n_scales,
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
    )
