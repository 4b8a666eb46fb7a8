"""A linear layer's output under quantized weights and quantized inputs.

For a layer with weight ``W`` ``[out, in]``, bias ``b`` ``[out]`` and input ``X``
``[tokens, in]``, the float output is ``Y = X W^T + b`` and the quantized one
``Y_hat = X_hat W_hat^T + b`` with ``W_hat`` the dequantized weight (under the scheme's
weight config) and ``X_hat`` the dequantized input (under its activation config); either
config may be ``None``, which keeps that side in float. The two sources of error are shown
apart: weight-only ``X W_hat^T + b`` and activation-only ``X_hat W^T + b``.

With SmoothQuant factors ``s`` ``[in]`` the quantized side works on ``X / s`` and ``W * s``
(columns scaled), whose product is ``X W^T`` in exact arithmetic; ``Y`` stays the float
output of the original layer.

    ev = evaluate_linear(x, layer.weight, layer.bias, SchemePreset.W8A8.scheme)
    ev.metrics.sqnr_db, ev.weight_only.sqnr_db, ev.activation_only.sqnr_db
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .activations import (
    ActivationRanges,
    check_activation,
    quantize_activation,
)
from .analysis import ClipStats, clip_stats
from .config import QuantConfig
from .layer_scheme import LayerScheme, SchemePreset
from .metrics import ErrorMetrics, error_metrics
from .quantize import QuantizedTensor, quantize
from .validation import check_float_tensor

__all__ = [
    "LayerScheme",
    "LinearEval",
    "SchemePreset",
    "check_factors",
    "check_linear",
    "evaluate_linear",
    "linear_layer",
    "scale_columns",
]


def linear_layer(module: nn.Module, name: str) -> nn.Linear:
    """The ``nn.Linear`` called ``name`` in ``module``; ``ValueError`` naming it when it
    does not exist or is another kind of module."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(name, str):
        raise TypeError(f"layer name must be a str, got {type(name).__name__}")
    try:
        layer = module.get_submodule(name)
    except AttributeError:
        raise ValueError(f"module has no layer named {name!r}") from None
    if not isinstance(layer, nn.Linear):
        raise ValueError(f"layer {name!r} is a {type(layer).__name__}, not an nn.Linear")
    return layer


def check_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``x`` ``[tokens, in]``, ``weight`` ``[out, in]``, ``bias`` ``[out]`` or ``None``:
    checked, detached, float32 on ``x``'s device. ``TypeError``/``ValueError`` naming the
    bad argument and its shape otherwise."""
    x = check_activation(x)
    weight = check_float_tensor(weight, "weight")
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D [out, in], got shape {tuple(weight.shape)}")
    if weight.shape[1] != x.shape[1]:
        raise ValueError(
            f"x has {x.shape[1]} features but weight {tuple(weight.shape)} takes "
            f"{weight.shape[1]} inputs"
        )
    if bias is not None:
        bias = check_float_tensor(bias, "bias")
        if tuple(bias.shape) != (weight.shape[0],):
            raise ValueError(
                f"bias has shape {tuple(bias.shape)}; expected [{weight.shape[0]}] "
                f"for weight {tuple(weight.shape)}"
            )
        bias = bias.detach().to(device=x.device, dtype=torch.float32)
    x = x.detach().to(torch.float32)
    weight = weight.detach().to(device=x.device, dtype=torch.float32)
    return x, weight, bias


def check_factors(factors: object, n_inputs: int, name: str = "smoothing") -> torch.Tensor:
    """``factors`` as float32 ``[n_inputs]``, each finite and > 0; raise otherwise."""
    s = check_float_tensor(factors, name)
    if tuple(s.shape) != (n_inputs,):
        raise ValueError(
            f"{name} has shape {tuple(s.shape)}; expected [{n_inputs}] (one per input)"
        )
    s = s.detach().to(torch.float32)
    n_bad = int((s <= 0).sum())
    if n_bad:
        raise ValueError(f"{name} holds {n_bad} factor(s) <= 0; smoothing factors must be > 0")
    return s


def scale_columns(
    x: torch.Tensor, weight: torch.Tensor, factors: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(X / s, W * s)``, columns scaled: one rounding per element on each side (a
    division, not a multiplication by ``1/s``, which would round twice)."""
    return x / factors, weight * factors


@dataclass(frozen=True, eq=False)
class LinearEval:
    """A linear layer's float output against its quantized output.

    ``y`` = ``X W^T + b`` (float32 ``[tokens, out]``); ``y_hat`` = ``X_hat W_hat^T + b``;
    ``metrics``: ``error_metrics(y, y_hat)``. ``y_weight_only`` = ``X W_hat^T + b`` and
    ``y_activation_only`` = ``X_hat W^T + b`` with their metrics against ``y``
    (``None`` when that side stays float: its contribution is zero). ``weight_q`` /
    ``activation_q``: the quantized weight ``[out, in]`` and input ``[tokens, in]`` (of
    ``W * s`` and ``X / s`` under SmoothQuant ``smoothing``); ``activation_clip``: how
    many inputs clipped (static ranges clip held-out outliers).
    """

    scheme: LayerScheme
    y: torch.Tensor
    y_hat: torch.Tensor
    metrics: ErrorMetrics
    y_weight_only: torch.Tensor | None
    weight_only: ErrorMetrics | None
    y_activation_only: torch.Tensor | None
    activation_only: ErrorMetrics | None
    weight_q: QuantizedTensor | None
    activation_q: QuantizedTensor | None
    activation_clip: ClipStats | None
    smoothing: torch.Tensor | None

    @property
    def error(self) -> torch.Tensor:
        """``y_hat - y``, ``[tokens, out]``."""
        return self.y_hat - self.y


