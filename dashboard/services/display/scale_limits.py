"""What to say when a tensor's stored scales hit their dtype's limits: Q8_0's fp16
``d = max|x| / 127`` past 65504 is stored as inf (as llama.cpp stores it), and the block's
values decode as +-inf or NaN (``QuantizedTensor.scales_finite``); the lab's fp16 or bf16
scales saturate at the dtype's largest value (values clip) or are raised to its smallest
positive one (values round to 0)."""

from __future__ import annotations

import torch

from quant_core import FloatScales, QuantizedTensor, ScaleDtype

__all__ = ["blocks_text", "overflow_text", "overflowed_blocks", "scale_limit_text"]

_HALF = {ScaleDtype.FP16: torch.float16, ScaleDtype.BF16: torch.bfloat16}


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
        "inf or NaN (as the format's owner decodes them) and the error metrics are "
        "infinite. A scheme with fp32 scales keeps them finite."
    )


def scale_limit_text(qt: QuantizedTensor, n_clipped: int, sqnr_db: float) -> str:
    """Why the errors of ``qt`` are what they are when its stored scales hit their dtype's
    limits; empty when they do not. Three cases, each counted in blocks:

    - a stored scale (or offset) is not finite (``overflow_text``): every error is infinite;
    - an fp16/bf16 scale capped at the dtype's largest value (the lab saturates it: values
      near 3e7 at 2 bits) while ``n_clipped`` values clipped: SQNR near 0 dB;
    - one raised to the dtype's smallest positive value (values near 1e-8 under fp16)
      while ``sqnr_db`` is below 1 dB: values below ``s / 2`` round to 0.
    """
    overflow = overflow_text(qt)
    if overflow:
        return overflow
    cfg = qt.config
    half = _HALF.get(cfg.scale_dtype)
    if half is None or cfg.two_level or not isinstance(cfg.scale_format, FloatScales):
        return ""
    dtype, total = cfg.scale_dtype.value, qt.n_blocks
    info = torch.finfo(half)
    scale = qt.scale.reshape(total, -1).abs()
    capped = int((scale >= info.max).any(dim=1).sum())
    if capped and n_clipped:
        return (
            f"Scale capped at {dtype}'s largest value {info.max:g} in "
            f"{blocks_text(capped, total)}: the values need a larger scale than {dtype} holds, "
            f"so {n_clipped:,} values beyond s × qmax clip (hence the SQNR). fp32 scales "
            "keep the rule's scale."
        )
    smallest = info.tiny * info.eps  # the smallest subnormal
    raised = int(((scale > 0) & (scale <= smallest)).any(dim=1).sum())
    if raised and sqnr_db < 1.0:
        return (
            f"Scale raised to {dtype}'s smallest positive value {smallest:.3g} in "
            f"{blocks_text(raised, total)}: the values need a smaller scale than {dtype} "
            "holds, so values below s / 2 round to 0 (hence the SQNR). fp32 scales keep "
            "the rule's scale."
        )
    return ""
