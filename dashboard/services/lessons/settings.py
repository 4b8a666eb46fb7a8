"""A tensor lab's settings as its widgets hold them, and the ``QuantConfig`` they make.

The widgets start at the lesson's scheme (``LabSettings.of``) and give a config back
(``to_config``), so a lab opened at the course's settings shows exactly that scheme.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from quant_core import Format, Mode, PerChannel, PerGroup, PerTensor, QuantConfig

__all__ = [
    "LAB_BITS",
    "MAX_LAB_GROUP",
    "LabFormat",
    "LabGranularity",
    "LabSettings",
]

LAB_BITS = (2, 3, 4, 5, 6, 7, 8)
# The largest group a lab's slider offers: beyond it a group is most of a row anyway.
MAX_LAB_GROUP = 256


class LabFormat(enum.Enum):
    """A value set a lab offers: the linear grid, the codebooks, and the shipped formats
    whose block size and scale format are their own (``QuantConfig.from_name``)."""

    INT = "int"
    NF4 = "nf4"
    FP4 = "fp4_e2m1"
    FP8 = "fp8_e4m3"
    MXFP4 = "MXFP4"
    NVFP4 = "NVFP4"

    @property
    def label(self) -> str:
        return _FORMAT_LABELS[self]

    @property
    def named(self) -> bool:
        """A shipped format: its block size and scale format come with its name."""
        return self in (LabFormat.MXFP4, LabFormat.NVFP4)

    @classmethod
    def of(cls, cfg: QuantConfig) -> LabFormat:
        """The lab format ``cfg`` is; ``ValueError`` for one a lab does not offer."""
        for named in (cls.MXFP4, cls.NVFP4):
            if cfg == QuantConfig.from_name(named.value):
                return named
        for fmt in cls:
            if not fmt.named and cfg.format.value == fmt.value:
                return fmt
        raise ValueError(f"a lab does not offer {cfg.describe()}")


_FORMAT_LABELS = {
    LabFormat.INT: "int (linear)",
    LabFormat.NF4: "NF4",
    LabFormat.FP4: "FP4 (E2M1)",
    LabFormat.FP8: "FP8 (E4M3)",
    LabFormat.MXFP4: "MXFP4: FP4, a power-of-two scale per 32",
    LabFormat.NVFP4: "NVFP4: FP4, an FP8 scale per 16",
}


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
    """``format``, ``bits`` (the linear format), ``mode``, ``granularity`` and ``group_size``
    (per group); the lesson's ``base`` scheme supplies every other field (its zero-point
    convention, its scale dtype)."""

    base: QuantConfig
    format: LabFormat
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
        return cls(cfg, LabFormat.of(cfg), bits, cfg.mode, kind, group)

    def to_config(self, cols: int) -> QuantConfig:
        """The scheme for a tensor of ``cols`` columns. A group size that does not divide
        ``cols`` falls back to the largest divisor of ``cols`` below it (a whole row at
        worst); a codebook format is symmetric whatever ``mode`` says; a shipped format
        (MXFP4, NVFP4) is its own config whatever the other settings say."""
        if self.format.named:
            return QuantConfig.from_name(self.format.value)
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
        linear = self.format is LabFormat.INT
        return QuantConfig(
            bits=self.bits if linear else 8,
            mode=self.mode if linear else Mode.SYMMETRIC,
            granularity=gran,
            format=Format(self.format.value),
            zero_point=self.base.zero_point,
            scale_dtype=self.base.scale_dtype,
        )