def evaluate_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    scheme: LayerScheme | SchemePreset,
    *,
    activation_ranges: ActivationRanges | None = None,
    smoothing: torch.Tensor | None = None,
    weight_q: QuantizedTensor | None = None,
) -> LinearEval:
    """Output of the layer ``(weight [out, in], bias [out])`` on ``x`` ``[tokens, in]`` in
    float and under ``scheme`` (a ``LayerScheme`` or a ``SchemePreset``).

    ``activation_ranges``: static ranges for the input (calibrated with
    ``calibrate_ranges`` under ``scheme.activation``, on ``X / s`` when smoothing); without
    them the input's ranges are dynamic. ``smoothing``: SmoothQuant factors ``s`` ``[in]``
    (``smoothing_factors``), all > 0; the quantizers see ``X / s`` and ``W * s``.
    ``weight_q``: the weight already quantized under ``scheme.weight`` (reused, e.g. by a
    caller that runs the whole model with it); not with ``smoothing``, which changes it.

    With ``LayerScheme()`` and no smoothing, ``y_hat`` is computed exactly as ``y`` and
    equals it bit for bit. Raises ``TypeError``/``ValueError`` naming a bad argument (shapes,
    dtypes, non-finite values, a scheme that does not fit the weight, ranges without an
    activation config or under another one).
    """
    if isinstance(scheme, SchemePreset):
        scheme = scheme.scheme
    if not isinstance(scheme, LayerScheme):
        raise TypeError(f"scheme must be a LayerScheme or SchemePreset, got {scheme!r}")
    x, w, b = check_linear(x, weight, bias)
    if activation_ranges is not None and scheme.activation is None:
        raise ValueError("activation_ranges given, but the scheme keeps activations in float")
    s = None if smoothing is None else check_factors(smoothing, w.shape[1]).to(x.device)

    if weight_q is not None:
        _check_weight_q(weight_q, scheme, w, s)
    y = F.linear(x, w, b)
    xs, ws = (x, w) if s is None else scale_columns(x, w, s)
    if weight_q is None and scheme.weight is not None:
        weight_q = _quantize_weight(ws, scheme.weight)
    activation_q = (
        None
        if scheme.activation is None
        else quantize_activation(xs, scheme.activation, activation_ranges)
    )
    w_hat = ws if weight_q is None else weight_q.dequantize()
    x_hat = xs if activation_q is None else activation_q.dequantize()
    y_hat = F.linear(x_hat, w_hat, b)

    y_w = y_a = None
    if weight_q is not None:
        y_w = y_hat if activation_q is None else F.linear(xs, w_hat, b)
    if activation_q is not None:
        y_a = y_hat if weight_q is None else F.linear(x_hat, ws, b)
    metrics = error_metrics(y, y_hat)
    return LinearEval(
        scheme=scheme,
        y=y,
        y_hat=y_hat,
        metrics=metrics,
        y_weight_only=y_w,
        weight_only=None if y_w is None else metrics if y_w is y_hat else error_metrics(y, y_w),
        y_activation_only=y_a,
        activation_only=(
            None if y_a is None else metrics if y_a is y_hat else error_metrics(y, y_a)
        ),
        weight_q=weight_q,
        activation_q=activation_q,
        activation_clip=None if activation_q is None else clip_stats(xs, activation_q),
        smoothing=s,
    )


def _check_weight_q(
    weight_q: object, scheme: LayerScheme, w: torch.Tensor, s: torch.Tensor | None
) -> None:
    if not isinstance(weight_q, QuantizedTensor):
        raise TypeError(f"weight_q must be a QuantizedTensor, got {type(weight_q).__name__}")
    if s is not None:
        raise ValueError("weight_q cannot be reused with smoothing: W * s must be quantized")
    if scheme.weight is None or weight_q.config != scheme.weight:
        raise ValueError(
            f"weight_q was quantized under {weight_q.config.describe()}, but the scheme is "
            f"{scheme.describe()}"
        )
    if tuple(weight_q.shape) != tuple(w.shape):
        raise ValueError(f"weight_q has shape {tuple(weight_q.shape)}; weight {tuple(w.shape)}")


def _quantize_weight(w: torch.Tensor, cfg: QuantConfig) -> QuantizedTensor:
    try:
        return quantize(w, cfg)
    except ValueError as exc:
        raise ValueError(f"weight {tuple(w.shape)} under {cfg.describe()}: {exc}") from exc
