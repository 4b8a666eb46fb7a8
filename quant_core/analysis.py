"""What quantization did to a tensor beyond the error: clipping, saturation, levels used."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .config import Format
from .formats import codebook_for
from .quantize import QuantizedTensor

__all__ = ["ClipStats", "clip_stats", "levels_used"]


@dataclass(frozen=True)
class ClipStats:
    """``n_clipped_low/high``: inputs below/above their block's representable range
    ``[s (qmin - z), s (qmax - z)]``, whose error may exceed ``s/2``; ``n_saturated``: codes at
    either end of the code range (``qmin``/``qmax``, or the codebook's extremes)."""

    n_elements: int
    n_clipped_low: int
    n_clipped_high: int
    n_saturated: int

    @property
    def n_clipped(self) -> int:
        return self.n_clipped_low + self.n_clipped_high


def clip_stats(x: torch.Tensor, qt: QuantizedTensor) -> ClipStats:
    """Clipping and saturation counts of ``x`` quantized as ``qt`` (same shape)."""
    if tuple(x.shape) != tuple(qt.shape):
        raise ValueError(f"shapes differ: x {tuple(x.shape)} vs codes {tuple(qt.shape)}")
    rng = qt.representable_range()
    blocks = qt.layout.to_blocks(x.to(torch.float32))
    codes = qt.layout.to_blocks(qt.codes)
    if qt.config.format is Format.INT:
        lo_code, hi_code = qt.config.qmin, qt.config.qmax
    else:
        cb = codebook_for(qt.config.format, codes.device)
        lo_code, hi_code = int(cb.codes[0]), int(cb.codes[-1])
    return ClipStats(
        n_elements=x.numel(),
        n_clipped_low=int((blocks < rng.lo).sum()),
        n_clipped_high=int((blocks > rng.hi).sum()),
        n_saturated=int(((codes == lo_code) | (codes == hi_code)).sum()),
    )


def levels_used(qt: QuantizedTensor, block: int | None = None) -> int:
    """How many distinct codes occur, in one block or (``None``) in the whole tensor."""
    codes = qt.codes
    if block is not None:
        if not 0 <= block < qt.n_blocks:
            raise ValueError(f"block {block} out of range: this tensor has {qt.n_blocks} blocks")
        codes = qt.layout.to_blocks(codes)[block]
    return int(torch.unique(codes).numel())
