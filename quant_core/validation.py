"""Input checks at the public boundary: clear errors instead of failures deep in torch."""

from __future__ import annotations

import torch

__all__ = ["FLOAT_DTYPES", "check_float_tensor"]

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


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
    if not allow_nonfinite:
        finite = torch.isfinite(x)
        if not bool(finite.all()):
            n_nan = int(torch.isnan(x).sum())
            n_inf = int(torch.isinf(x).sum())
            raise ValueError(
                f"{name} holds {n_nan} NaN and {n_inf} Inf value(s) out of {x.numel()}; "
                "quantization needs finite values"
            )
    return x
