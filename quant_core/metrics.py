"""Error metrics between a tensor and its reconstruction."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .validation import check_float_tensor

__all__ = ["ErrorMetrics", "error_metrics"]


@dataclass(frozen=True)
class ErrorMetrics:
    """Errors of ``x_hat`` against ``x`` (all Python floats, computed in float64).

    ``mse = mean((x - x_hat)^2)``, ``rmse = sqrt(mse)``, ``mean_abs = mean|x - x_hat|``,
    ``max_abs = max|x - x_hat|``, ``sqnr_db = 10 log10(sum x^2 / sum (x - x_hat)^2)``
    (``inf`` when exact), ``cosine = <x, x_hat> / (|x| |x_hat|)`` over the flattened tensors
    (1 when both are zero, 0 when only one is).
    """

    mse: float
    rmse: float
    mean_abs: float
    max_abs: float
    sqnr_db: float
    cosine: float


def error_metrics(x: torch.Tensor, x_hat: torch.Tensor) -> ErrorMetrics:
    """Metrics of ``x_hat`` against ``x``; both finite float tensors of one shape."""
    check_float_tensor(x, "x")
    check_float_tensor(x_hat, "x_hat")
    if x.shape != x_hat.shape:
        raise ValueError(f"shapes differ: x {tuple(x.shape)} vs x_hat {tuple(x_hat.shape)}")
    a = x.detach().reshape(-1).to(torch.float64)
    b = x_hat.detach().reshape(-1).to(a.device, torch.float64)
    diff = a - b
    sq_err = float(diff.square().sum())
    mse = sq_err / a.numel()
    signal = float(a.square().sum())
    if sq_err == 0.0:
        sqnr = math.inf
    elif signal == 0.0:
        sqnr = -math.inf
    else:
        sqnr = 10.0 * math.log10(signal / sq_err)
    norm_a = math.sqrt(signal)
    norm_b = float(b.norm())
    if norm_a == 0.0 and norm_b == 0.0:
        cosine = 1.0
    elif norm_a == 0.0 or norm_b == 0.0:
        cosine = 0.0
    else:
        cosine = max(-1.0, min(1.0, float(a @ b) / (norm_a * norm_b)))
    return ErrorMetrics(
        mse=mse,
        rmse=math.sqrt(mse),
        mean_abs=float(diff.abs().mean()),
        max_abs=float(diff.abs().max()),
        sqnr_db=sqnr,
        cosine=cosine,
    )
