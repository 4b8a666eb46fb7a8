"""Input checks at the public boundary: clear errors instead of failures deep in torch."""

from __future__ import annotations

from typing import NoReturn

import torch

from .chunks import block_extremes

__all__ = [
    "FLOAT_DTYPES",
    "check_float_tensor",
    "nonfinite_text",
    "raise_nonfinite",
    "to_float32",
]

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _all_finite(x: torch.Tensor) -> bool:
    # Two reductions instead of an elementwise isfinite mask: min and max propagate NaN,
    # and an infinity is an extreme.
    lo, hi = block_extremes(x.detach().reshape(1, -1))
    return bool(torch.isfinite(lo).all() & torch.isfinite(hi).all())


def nonfinite_text(x: torch.Tensor, name: str = "x") -> str:
    """``"{name} holds 2 NaN and 1 Inf values of 4,096"``: the counts of ``x``'s
    non-finite values, for messages that say what cannot be done with them."""
    n_nan = int(torch.isnan(x).sum())
    n_inf = int(torch.isinf(x).sum())
    return f"{name} holds {n_nan:,} NaN and {n_inf:,} Inf values of {x.numel():,}"


def raise_nonfinite(x: torch.Tensor, name: str = "x") -> NoReturn:
    """Raise the ``ValueError`` for an ``x`` that is not finite, or (float64) not finite in
    float32: the message says how many values are NaN, Inf or beyond float32's range."""
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{nonfinite_text(x, name)}; quantization needs finite values")
    n_over = int(torch.isinf(x.detach().to(torch.float32)).sum())
    limit = torch.finfo(torch.float32).max
    raise ValueError(
        f"{name} holds {n_over:,} {x.dtype} value{'' if n_over == 1 else 's'} beyond the "
        f"float32 range (|x| > {limit:.4g}) of {x.numel():,}; quantization computes in float32"
    )


def check_float_tensor(x: object, name: str = "x", allow_nonfinite: bool = False) -> torch.Tensor:
    """Return ``x`` if it is a non-empty, at-least-1-D, finite float tensor; raise otherwise.

    Raises ``TypeError`` for a non-tensor or an integer/bool/complex dtype and ``ValueError``
    for a 0-d or empty tensor or one holding NaN/Inf (the message says how many).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} has dtype {x.dtype}; expected a float tensor "
            "(float32, float16, bfloat16 or float64). Convert integer data with .float()."
        )
    if x.dim() == 0:
        raise ValueError(f"{name} is 0-d (a scalar); pass a tensor with at least one dimension")
    if x.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)}); nothing to quantize")
    if not allow_nonfinite and not _all_finite(x):
        raise_nonfinite(x, name)
    return x


def to_float32(x: torch.Tensor, name: str = "x") -> torch.Tensor:
    """``x`` (a checked float tensor) detached and in float32, the dtype computation runs in.

    Raises ``ValueError`` when a float64 value lies beyond float32's range (it would become
    Inf); float16/bfloat16 always fit.
    """
    x32 = x.detach().to(torch.float32)
    if x.dtype == torch.float64 and not _all_finite(x32):
        raise_nonfinite(x, name)
    return x32
