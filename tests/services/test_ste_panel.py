"""The straight-through panel: the gradients it shows are autograd's on the shown tensor,
equal to the ones derived by hand, and its plot and table show those numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dashboard.services.explorer import ste
from quant_core import QkVariant


def _hand_weight_grad(values, rescale_by: float = 1.0) -> list[float]:
    t_max = max(abs(math.tanh(v)) for v in values)
    return [(1 - math.tanh(v) ** 2) / t_max * rescale_by for v in values]


def test_gradients_by_hand():
    x = torch.tensor([[-0.5, 0.0, 0.3], [1.0, 1.5, -2.0]])
    g = ste.ste_gradients(x, 2)
    assert g.values.tolist() == pytest.approx([-0.5, 0.0, 0.3, 1.0, 1.5, -2.0])
    # activations: identity inside [0, 1] (ends included), zero outside
    assert g.act_grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert g.n_clipped == 3
    # round(3 clip(x)) / 3: 0, 0, round(0.9) = 1, 3, 3, 0
    torch.testing.assert_close(g.act_out, torch.tensor([0.0, 0.0, 1 / 3, 1.0, 1.0, 0.0]))
    # weights: (1 - tanh^2 w) / max|tanh w|, max|tanh w| = tanh(2)
    vals = [-0.5, 0.0, 0.3, 1.0, 1.5, -2.0]
    torch.testing.assert_close(g.weight_grad, torch.tensor(_hand_weight_grad(vals)))
    assert g.tanh_max == pytest.approx(math.tanh(2.0)) and g.scale == 1.0
    rescaled = ste.ste_gradients(x, 2, rescale=True)
    torch.testing.assert_close(rescaled.weight_grad, torch.tensor(_hand_weight_grad(vals, 2.0)))


def test_panel_shows_autograds_numbers():
    x = torch.randn(12, 20, generator=torch.Generator().manual_seed(0)) * 1.5
    panel = ste.ste_panel(x, 3, QkVariant.MODIFIED)
    g = panel.gradients
    # the table's autograd columns equal the formulas' columns
    t = panel.table
    np.testing.assert_allclose(t["∂/∂x (autograd)"], t["1[0 ≤ x ≤ 1]"], rtol=0, atol=0)
    np.testing.assert_allclose(
        t["∂w_q/∂w (autograd)"], t["(1 − tanh² w)/max|tanh w|"], rtol=2e-6, atol=0
    )
    # the markers are the tensor's values with their gradients
    markers = [tr for tr in panel.figure.data if tr.mode == "markers"]
    assert len(markers) == 2
    np.testing.assert_array_equal(markers[0].x, g.values.numpy())
    np.testing.assert_array_equal(markers[0].y, g.act_grad.numpy())
    np.testing.assert_array_equal(markers[1].y, g.weight_grad.numpy())
    assert len(panel.formulas) == 4 and r"\mathbb{1}" in panel.formulas[1]
    assert f"{g.n_clipped:,} of 240 values" in panel.notes[1]
    assert "tanh" in panel.notes[1] and "clip" in panel.notes[1]


def test_a_big_tensor_is_sampled_and_a_nonfinite_one_refused(monkeypatch):
    monkeypatch.setattr(ste, "MAX_GRAD_VALUES", 100)
    g = ste.ste_gradients(torch.arange(1000, dtype=torch.float32) / 1000, 2)
    assert g.sampled and g.values.numel() == 100 and float(g.values[1]) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="needs finite values"):
        ste.ste_gradients(torch.tensor([1.0, float("inf")]), 2)
