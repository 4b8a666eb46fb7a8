"""Synthetic tensors: reproducible draws from a few distributions, described by a small frozen
``SyntheticSpec`` so the dashboard caches on the spec rather than on the tensor."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch

__all__ = [
    "MAX_SYNTHETIC_ELEMENTS",
    "OUTLIER_FRACTION_RANGE",
    "OUTLIER_MAGNITUDE_RANGE",
    "SEED_RANGE",
    "SIDE_RANGE",
    "Distribution",
    "SyntheticSpec",
    "make_synthetic",
]

MAX_SYNTHETIC_ELEMENTS = 64_000_000
# The one range of each value: the spec's checks, the URL parser and the widgets all use
# these, so no value one accepts can crash another.
SIDE_RANGE = (1, 16_384)
SEED_RANGE = (0, (1 << 31) - 1)
OUTLIER_FRACTION_RANGE = (0.0, 0.5)
OUTLIER_MAGNITUDE_RANGE = (0.001, 1e6)


class Distribution(enum.Enum):
    """NORMAL: N(0, 1). UNIFORM: U(-1, 1). LAPLACE: Laplace(0, 1/sqrt(2)), unit variance.
    OUTLIERS: N(0, 1) with a fraction of cells replaced by +-magnitude (and optionally one
    column, an outlier channel, scaled by the magnitude), as in LLM activations."""

    NORMAL = "normal"
    UNIFORM = "uniform"
    LAPLACE = "laplace"
    OUTLIERS = "outliers"


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
        lo, hi = SIDE_RANGE
        if not (lo <= self.rows <= hi and lo <= self.cols <= hi):
            raise ValueError(f"rows and cols must be in {lo}..{hi}, got {self.rows} x {self.cols}")
        lo, hi = SEED_RANGE
        if not lo <= self.seed <= hi:
            raise ValueError(f"seed={self.seed} must be in {lo}..{hi}")
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
