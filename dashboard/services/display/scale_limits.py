"""What to say when a tensor's stored scales overflowed their dtype: Q8_0's fp16
``d = max|x| / 127`` past 65504 is stored as inf (as llama.cpp stores it), and the block's
values decode as +-inf or NaN (``QuantizedTensor.scales_finite``)."""

from __future__ import annotations

import torch

from quant_core import QuantizedTensor

__all__ = ["blocks_text", "overflow_text", "overflowed_blocks"]


def blocks_text(n: int, total: int) -> str:
    """``"3 of 12 blocks"``, ``"1 of 1 block"``."""
    return f"{n:,} of {total:,} block{'s' if total != 1 else ''}"


def overflowed_blocks(qt: QuantizedTensor) -> int:
    """How many of ``qt``'s blocks store a scale (or offset) that is not finite."""
    total = qt.n_blocks
    bad = ~torch.isfinite(qt.scale.reshape(total, -1)).all(dim=1)
    if qt.offset is not None:
        bad |= ~torch.isfinite(qt.offset.reshape(total, -1)).all(dim=1)
    return int(bad.sum())


def overflow_text(qt: QuantizedTensor) -> str:
    """Why ``qt`` decodes to values that are not finite, in one sentence starting with
    "Scale overflowed"; empty when every stored scale is finite."""
    if qt.scales_finite():
        return ""
    dtype = qt.config.scale_dtype.value
    return (
        f"Scale overflowed {dtype} in {blocks_text(overflowed_blocks(qt), qt.n_blocks)}: "
        f"past {dtype}'s largest value the stored scale is inf, so those values decode as "
        "inf or NaN (as the format's owner decodes them) and every error is infinite. "
        "Scale the tensor down or store the scales in fp32."
    )
