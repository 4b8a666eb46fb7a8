"""llama.cpp's K-quant and IQ4 reference quantizers (being written)."""

from __future__ import annotations

import torch

from ..config import QuantConfig
from ..granularity import BlockLayout
from .scales import BlockParams

__all__ = ["quantize_blocks"]


def quantize_blocks(
    name: str, blocks: torch.Tensor, cfg: QuantConfig, layout: BlockLayout
) -> tuple[torch.Tensor, BlockParams]:
    raise NotImplementedError(f"llama.cpp's {name} quantizer is not ported yet")
