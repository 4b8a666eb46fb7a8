"""SmoothQuant (Xiao et al., 2023): move quantization difficulty from activations to weights.

Per input channel ``j`` of a linear layer, with ``max|X_j|`` over tokens and ``max|W_j|``
over output rows (column ``j`` of ``W`` ``[out, in]``):

    s_j = max|X_j|^alpha / max|W_j|^(1 - alpha),    X <- X / s,    W <- W * s

so ``(X / s)(W * s)^T = X W^T`` in exact arithmetic, while an outlier feature of ``X`` is
divided down and the matching weight column multiplied up. ``alpha = 0`` leaves ``max|X_j|``
untouched and flattens the weight columns (``max|W_j * s_j| = 1``), ``alpha = 1`` flattens
the activation (``max|X_j / s_j| = 1``), ``alpha = 0.5`` balances them
(``max|X_j/s_j| = max|W_j s_j| = sqrt(max|X_j| max|W_j|)``).

    s = smoothing_factors(feature_absmax(x_calib), layer.weight, alpha=0.5)
    ev = evaluate_linear(x, layer.weight, layer.bias, scheme, smoothing=s)
    sweep = alpha_sweep(x, layer.weight, layer.bias, scheme)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .activations import feature_absmax, quantize_activation
from .linear_eval import (
    LayerScheme,
    SchemePreset,
    check_factors,
    check_linear,
    scale_columns,
)
from .metrics import ErrorMetrics, error_metrics
from .quantize import quantize
from .validation import check_float_tensor

__all__ = [
    "DEFAULT_ALPHAS",
    "AlphaSweep",
    "alpha_sweep",
    "check_alpha",
    "smooth",
    "smoothing_factors",
]

DEFAULT_ALPHAS: tuple[float, ...] = tuple(i / 10 for i in range(11))  # 0.0, 0.1, ..., 1.0

# Factors are kept inside float32's normal range so that X / s and W * s stay finite for
# any finite inputs of ordinary magnitude.
_S_MIN = 2.0**-126
_S_MAX = 2.0**126


def check_alpha(alpha: object) -> float:
    """``alpha`` as a float in ``[0, 1]``; ``TypeError``/``ValueError`` naming it otherwise."""
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise TypeError(f"alpha must be a number in [0, 1], got {alpha!r}")
    if not 0.0 <= float(alpha) <= 1.0:  # also rejects NaN
        raise ValueError(f"alpha={alpha} must be in [0, 1]")
    return float(alpha)


def smoothing_factors(
    act_absmax: torch.Tensor, weight: torch.Tensor, alpha: float = 0.5
) -> torch.Tensor:
    """SmoothQuant factors ``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)``, float32 ``[in]``.

    ``act_absmax``: per-feature ``max|X_j|`` ``[in]`` (``feature_absmax`` of calibration
    activations), all >= 0; ``weight``: ``[out, in]``. A zero column on either side (a
    feature that is always 0, or an input no output uses) gets ``s_j = 1``: its product is
    0 whatever ``s_j`` is, and ``0^alpha / 0^(1-alpha)`` has no value. Computed in float64,
    then kept within float32's normal range ``[2^-126, 2^126]``.
    """
    alpha = check_alpha(alpha)
    a = check_float_tensor(act_absmax, "act_absmax")
    w = check_float_tensor(weight, "weight")
    if w.dim() != 2:
        raise ValueError(f"weight must be 2-D [out, in], got shape {tuple(w.shape)}")
    if tuple(a.shape) != (w.shape[1],):
        raise ValueError(
            f"act_absmax has shape {tuple(a.shape)}; expected [{w.shape[1]}], one per input "
            f"feature of weight {tuple(w.shape)}"
        )
    if bool((a < 0).any()):
        raise ValueError("act_absmax holds negative values; pass max|x| per feature")
    ax = a.detach().to(torch.float64)
    aw = w.detach().to(device=a.device, dtype=torch.float64).abs().amax(dim=0)
    live = (ax > 0) & (aw > 0)
    s = torch.where(live, ax.pow(alpha) / aw.pow(1.0 - alpha), 1.0)
    return s.clamp_(_S_MIN, _S_MAX).to(torch.float32)


def smooth(
    x: torch.Tensor, weight: torch.Tensor, factors: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(X / s, W * s)`` for ``x`` ``[tokens, in]``, ``weight`` ``[out, in]``, ``factors``
    ``[in]`` (> 0): float32, what the quantizers see under SmoothQuant."""
    x32, w32, _ = check_linear(x, weight, None)
    return scale_columns(x32, w32, check_factors(factors, w32.shape[1], "factors").to(x32.device))


@dataclass(frozen=True)
class AlphaSweep:
    """Output error of one layer under ``scheme`` with SmoothQuant at each ``alpha``.

    ``metrics[i]``: ``error_metrics(Y, Y_hat)`` at ``alphas[i]``, ``Y`` the float output;
    ``baseline``: the same scheme without smoothing (which is not ``alpha = 0``: that still
    divides each weight column by its ``max|W_j|``).
    """

    scheme: LayerScheme
    alphas: tuple[float, ...]
    metrics: tuple[ErrorMetrics, ...]
    baseline: ErrorMetrics

    @property
    def best_alpha(self) -> float:
        """The alpha of the lowest output MSE (the first, on ties)."""
        mses = [m.mse for m in self.metrics]
        return self.alphas[mses.index(min(mses))]

    def mse(self) -> tuple[float, ...]:
        return tuple(m.mse for m in self.metrics)

    def sqnr_db(self) -> tuple[float, ...]:
        return tuple(m.sqnr_db for m in self.metrics)


def alpha_sweep(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    scheme: LayerScheme | SchemePreset,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    *,
    act_absmax: torch.Tensor | None = None,
) -> AlphaSweep:
    """Output error against ``alpha`` for the layer ``(weight, bias)`` on ``x`` under
    ``scheme`` with SmoothQuant factors from ``act_absmax`` (default: ``feature_absmax(x)``,
    i.e. calibrated on ``x`` itself). Activation ranges are dynamic.

    Each point quantizes ``W * s`` and ``X / s`` and computes one matmul; ``Y`` is computed
    once. Raises as ``evaluate_linear`` and ``check_alpha`` (every alpha in ``[0, 1]``, at
    least one).
    """
    if isinstance(scheme, SchemePreset):
        scheme = scheme.scheme
    if not isinstance(scheme, LayerScheme):
        raise TypeError(f"scheme must be a LayerScheme or SchemePreset, got {scheme!r}")
    if isinstance(alphas, str) or not isinstance(alphas, Sequence) or len(alphas) == 0:
        raise ValueError(f"alphas must be a non-empty sequence of numbers, got {alphas!r}")
    points = tuple(check_alpha(a) for a in alphas)
    x32, w32, b32 = check_linear(x, weight, bias)
    absmax = feature_absmax(x32) if act_absmax is None else act_absmax
    wcfg, acfg = scheme.weight, scheme.activation

    def quantized_output(xs: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
        w_hat = ws if wcfg is None else quantize(ws, wcfg).dequantize()
        x_hat = xs if acfg is None else quantize_activation(xs, acfg).dequantize()
        return F.linear(x_hat, w_hat, b32)

    y = F.linear(x32, w32, b32)
    baseline = error_metrics(y, quantized_output(x32, w32))
    metrics = []
    for alpha in points:
        s = smoothing_factors(absmax, w32, alpha).to(x32.device)
        metrics.append(error_metrics(y, quantized_output(*scale_columns(x32, w32, s))))
    return AlphaSweep(scheme=scheme, alphas=points, metrics=tuple(metrics), baseline=baseline)
