"""The straight-through estimator (STE) of the research quantizers, as autograd functions.

``q_k`` is a staircase: its derivative is 0 almost everywhere, so no gradient would reach
what comes before it. The STE (Bengio et al., 2013; DoReFa-Net, Zhou et al., 2016) keeps
the staircase in the forward pass and passes the incoming gradient through unchanged in
the backward pass, ``dL/du = dL/dq_k(u)``. What comes before ``q_k`` then decides the
gradient:

- activations, ``x_q = q_k(clip(x, 0, 1))``: the clip's derivative, 1 inside ``[0, 1]``
  (both ends included, as ``torch.clamp``'s) and 0 outside, so
  ``dL/dx = dL/dx_q * 1[0 <= x <= 1]``;
- weights (DoReFa), ``u = tanh(w) / (2 max|tanh w|) + 1/2``, ``w_q = 2 q_k(u) - 1``:
  ``dw_q/dw = 2 * 1 * (1 - tanh(w)^2) / (2 max|tanh w|) = (1 - tanh(w)^2) / max|tanh w|``,
  times ``max|w|`` when rescaled, with ``max|tanh w|`` and ``max|w|`` held constant (they
  scale the tensor; a gradient through the max would reach only the largest weight).

The forward values are bit for bit ``q_k`` and ``dorefa_quantize_weights``'s.
"""

from __future__ import annotations

from typing import Any

import torch

from .qk import QkVariant, check_bits, coerce_variant, q_k
from .validation import check_float_tensor

__all__ = ["dorefa_activation_ste", "dorefa_weight_ste", "q_k_ste"]


class _StraightThrough(torch.autograd.Function):
    """Forward ``q_k(u)``; backward the incoming gradient unchanged."""

    @staticmethod
    def forward(ctx: Any, u: torch.Tensor, bits: int, variant: QkVariant) -> torch.Tensor:
        return q_k(u, bits, variant).to(u.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return grad, None, None


def q_k_ste(
    u: torch.Tensor, bits: int, variant: QkVariant | str = QkVariant.ORIGINAL
) -> torch.Tensor:
    """``q_k(u)`` (float, ``u``'s shape and dtype) whose gradient with respect to ``u`` is
    the identity (the straight-through estimator). ``u`` is expected in ``[0, 1]``; values
    outside are clamped by ``q_k`` in the forward pass but still get the gradient."""
    check_float_tensor(u, "u")
    return _StraightThrough.apply(u, check_bits(bits), coerce_variant(variant))


def dorefa_activation_ste(
    x: torch.Tensor, bits: int, variant: QkVariant | str = QkVariant.ORIGINAL
) -> torch.Tensor:
    """DoReFa's activation quantizer with its STE: ``q_k(clip(x, 0, 1))``; the gradient is
    1 where ``0 <= x <= 1`` and 0 outside. Example, k = 2, ``x = [-0.5, 0.3, 1.5]``:
    forward ``[0, 1/3, 1]``, gradient of the sum ``[0, 1, 0]``."""
    check_float_tensor(x, "x")
    return q_k_ste(torch.clamp(x, 0.0, 1.0), bits, variant)


def dorefa_weight_ste(
    w: torch.Tensor,
    bits: int,
    rescale: bool = False,
    variant: QkVariant | str = QkVariant.ORIGINAL,
) -> torch.Tensor:
    """DoReFa's weight quantizer with its STE: ``w_q = 2 q_k(u) - 1`` with
    ``u = tanh(w) / (2 max|tanh w|) + 1/2`` (times ``max|w|`` when ``rescale``), the same
    values as ``dorefa_quantize_weights(w, bits, rescale, variant).dequantized``; its
    gradient is ``(1 - tanh(w)^2) / max|tanh w|`` (times ``max|w|``), the two maxima held
    constant. Example, ``w = [0, 1]``: gradient ``[1 / tanh 1, (1 - tanh^2 1) / tanh 1]``
    ``= [1.313, 0.551]``."""
    check_float_tensor(w, "w")
    if not isinstance(rescale, bool):
        raise TypeError(f"rescale must be a bool, got {rescale!r}")
    t = torch.tanh(w.to(torch.float32))
    t_max = t.detach().abs().max()
    denom = torch.where(t_max > 0, 2 * t_max, torch.ones_like(t_max))
    unit = q_k_ste(t / denom + 0.5, bits, variant)
    out = 2 * unit - 1
    if rescale:
        out = out * float(w.detach().to(torch.float32).abs().max())
    return out
