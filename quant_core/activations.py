"""Activations: name their granularities, find outliers, quantize with dynamic or static ranges.

An activation matrix is ``[tokens, features]``: row ``t`` is what one token feeds a layer.
Its granularities in activation terms (``ActivationGranularity``):

- per-tensor: ``PerTensor()``, one scale for the matrix;
- per-token: ``PerChannel(axis=0)``, one scale per row (token);
- per-channel (per feature): ``PerChannel(axis=1)``, one scale per column (feature).

Dynamic ranges come from the tokens being quantized (``quantize_activation(x, cfg)``);
static ranges are calibrated once on other tokens (``calibrate_ranges``) and applied to new
ones (``quantize_activation(x, cfg, ranges)``), which clips what falls outside them.

``feature_absmax`` gives the per-feature ``max|x|`` that shows outlier features; capturing
the inputs of a model's linear layers is ``quant_core.capture``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from .analysis import ClipStats, clip_stats
from .capture import ActivationCapture
from .config import Granularity, PerChannel, PerTensor, QuantConfig
from .metrics import ErrorMetrics, error_metrics
from .quantize import QuantizedTensor, quantize
from .ranges import BlockRange
from .validation import check_float_tensor

__all__ = [
    "ActivationGranularity",
    "ActivationQuant",
    "ActivationRanges",
    "RangeComparison",
    "calibrate_layer_ranges",
    "calibrate_ranges",
    "check_activation",
    "compare_static_dynamic",
    "feature_absmax",
    "outlier_features",
    "quantize_activation",
]


class ActivationGranularity(enum.Enum):
    """Granularities of a ``[tokens, features]`` activation, named as users know them.

    ``x`` of shape ``[512, 384]``: PER_TENSOR has one scale (``[]``), PER_TOKEN one per row
    (``[512]``, ``PerChannel(axis=0)``), PER_FEATURE one per column (``[384]``,
    ``PerChannel(axis=1)``). Per-token ranges exist only for the tokens at hand, so they
    are always dynamic; static (calibrated) ranges are per-tensor or per-feature.
    """

    PER_TENSOR = "per_tensor"
    PER_TOKEN = "per_token"
    PER_FEATURE = "per_feature"

    @property
    def granularity(self) -> Granularity:
        """The ``quant_core`` granularity for a 2-D ``[tokens, features]`` matrix."""
        return _GRANULARITY[self]

    @property
    def label(self) -> str:
        """A short label for a picker: ``"per-tensor"``, ``"per-token (one scale per
        row)"``, ``"per-channel (per feature)"``."""
        return _LABEL[self]

    @property
    def allows_static(self) -> bool:
        """Whether ranges calibrated on other tokens can be applied (not per-token)."""
        return self is not ActivationGranularity.PER_TOKEN

    @classmethod
    def of(cls, granularity: Granularity) -> ActivationGranularity:
        """The member for ``granularity`` on a 2-D activation (``PerChannel(-1)`` is per
        feature); ``ValueError`` for one with no activation name (a group, an axis > 1)."""
        if isinstance(granularity, PerTensor):
            return cls.PER_TENSOR
        if isinstance(granularity, PerChannel) and granularity.axis in (0, -2):
            return cls.PER_TOKEN
        if isinstance(granularity, PerChannel) and granularity.axis in (1, -1):
            return cls.PER_FEATURE
        raise ValueError(
            f"granularity {granularity!r} has no activation name; expected PerTensor(), "
            "PerChannel(axis=0) (per token) or PerChannel(axis=1) (per feature)"
        )


_GRANULARITY: dict[ActivationGranularity, Granularity] = {
    ActivationGranularity.PER_TENSOR: PerTensor(),
    ActivationGranularity.PER_TOKEN: PerChannel(axis=0),
    ActivationGranularity.PER_FEATURE: PerChannel(axis=1),
}
_LABEL: dict[ActivationGranularity, str] = {
    ActivationGranularity.PER_TENSOR: "per-tensor",
    ActivationGranularity.PER_TOKEN: "per-token (one scale per row)",
    ActivationGranularity.PER_FEATURE: "per-channel (per feature)",
}


