"""A tensor lab's settings as its widgets hold them, and the ``QuantConfig`` they make.

The widgets start at the lesson's scheme (``LabSettings.of``) and give a config back
(``to_config``), so a lab opened at the course's settings shows exactly that scheme.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from quant_core import Format, Mode, PerChannel, PerGroup, PerTensor, QuantConfig

__all__ = ["LAB_BITS", "LabGranularity", "LabSettings"]

LAB_BITS = (2, 3, 4, 5, 6, 7, 8)


class LabGranularity(enum.Enum):
    """Where a lab's scales apply."""

    TENSOR = "tensor"
    ROWS = "rows"
    COLUMNS = "columns"
    GROUP = "group"

    @property
    def label(self) -> str:
        return _GRANULARITY_LABELS[self]


_GRANULARITY_LABELS = {
    LabGranularity.TENSOR: "per tensor",
    LabGranularity.ROWS: "per channel (rows, dim 0)",
    LabGranularity.COLUMNS: "per channel (columns, dim 1)",
    LabGranularity.GROUP: "per group",
}


@dataclass(frozen=True)
class LabSettings:
    """``format``, ``bits`` (integer formats), ``mode``, ``granularity`` and ``group_size``
    (per group); the lesson's ``base`` scheme supplies every other field (its zero-point
    convention, its scale dtype)."""

    base: QuantConfig
    format: Format
    bits: int
    mode: Mode
    granularity: LabGranularity
    group_size: int

    @classmethod
    def of(cls, cfg: QuantConfig) -> LabSettings:
        """The widgets' values that give back ``cfg``."""
        gran = cfg.granularity
        if isinstance(gran, PerChannel):
            kind = LabGranularity.ROWS if gran.axis == 0 else LabGranularity.COLUMNS
        elif isinstance(gran, PerGroup):
            kind = LabGranularity.GROUP
        else:
            kind = LabGranularity.TENSOR
        group = gran.group_size if isinstance(gran, PerGroup) else 0
        bits = cfg.bits if cfg.format is Format.INT else 4
        return cls(cfg, cfg.format, bits, cfg.mode, kind, group)

    def to_config(self, cols: int) -> QuantConfig:
        """The scheme for a tensor of ``cols`` columns. A group size that does not divide
        ``cols`` falls back to the largest divisor of ``cols`` below it (a whole row at
        worst); a codebook format is symmetric whatever ``mode`` says."""
        if self.granularity is LabGranularity.ROWS:
            gran: PerTensor | PerChannel | PerGroup = PerChannel(0)
        elif self.granularity is LabGranularity.COLUMNS:
            gran = PerChannel(1)
        elif self.granularity is LabGranularity.GROUP:
            size = max(1, min(self.group_size, cols))
            while cols % size:
                size -= 1
            gran = PerGroup(size)
        else:
            gran = PerTensor()
        linear = self.format is Format.INT
        return QuantConfig(
            bits=self.bits if linear else 8,
            mode=self.mode if linear else Mode.SYMMETRIC,
            granularity=gran,
            format=self.format,
            zero_point=self.base.zero_point,
            scale_dtype=self.base.scale_dtype,
        )
