"""One linear layer of the bundled model under a weight and an activation scheme, with
optional SmoothQuant, calibrated on one sentence set and evaluated on another.

``Y = X W^T + b`` against ``Y_hat = X_hat W_hat^T + b`` (``quant_core.evaluate_linear``);
SmoothQuant factors ``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)`` and static activation
ranges are both chosen on the calibration inputs ``X_calib`` and applied to the evaluation
inputs ``X`` (the same tensor when evaluating on the calibration sentences).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from quant_core import (
    AlphaSweep,
    LayerScheme,
    LinearEval,
    SchemePreset,
    alpha_sweep,
    calibrate_ranges,
    evaluate_linear,
    feature_absmax,
    linear_layer,
    smoothing_factors,
)
from quant_core.capture import ActivationCapture, linear_layer_names
from quant_core.smoothquant import DEFAULT_ALPHAS, check_alpha

from .sentences import RangeMode

__all__ = [
    "EvalSplit",
    "LayerInputs",
    "LayerSettings",
    "SchemeChoice",
    "evaluate_layer",
    "layer_inputs",
    "linear_shapes",
    "sweep_layer",
]


class SchemeChoice(enum.Enum):
    """The layer page's scheme menu: the ``SchemePreset`` members, or CUSTOM (two pickers)."""

    W8A16 = SchemePreset.W8A16.value
    W8A8 = SchemePreset.W8A8.value
    W4A16_G128 = SchemePreset.W4A16_G128.value
    W4A8 = SchemePreset.W4A8.value
    CUSTOM = "custom"

    @property
    def preset(self) -> SchemePreset | None:
        """The preset, ``None`` for CUSTOM."""
        return None if self is SchemeChoice.CUSTOM else SchemePreset(self.value)

    @property
    def label(self) -> str:
        preset = self.preset
        return "Custom (pick each side)" if preset is None else preset.label


class EvalSplit(enum.Enum):
    """Which sentences the layer is evaluated on.

    CALIBRATION: the calibration sentences themselves (what is calibrated fits them).
    HELD_OUT: calibrate on the calibration sentences, evaluate on the held-out ones.
    """

    CALIBRATION = "calibration"
    HELD_OUT = "held_out"

    @property
    def label(self) -> str:
        if self is EvalSplit.CALIBRATION:
            return "Calibration sentences"
        return "Held-out sentences (calibrated on the calibration set)"


@dataclass(frozen=True)
class LayerSettings:
    """What the layer page evaluates: ``layer`` (a linear layer's name), ``scheme``,
    activation ``ranges``, the evaluation ``split`` and SmoothQuant's ``alpha`` (``None``:
    no smoothing; else in ``[0, 1]``, ``ValueError`` otherwise)."""

    layer: str
    scheme: LayerScheme
    ranges: RangeMode = RangeMode.DYNAMIC
    split: EvalSplit = EvalSplit.CALIBRATION
    alpha: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, LayerScheme):
            raise TypeError(f"scheme must be a LayerScheme, got {self.scheme!r}")
        if self.alpha is not None:
            object.__setattr__(self, "alpha", check_alpha(self.alpha))

    @property
    def key(self) -> str:
        """A cache key naming everything but ``alpha`` (what the sweep depends on)."""
        return f"{self.layer}|{self.split.value}|{self.ranges.value}|{self.scheme!r}"


@dataclass(frozen=True, eq=False)
class LayerInputs:
    """A linear layer's weight ``[out, in]``, bias ``[out]`` (or ``None``), its inputs on
    the calibration sentences ``x_calib`` ``[tokens', in]`` and on the evaluation sentences
    ``x_eval`` ``[tokens, in]`` (possibly the same tensor). All float32, read-only."""

    name: str
    weight: torch.Tensor
    bias: torch.Tensor | None
    x_calib: torch.Tensor
    x_eval: torch.Tensor