def check_activation(x: object, name: str = "x") -> torch.Tensor:
    """``x`` if it is a finite float ``[tokens, features]`` matrix; ``TypeError`` /
    ``ValueError`` naming its type, dtype or shape otherwise."""
    x = check_float_tensor(x, name)
    if x.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D [tokens, features] activation, got shape {tuple(x.shape)}"
        )
    return x


def feature_absmax(x: torch.Tensor) -> torch.Tensor:
    """Per-feature ``max_t |x[t, j]|`` of a ``[tokens, features]`` activation: float32
    ``[features]``. The outlier strip: a few features far above the rest are what wrecks
    per-tensor int8 (LLM.int8, SmoothQuant)."""
    x = check_activation(x)
    return x.detach().abs().amax(dim=0).to(torch.float32)


def outlier_features(x: torch.Tensor, *, factor: float = 6.0) -> torch.Tensor:
    """Indices (int64, ascending) of the features whose ``max|x_j|`` exceeds ``factor``
    times the median over features of ``max|x_j|``: the outliers of ``x``.

    ``factor`` must be a number > 1 (``ValueError``/``TypeError`` otherwise).
    """
    if isinstance(factor, bool) or not isinstance(factor, int | float):
        raise TypeError(f"factor must be a number, got {factor!r}")
    if not factor > 1.0:
        raise ValueError(f"factor={factor} must be > 1")
    amax = feature_absmax(x)
    return (amax > factor * amax.median()).nonzero().reshape(-1)


# --- Static and dynamic ranges --------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ActivationRanges:
    """Static activation ranges calibrated on ``n_tokens`` tokens of ``n_features``
    features under ``config`` (per-tensor or per-feature).

    ``ranges``: ``lo``/``hi`` of shape ``[1, 1]`` (per tensor) or ``[n_features, 1]`` (per
    feature), what ``quantize(..., ranges=...)`` takes; under a symmetric config
    ``lo = -hi``.
    """

    config: QuantConfig
    ranges: BlockRange
    n_features: int
    n_tokens: int

    @property
    def granularity(self) -> ActivationGranularity:
        return ActivationGranularity.of(self.config.granularity)


def _check_config(cfg: object) -> QuantConfig:
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    return cfg


def calibrate_ranges(x: torch.Tensor, cfg: QuantConfig) -> ActivationRanges:
    """Static ranges of ``cfg`` chosen on the calibration activation ``x`` ``[tokens, F]``:
    per block, the range ``quantize(x, cfg)`` fits its grid to (min-max, percentile or MSE,
    as ``cfg.range_method`` says).

    Raises ``ValueError`` for a per-token (or per-group) ``cfg``: those ranges belong to
    the calibration tokens themselves, and a held-out sentence has other tokens.
    """
    x = check_activation(x)
    cfg = _check_config(cfg)
    gran = ActivationGranularity.of(cfg.granularity)
    if not gran.allows_static:
        raise ValueError(
            f"static ranges must be per-tensor or per-feature, not {gran.label} "
            f"({cfg.granularity!r}): a held-out sentence has other tokens, so per-token "
            "ranges are always dynamic"
        )
    qt = quantize(x, cfg)
    if qt.chosen_range is None:  # quantize always sets it; keep the type checker honest
        raise ValueError(f"quantize chose no range for {cfg.describe()}")
    return ActivationRanges(
        config=cfg, ranges=qt.chosen_range, n_features=int(x.shape[1]), n_tokens=int(x.shape[0])
    )


