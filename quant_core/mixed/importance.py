"""Input importance of a linear layer: the diagonal of ``XᵀX``, as llama.cpp's importance
matrix (``llama-imatrix``) collects it, and the weight error it weighs.

For a layer ``y = W x`` (``W`` of shape ``[out, in]``) and inputs ``x`` (rows of ``X``,
``[tokens, in]``), the output error of a quantized ``Ŵ = W - D`` is, per token,
``|D x|² = Σ_i (Σ_j D_ij x_j)²``. Keeping only the diagonal of ``E[x xᵀ]`` (the cross terms
average out for errors that are independent across ``j``) gives

    E|D x|² ≈ Σ_i Σ_j D_ij² a_j,    a_j = E[x_j²] = diag(XᵀX)_j / tokens,

so ``a`` (``[in]``) says how much an error in input column ``j`` costs. Without inputs
``a = 1`` and the weighted error is the plain sum of squared errors. Example: ``X = [[1,
0], [3, 0]]`` gives ``a = [(1 + 9)/2, 0] = [5, 0]``: column 1 never sees a non-zero input,
so its errors cost nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import torch

from ..capture import ActivationCapture

__all__ = ["importance_from_capture", "input_importance", "weighted_error"]


def input_importance(x: torch.Tensor) -> torch.Tensor:
    """``a = diag(XᵀX) / tokens`` (float64 ``[in]``) of the inputs ``x`` ``[tokens, in]``.

    ``ValueError`` for a tensor that is not 2-D, has no rows, or holds NaN/Inf."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"x must be [tokens, in] with tokens, in >= 1, got {tuple(x.shape)}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must be a float tensor, got {x.dtype}")
    x64 = x.detach().to(torch.float64)
    a = (x64 * x64).sum(dim=0) / x.shape[0]
    if not torch.isfinite(a).all():
        raise ValueError("x holds NaN or Inf values (or squares that overflow)")
    return a


def importance_from_capture(capture: ActivationCapture) -> Mapping[str, torch.Tensor]:
    """``input_importance`` of every captured layer, keyed by the layer's weight name
    (``"<layer>.weight"``, as a checkpoint names it)."""
    if not isinstance(capture, ActivationCapture):
        raise TypeError(f"capture must be an ActivationCapture, got {type(capture).__name__}")
    done: dict[int, torch.Tensor] = {}
    out: dict[str, torch.Tensor] = {}
    for name, x in capture.inputs.items():
        if id(x) not in done:  # q, k and v share one input
            done[id(x)] = input_importance(x)
        out[f"{name}.weight"] = done[id(x)]
    return MappingProxyType(out)


def weighted_error(
    w: torch.Tensor, w_hat: torch.Tensor, importance: torch.Tensor | None = None
) -> float:
    """``Σ_ij (w - ŵ)_ij² a_j`` (module docstring) in float64; ``a = 1`` when
    ``importance`` is ``None``. ``w``, ``w_hat``: ``[out, in]``; ``importance``: ``[in]``."""
    if w.shape != w_hat.shape or w.dim() != 2:
        raise ValueError(
            f"w and w_hat must be 2-D of one shape, got {tuple(w.shape)} and {tuple(w_hat.shape)}"
        )
    d = w.detach().to(torch.float32) - w_hat.detach().to(torch.float32)
    d.square_()
    col = d.sum(dim=0, dtype=torch.float64)  # [in]: Σ_i d_ij²
    if importance is None:
        return float(col.sum())
    if importance.shape != (w.shape[1],):
        raise ValueError(
            f"importance must have shape [{w.shape[1]}] (the weight's inputs), got "
            f"{list(importance.shape)}"
        )
    return float(col @ importance.to(torch.float64))
