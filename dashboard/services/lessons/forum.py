"""The forum's question "why did ``min_max_quantize`` turn ``a`` into ``b``, and where is the
size reduction if both are float32?", answered with the numbers.

The thread's ``a`` is the teaching examples' 10-value vector (``Example.VECTOR_10``); its
``b`` is exactly 8-bit symmetric absmax quantization, dequantized: ``s = max|a| / 127``,
codes ``round(a / s)`` = 22, 56, 77, 13, 127, ..., ``b = s * code``. The maintainer's words,
"256 levels between min and max", describe another quantizer (``minmax_levels_quantize``
at 8 bits), whose numbers differ: ``0.9402, 2.3370, ...``; and ``b[3] = 0.5423`` lies below
``min(a) = 0.5491``, where no min-max level can be. Both are float32 tensors because both
are *dequantized*: what quantization saves is what is stored instead, 8-bit codes and one
float scale (or two floats, min and max) against 32-bit floats.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from quant_core import Mode, PerTensor, QuantConfig, QuantizedTensor, quantize
from quant_core.research import LevelQuantResult, minmax_levels_quantize

__all__ = ["ABSMAX_INT8", "ForumAnswer", "Storage", "forum_answer"]

ABSMAX_INT8 = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerTensor())
"""What produced the thread's ``b``: 8-bit symmetric absmax, one scale for the tensor."""


@dataclass(frozen=True)
class Storage:
    """What one way of keeping ``n`` values costs, in bits: ``codes`` (bits per value times
    ``n``) plus ``extra`` (the float32 numbers stored beside them)."""

    name: str
    codes: int
    extra: int

    @property
    def total(self) -> int:
        return self.codes + self.extra

    @property
    def bytes(self) -> int:
        return -(-self.total // 8)


@dataclass(frozen=True, eq=False)
class ForumAnswer:
    """``a`` (float32, 1-D: the values row-major) quantized both ways.

    ``absmax``: the 8-bit symmetric tensor (``scale`` ``s = max|a| / 127``, ``codes``);
    ``b = absmax.dequantize()``; ``minmax``: 256 levels from ``min(a)`` to ``max(a)``
    (``levels``, ``codes``, ``dequantized``); ``below_min``: indices where ``b`` lies
    below ``min(a)`` (no min-max level can: the proof ``b`` is not min-max), ``above_max``
    likewise."""

    a: torch.Tensor
    absmax: QuantizedTensor
    b: torch.Tensor
    minmax: LevelQuantResult

    @property
    def scale(self) -> float:
        return float(self.absmax.scale)

    @property
    def rule_scale(self) -> float:
        """``max|a| / 127`` in float64: the scale the rule asks for."""
        return float(self.a.abs().max()) / 127.0

    @property
    def scale_underflowed(self) -> bool:
        """Whether ``max|a| / 127`` is nonzero but rounds to 0 in float32 (``a`` near
        1e-45), so the stored ``s`` is a stand-in, not the rule's."""
        rule = self.rule_scale
        return rule > 0.0 and float(torch.tensor(rule, dtype=torch.float32)) == 0.0

    @property
    def below_min(self) -> tuple[int, ...]:
        return tuple(int(i) for i in (self.b < self.a.min()).nonzero().reshape(-1))

    @property
    def above_max(self) -> tuple[int, ...]:
        return tuple(int(i) for i in (self.b > self.a.max()).nonzero().reshape(-1))

    def storage(self) -> tuple[Storage, ...]:
        """float32 values; 8-bit absmax codes plus one float32 scale; 8-bit min-max codes
        plus min and max (two float32)."""
        n = self.a.numel()
        return (
            Storage("float32 values (a, or b as the notebook keeps it)", 32 * n, 0),
            Storage("8-bit codes + one float32 scale (absmax, gives b)", 8 * n, 32),
            Storage("8-bit codes + float32 min and max (256 min-max levels)", 8 * n, 64),
        )

    def table(self) -> pd.DataFrame:
        """Value by value: ``a``, its absmax ``code`` (``round(a / s)``) and
        ``b = s * code``, its min-max code and level, and whether ``b`` is one of the 256
        min-max levels."""
        levels = self.minmax.levels
        rows = []
        for i in range(self.a.numel()):
            b = float(self.b[i])
            rows.append(
                {
                    "i": i,
                    "a": float(self.a[i]),
                    "code": int(self.absmax.codes[i]),
                    "b = s·code": b,
                    "min-max code": int(self.minmax.codes[i]),
                    "min-max level": float(self.minmax.dequantized[i]),
                    "b a level?": "yes" if bool((levels == b).any()) else "no",
                }
            )
        return pd.DataFrame(rows)

    def levels_table(self) -> pd.DataFrame:
        """The 256 min-max levels, by code."""
        return pd.DataFrame(
            {"code": range(self.minmax.levels.numel()), "level": self.minmax.levels.tolist()}
        )


def forum_answer(a: torch.Tensor) -> ForumAnswer:
    """Both quantizers on ``a`` (float, 1-D or 2-D, finite, at least 2 values; flattened
    row-major). ``ValueError`` names what is wrong."""
    if not isinstance(a, torch.Tensor) or not a.is_floating_point():
        raise TypeError("a must be a float tensor")
    if a.dim() not in (1, 2) or a.numel() < 2:
        raise ValueError(f"need at least 2 values in 1-D or 2-D, got shape {tuple(a.shape)}")
    flat = a.detach().reshape(-1).to(torch.float32)
    if not bool(torch.isfinite(flat).all()):
        raise ValueError("min_max_quantize needs finite values: a holds NaN or ±inf")
    absmax = quantize(flat, ABSMAX_INT8)
    return ForumAnswer(
        a=flat, absmax=absmax, b=absmax.dequantize(), minmax=minmax_levels_quantize(flat, 8)
    )