def calibrate_layer_ranges(
    capture: ActivationCapture, cfg: QuantConfig
) -> dict[str, ActivationRanges]:
    """``calibrate_ranges`` for every layer of ``capture`` (layers sharing one input share
    one result), for ``fake_quantize_linears`` / ``model_output_report``."""
    if not isinstance(capture, ActivationCapture):
        raise TypeError(f"capture must be an ActivationCapture, got {type(capture).__name__}")
    done: dict[int, ActivationRanges] = {}
    out = {}
    for name, x in capture.inputs.items():
        if id(x) not in done:
            done[id(x)] = calibrate_ranges(x, cfg)
        out[name] = done[id(x)]
    return out


def quantize_activation(
    x: torch.Tensor, cfg: QuantConfig, ranges: ActivationRanges | None = None
) -> QuantizedTensor:
    """Quantize the activation ``x`` ``[tokens, F]`` under ``cfg``: with dynamic ranges
    (chosen from ``x`` itself) when ``ranges`` is ``None``, else with the static
    ``ranges`` (values beyond them clip; ``clip_stats`` counts them).

    Raises ``ValueError`` when ``ranges`` was calibrated under another config or for
    another number of features.
    """
    x = check_activation(x)
    cfg = _check_config(cfg)
    if ranges is None:
        return quantize(x, cfg)
    if not isinstance(ranges, ActivationRanges):
        raise TypeError(f"ranges must be ActivationRanges, got {type(ranges).__name__}")
    if ranges.config != cfg:
        raise ValueError(
            f"ranges were calibrated under {ranges.config.describe()}, not {cfg.describe()}"
        )
    if ranges.n_features != x.shape[1]:
        raise ValueError(
            f"ranges were calibrated on {ranges.n_features} features; x has {x.shape[1]} "
            f"(shape {tuple(x.shape)})"
        )
    return quantize(x, cfg, ranges=ranges.ranges)


@dataclass(frozen=True, eq=False)
class ActivationQuant:
    """One activation quantized: its codes, the error of its dequantized values and how
    many values clipped."""

    quantized: QuantizedTensor
    metrics: ErrorMetrics
    clip: ClipStats

    @property
    def clipped_fraction(self) -> float:
        return self.clip.n_clipped / self.clip.n_elements


@dataclass(frozen=True, eq=False)
class RangeComparison:
    """The same activation under dynamic ranges (its own) and static ranges (calibrated on
    other tokens)."""

    dynamic: ActivationQuant
    static: ActivationQuant
    ranges: ActivationRanges


def _measure(x: torch.Tensor, qt: QuantizedTensor) -> ActivationQuant:
    return ActivationQuant(qt, error_metrics(x, qt.dequantize()), clip_stats(x, qt))


def compare_static_dynamic(
    x: torch.Tensor,
    cfg: QuantConfig,
    *,
    calibration: torch.Tensor | None = None,
    ranges: ActivationRanges | None = None,
) -> RangeComparison:
    """``x`` ``[tokens, F]`` quantized under ``cfg`` with dynamic ranges (its own) and with
    static ranges: calibrated on ``calibration`` ``[tokens', F]`` (other tokens of the same
    layer), or the given ``ranges``; pass exactly one of the two. Metrics and clipping side
    by side.

    Raises as ``calibrate_ranges`` (a per-token ``cfg``) and ``quantize_activation``.
    """
    x = check_activation(x)
    if (calibration is None) == (ranges is None):
        raise ValueError("pass exactly one of calibration (to calibrate on) and ranges")
    if ranges is None:
        calibration = check_activation(calibration, "calibration")
        if calibration.shape[1] != x.shape[1]:
            raise ValueError(
                f"calibration has {calibration.shape[1]} features and x {x.shape[1]}: "
                "static ranges apply to the same layer's inputs"
            )
        ranges = calibrate_ranges(calibration, cfg)
    dynamic = _measure(x, quantize_activation(x, cfg))
    static = _measure(x, quantize_activation(x, cfg, ranges))
    return RangeComparison(dynamic=dynamic, static=static, ranges=ranges)
