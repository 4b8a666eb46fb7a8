"""Error metrics between a tensor and its reconstruction."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import kernels
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


_CHUNK = 1 << 18


def _sums(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float, float, float, float, float]:
    """``sum d^2, sum |d|, max |d|, sum a^2, sum b^2, sum a*b`` with ``d = a - b``, in float64.

    Streams fixed-size chunks through preallocated float64 buffers: float64 accuracy at
    about the cost of two float32 passes, with no tensor-sized temporaries.
    """
    n = a.numel()
    size = min(_CHUNK, n)
    buf_a = torch.empty(size, dtype=torch.float64, device=a.device)
    buf_b = torch.empty_like(buf_a)
    buf_d = torch.empty_like(buf_a)
    acc = torch.zeros(5, dtype=torch.float64, device=a.device)
    max_abs = torch.zeros((), dtype=torch.float64, device=a.device)
    for start in range(0, n, size):
        m = min(size, n - start)
        ca = buf_a[:m].copy_(a[start : start + m])
        cb = buf_b[:m].copy_(b[start : start + m])
        d = torch.sub(ca, cb, out=buf_d[:m])
        acc[0] += torch.dot(d, d)
        acc[2] += torch.dot(ca, ca)
        acc[3] += torch.dot(cb, cb)
        acc[4] += torch.dot(ca, cb)
        d.abs_()
        acc[1] += d.sum()
        max_abs = torch.maximum(max_abs, d.max())
    sq, abs_sum, sa, sb, dot = acc.tolist()
    return sq, abs_sum, float(max_abs), sa, sb, dot


def _fused_sums(
    x: torch.Tensor, x_hat: torch.Tensor
) -> tuple[float, float, float, float, float, float] | None:
    """``_sums`` as one compiled pass (``kernels.error_sums``), or ``None``: run eagerly.

    The finiteness check comes from the same pass: every float32 value squares to at most
    ``(3.4e38)^2 < 1.2e77`` and float64 holds far more than ``2^53`` of those, so ``sum a^2``
    is finite exactly when every ``a`` is; a NaN or Inf anywhere sends the caller back to the
    checks, which raise."""
    a, b = x.detach().reshape(-1), x_hat.detach().reshape(-1).to(x.device)
    sums = kernels.error_sums(a, b)
    if sums is None:
        return None
    sq, abs_sum, max_abs, sa, sb, dot = sums.tolist()
    if not (math.isfinite(sa) and math.isfinite(sb)):
        return None
    return sq, abs_sum, max_abs, sa, sb, dot


def error_metrics(x: torch.Tensor, x_hat: torch.Tensor) -> ErrorMetrics:
    """Metrics of ``x_hat`` against ``x``; both finite float tensors of one shape.

    On CPU, where ``quant_core.kernels`` allows, the sums (and the finiteness check) are one
    compiled pass over both tensors; they may then differ from the eager path's in the last
    bits of float64 (another order of summation)."""
    check_float_tensor(x, "x", allow_nonfinite=True)
    check_float_tensor(x_hat, "x_hat", allow_nonfinite=True)
    if x.shape != x_hat.shape:
        check_float_tensor(x, "x")  # a non-finite value is named first, as on the eager path
        check_float_tensor(x_hat, "x_hat")
        raise ValueError(f"shapes differ: x {tuple(x.shape)} vs x_hat {tuple(x_hat.shape)}")
    sums = _fused_sums(x, x_hat)
    if sums is None:
        check_float_tensor(x, "x")
        check_float_tensor(x_hat, "x_hat")
        sums = _sums(x.detach().reshape(-1), x_hat.detach().reshape(-1).to(x.device))
    sq_err, abs_err, max_abs, signal, energy_hat, dot = sums
    n = x.numel()
    mse = sq_err / n
    if sq_err == 0.0:
        sqnr = math.inf
    elif signal == 0.0:
        sqnr = -math.inf
    else:
        sqnr = 10.0 * math.log10(signal / sq_err)
    norm_a = math.sqrt(signal)
    norm_b = math.sqrt(energy_hat)
    if norm_a == 0.0 and norm_b == 0.0:
        cosine = 1.0
    elif norm_a == 0.0 or norm_b == 0.0:
        cosine = 0.0
    else:
        cosine = max(-1.0, min(1.0, dot / (norm_a * norm_b)))
    return ErrorMetrics(
        mse=mse,
        rmse=math.sqrt(mse),
        mean_abs=abs_err / n,
        max_abs=max_abs,
        sqnr_db=sqnr,
        cosine=cosine,
    )
