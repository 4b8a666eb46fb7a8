"""Weight and activation schemes of a linear layer (``LayerScheme``) and the named pairs of
the course and of deployed int kernels (``SchemePreset``: W8A16, W8A8, W4A16 g128, W4A8)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .activations import ActivationGranularity
from .config import Mode, PerChannel, PerGroup, QuantConfig

__all__ = ["LayerScheme", "SchemePreset"]


def _describe_activation(cfg: QuantConfig) -> str:
    """``cfg.describe()`` followed by the granularity's activation name where it has one,
    e.g. ``"int8 sym per-channel(0) (per-token)"``."""
    try:
        gran = ActivationGranularity.of(cfg.granularity)
    except ValueError:
        return cfg.describe()
    return f"{cfg.describe()} ({_SHORT_NAMES[gran]})"


_SHORT_NAMES = {
    ActivationGranularity.PER_TENSOR: "per-tensor",
    ActivationGranularity.PER_TOKEN: "per-token",
    ActivationGranularity.PER_FEATURE: "per-feature",
}


@dataclass(frozen=True)
class LayerScheme:
    """A weight config and an activation config for one linear layer; ``None`` on either
    side keeps it in float (``LayerScheme()`` is the float layer)."""

    weight: QuantConfig | None = None
    activation: QuantConfig | None = None

    def __post_init__(self) -> None:
        for side in ("weight", "activation"):
            cfg = getattr(self, side)
            if cfg is not None and not isinstance(cfg, QuantConfig):
                raise TypeError(f"{side} must be a QuantConfig or None, got {type(cfg).__name__}")

    @property
    def is_float(self) -> bool:
        return self.weight is None and self.activation is None

    def describe(self) -> str:
        """E.g. ``"W int8 sym per-channel(0) · A int8 sym per-channel(0) (per-token)"``;
        a side kept in float reads ``float``."""
        w = "float" if self.weight is None else self.weight.describe()
        a = "float" if self.activation is None else _describe_activation(self.activation)
        return f"W {w} · A {a}"


_W_INT8_PER_CHANNEL = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=0))
_W_INT4_G128 = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(group_size=128))
_A_INT8_PER_TOKEN = QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=0))


class SchemePreset(enum.Enum):
    """The named weight/activation pairs of the course and of deployed int kernels.

    W8A16: the course's ``W8A16LinearLayer``: int8 symmetric weights, one scale per output
    channel (``s_i = max_j |W_ij| / 127``), float activations.
    W8A8: the same weights, int8 symmetric activations with one scale per token (row).
    W4A16_G128: int4 asymmetric weights in groups of 128 inputs, float activations.
    W4A8: those int4 g128 weights with int8 per-token activations.
    """

    W8A16 = "w8a16"
    W8A8 = "w8a8"
    W4A16_G128 = "w4a16_g128"
    W4A8 = "w4a8"

    @property
    def scheme(self) -> LayerScheme:
        return _PRESETS[self]

    @property
    def label(self) -> str:
        """``"W8A16"``, ``"W8A8"``, ``"W4A16 g128"``, ``"W4A8"``."""
        return _PRESET_LABELS[self]


_PRESETS: dict[SchemePreset, LayerScheme] = {
    SchemePreset.W8A16: LayerScheme(weight=_W_INT8_PER_CHANNEL),
    SchemePreset.W8A8: LayerScheme(weight=_W_INT8_PER_CHANNEL, activation=_A_INT8_PER_TOKEN),
    SchemePreset.W4A16_G128: LayerScheme(weight=_W_INT4_G128),
    SchemePreset.W4A8: LayerScheme(weight=_W_INT4_G128, activation=_A_INT8_PER_TOKEN),
}
_PRESET_LABELS: dict[SchemePreset, str] = {
    SchemePreset.W8A16: "W8A16",
    SchemePreset.W8A8: "W8A8",
    SchemePreset.W4A16_G128: "W4A16 g128",
    SchemePreset.W4A8: "W4A8",
}
