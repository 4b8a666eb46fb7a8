"""The straight-through estimators: forward values are the quantizers' own, gradients from
torch autograd equal the ones derived by hand (identity inside the clipping range, zero
outside; the tanh normalisation's derivative for DoReFa weights)."""

from __future__ import annotations

import math

import pytest
import torch

from quant_core import (
    QkVariant,
    dorefa_activation_ste,
    dorefa_quantize_weights,
    dorefa_weight_ste,
    q_k,
    q_k_ste,
)


def _grad(fn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``fn(x)`` and the gradient of its sum with respect to ``x``, by autograd."""
    leaf = x.clone().requires_grad_(True)
    y = fn(leaf)
    y.sum().backward()
    return y.detach(), leaf.grad


def test_q_k_ste_forward_is_q_k_and_backward_the_identity():
    u = torch.tensor([0.0, 0.2, 0.5, 0.9, 1.0])
    for variant in QkVariant:
        y, g = _grad(lambda t, v=variant: q_k_ste(t, 2, v), u)
        assert torch.equal(y, q_k(u, 2, variant))
        assert g.tolist() == [1.0] * 5
    # an upstream gradient passes through unchanged, element by element
    leaf = u.clone().requires_grad_(True)
    q_k_ste(leaf, 3).backward(torch.tensor([0.5, -2.0, 3.0, 0.0, 1.25]))
    assert leaf.grad.tolist() == [0.5, -2.0, 3.0, 0.0, 1.25]


def test_activation_ste_by_hand():
    # k = 2, original: q_k(clip(x, 0, 1)) = round(3 clip(x)) / 3
    x = torch.tensor([-0.5, 0.0, 0.3, 0.5, 1.0, 1.5])
    y, g = _grad(lambda t: dorefa_activation_ste(t, 2), x)
    # clip: 0, 0, 0.3, 0.5, 1, 1; round(0, 0, 0.9, 1.5 -> 2 (even), 3, 3) / 3
    torch.testing.assert_close(y, torch.tensor([0.0, 0.0, 1 / 3, 2 / 3, 1.0, 1.0]))
    # identity inside [0, 1] (both ends included, as torch.clamp's), zero outside
    assert g.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("rescale", [False, True], ids=["plain", "rescaled"])
def test_weight_ste_by_hand(rescale):
    w = torch.tensor([0.0, 0.5, -1.0, 1.0, -0.25])
    y, g = _grad(lambda t: dorefa_weight_ste(t, 2, rescale=rescale), w)
    ref = dorefa_quantize_weights(w, 2, rescale=rescale)
    assert torch.equal(y, ref.dequantized)  # the forward pass is the quantizer's own
    # d w_q / d w = 2 * 1 (STE) * d/dw [tanh(w) / (2 max|tanh w|)] = sech^2(w) / tanh(1),
    # times max|w| = 1 when rescaled: the same numbers here
    t1 = math.tanh(1.0)
    by_hand = [(1 - math.tanh(v) ** 2) / t1 for v in (0.0, 0.5, -1.0, 1.0, -0.25)]
    torch.testing.assert_close(g, torch.tensor(by_hand), rtol=2e-7, atol=0)
    assert g[0] == pytest.approx(1.3130352855, rel=1e-7)  # 1 / tanh(1)


def test_weight_ste_rescale_multiplies_the_gradient_by_max_abs_w():
    w = torch.tensor([0.2, -2.0, 0.7])
    _, plain = _grad(lambda t: dorefa_weight_ste(t, 3), w)
    _, scaled = _grad(lambda t: dorefa_weight_ste(t, 3, rescale=True), w)
    torch.testing.assert_close(scaled, plain * 2.0, rtol=0, atol=0)


@pytest.mark.parametrize("variant", list(QkVariant), ids=lambda v: v.value)
def test_weight_ste_forward_matches_the_quantizer_bit_for_bit(variant, gen):
    w = torch.randn(7, 9, generator=gen)
    for rescale in (False, True):
        out = dorefa_weight_ste(w, 3, rescale=rescale, variant=variant)
        ref = dorefa_quantize_weights(w, 3, rescale=rescale, variant=variant).dequantized
        assert torch.equal(out, ref)


def test_ste_rejects_bad_input():
    with pytest.raises(TypeError, match=r"x has dtype torch\.int64"):
        dorefa_activation_ste(torch.ones(3, dtype=torch.int64), 2)
    with pytest.raises(ValueError, match=r"bits=0"):
        q_k_ste(torch.ones(3), 0)
    with pytest.raises(TypeError, match="rescale must be a bool"):
        dorefa_weight_ste(torch.ones(3), 2, rescale=1)