def layer_inputs(
    module: nn.Module, name: str, calibration: ActivationCapture, evaluation: ActivationCapture
) -> LayerInputs:
    """The layer ``name`` of ``module`` (the transformer whose ``named_modules()`` gave the
    captures' names) with its captured inputs. ``ValueError``/``KeyError`` naming a layer
    that is not an ``nn.Linear`` of ``module`` or was not captured."""
    layer = linear_layer(module, name)
    bias = None if layer.bias is None else layer.bias.detach().to(torch.float32)
    return LayerInputs(
        name=name,
        weight=layer.weight.detach().to(torch.float32),
        bias=bias,
        x_calib=calibration[name],
        x_eval=evaluation[name],
    )


def linear_shapes(module: nn.Module) -> dict[str, tuple[int, int]]:
    """Every ``nn.Linear`` of ``module`` (``named_modules()`` order) -> its weight's
    ``(out_features, in_features)``."""
    return {
        name: (layer.out_features, layer.in_features)
        for name in linear_layer_names(module)
        if isinstance(layer := module.get_submodule(name), nn.Linear)
    }


def _factors(inputs: LayerInputs, alpha: float) -> torch.Tensor:
    return smoothing_factors(feature_absmax(inputs.x_calib), inputs.weight, alpha)


def evaluate_layer(
    inputs: LayerInputs, scheme: LayerScheme, ranges: RangeMode, alpha: float | None = None
) -> LinearEval:
    """The layer's output on ``inputs.x_eval`` in float and under ``scheme``.

    ``alpha``: SmoothQuant's migration strength in ``[0, 1]``, factors from
    ``max|X_calib_j|`` (``None``: no smoothing). ``ranges``: ``STATIC`` calibrates the
    activation config's ranges on ``X_calib`` (divided by ``s`` under smoothing) and applies
    them to ``X``, so held-out values beyond them clip (``LinearEval.activation_clip``);
    ``DYNAMIC`` lets ``X`` choose its own. Raises ``ValueError`` for static per-token
    activations (no static per-token ranges exist) and as ``evaluate_linear``.
    """
    if not isinstance(scheme, LayerScheme):
        raise TypeError(f"scheme must be a LayerScheme, got {type(scheme).__name__}")
    if not isinstance(ranges, RangeMode):
        raise TypeError(f"ranges must be a RangeMode, got {ranges!r}")
    s = None if alpha is None else _factors(inputs, check_alpha(alpha))
    act_ranges = None
    if ranges is RangeMode.STATIC and scheme.activation is not None:
        x_calib = inputs.x_calib if s is None else inputs.x_calib / s
        act_ranges = calibrate_ranges(x_calib, scheme.activation)
    return evaluate_linear(
        inputs.x_eval,
        inputs.weight,
        inputs.bias,
        scheme,
        activation_ranges=act_ranges,
        smoothing=s,
    )


def sweep_layer(
    inputs: LayerInputs,
    scheme: LayerScheme,
    ranges: RangeMode,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
) -> AlphaSweep:
    """Output error against SmoothQuant's ``alpha``, each point as ``evaluate_layer`` computes
    it (factors and, when static, ranges from ``X_calib``), so the current alpha's
    ``evaluate_layer(...).metrics`` lies on the curve; ``baseline`` is the scheme without
    smoothing. Dynamic ranges use ``quant_core.alpha_sweep`` (one matmul per point)."""
    if ranges is RangeMode.DYNAMIC or scheme.activation is None:
        return alpha_sweep(
            inputs.x_eval,
            inputs.weight,
            inputs.bias,
            scheme,
            alphas,
            act_absmax=feature_absmax(inputs.x_calib),
        )
    if isinstance(alphas, str) or not isinstance(alphas, Sequence) or len(alphas) == 0:
        raise ValueError(f"alphas must be a non-empty sequence of numbers, got {alphas!r}")
    points = tuple(check_alpha(a) for a in alphas)
    metrics = tuple(evaluate_layer(inputs, scheme, ranges, a).metrics for a in points)
    baseline = evaluate_layer(inputs, scheme, ranges).metrics
    return AlphaSweep(scheme=scheme, alphas=points, metrics=metrics, baseline=baseline)
