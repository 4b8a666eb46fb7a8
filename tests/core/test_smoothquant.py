"""SmoothQuant: factors by hand, invariance of X W^T in float arithmetic, the alpha sweep.

Invariance bound (``u = 2^-24``, ``K`` inputs). ``Y = fl(X W^T + b)`` and the smoothed
``Y_s = fl((X / s)(W * s)^T + b)``, each an inner product of ``K`` rounded products plus a
bias, so whatever the summation order (BLAS blocking, FMA), each lies within
``gamma_{K+1} (|X| |W|^T + |b|)`` of its exact value, ``gamma_n = n u / (1 - n u)``. The
smoothed operands are ``fl(x / s) = (x / s)(1 + d1)`` and ``fl(w s) = w s (1 + d2)``,
``|d| <= u``, so their exact products differ from ``x w`` by at most ``(2u + u^2)|x w|``
and ``|X_s| |W_s|^T <= (1 + u)^2 |X| |W|^T``. Together, entry by entry:

    |Y_s - Y| <= (2 gamma_{K+1} (1 + u)^2 + (1 + u)^2 - 1) (|X| |W|^T + |b|)

(no underflow: the test's values have magnitudes in [1e-3, 1e3] or are 0).
"""

from __future__ import annotations

import math

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from quant_core import PerChannel, QuantConfig, error_metrics, quantize
from quant_core.activations import feature_absmax
from quant_core.linear_eval import LayerScheme, SchemePreset, evaluate_linear
from quant_core.smoothquant import (
    DEFAULT_ALPHAS,
    AlphaSweep,
    alpha_sweep,
    check_alpha,
    smooth,
    smoothing_factors,
)

U = 2.0**-24


def _gamma(n: int) -> float:
    return n * U / (1 - n * U)


def _invariance_bound(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    k = x.shape[1]
    c = 2 * _gamma(k + 1) * (1 + U) ** 2 + (1 + U) ** 2 - 1
    return c * (x.double().abs() @ w.double().abs().T + b.double().abs())


# Values in [-1e3, 1e3] with those below 1e-3 in magnitude set to 0: no underflow.
_values = st.floats(-1e3, 1e3, width=32).map(lambda v: v if abs(v) >= 1e-3 else 0.0)


@st.composite
def _layers(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tokens, k, out = draw(st.integers(1, 9)), draw(st.integers(1, 40)), draw(st.integers(1, 7))
    x = draw(hnp.arrays(np.float32, (tokens, k), elements=_values))
    w = draw(hnp.arrays(np.float32, (out, k), elements=_values))
    b = draw(hnp.arrays(np.float32, (out,), elements=_values))
    return torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)


@settings(max_examples=200, deadline=None)
@given(layer=_layers(), alpha=st.floats(0.0, 1.0))
def test_smoothing_leaves_the_float_output_unchanged(layer, alpha):
    x, w, b = layer
    s = smoothing_factors(feature_absmax(x), w, alpha)
    assert bool((s > 0).all()) and bool(torch.isfinite(s).all())
    ev = evaluate_linear(x, w, b, LayerScheme(), smoothing=s)
    diff = (ev.y_hat.double() - ev.y.double()).abs()
    assert bool((diff <= _invariance_bound(x, w, b)).all())
    xs, ws = smooth(x, w, s)
    assert torch.equal(ev.y_hat, F.linear(xs, ws, b))


def test_the_bound_is_tight_enough_to_fail():
    """A factor applied to X but not to W breaks the product far beyond the bound."""
    gen = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(8, 32, generator=gen), torch.randn(4, 32, generator=gen), torch.zeros(4)
    s = smoothing_factors(feature_absmax(x), w, 0.5)
    wrong = F.linear(x / s, w, b)
    assert bool(((wrong - F.linear(x, w, b)).abs() > _invariance_bound(x, w, b)).any())


def test_factors_by_hand():
    act = torch.tensor([4.0, 9.0, 0.0, 2.0])
    w = torch.tensor([[1.0, -0.25, 3.0, 0.0], [-2.0, 0.5, 1.0, 0.0]])
    # column absmax of W: [2, 0.5, 3, 0]; s = act^0.5 / w^0.5 where both are nonzero,
    # computed in float64 and rounded once to float32
    s = smoothing_factors(act, w, 0.5)
    want = torch.tensor([math.sqrt(4 / 2), math.sqrt(9 / 0.5), 1.0, 1.0], dtype=torch.float32)
    assert torch.equal(s, want)
    assert smoothing_factors(act, w, 1.0).tolist() == [4.0, 9.0, 1.0, 1.0]
    assert smoothing_factors(act, w, 0.0).tolist() == [0.5, 2.0, 1.0, 1.0]
    assert smoothing_factors(act, w, 0.5).dtype == torch.float32


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_alpha_balances_the_column_maxima(alpha, gen):
    """alpha=1 flattens X (max|X_j/s_j| = 1), alpha=0 flattens W (max|W_j s_j| = 1), and
    alpha=0.5 makes both sqrt(max|X_j| max|W_j|); within the roundings of s, X/s, W*s."""
    x = torch.randn(16, 12, generator=gen) * torch.logspace(-1, 2, 12)
    w = torch.randn(5, 12, generator=gen)
    s = smoothing_factors(feature_absmax(x), w, alpha)
    xs, ws = smooth(x, w, s)
    ax, aw = feature_absmax(x).double(), w.abs().amax(0).double()
    got_x, got_w = xs.abs().amax(0).double(), ws.abs().amax(0).double()
    want_x = ax ** (1 - alpha) * aw ** (1 - alpha)
    want_w = ax**alpha * aw**alpha
    rel = 4 * U  # s rounded once, then one rounding in X/s or W*s, plus the float64 pow
    assert torch.allclose(got_x, want_x, rtol=rel, atol=0)
    assert torch.allclose(got_w, want_w, rtol=rel, atol=0)


def test_smoothquant_lowers_per_tensor_w8a8_error_with_an_outlier(gen):
    x = torch.randn(64, 128, generator=gen)
    x[:, [5, 77]] *= 40.0
    w = torch.randn(64, 128, generator=gen) / 11
    b = torch.zeros(64)
    sch = LayerScheme(SchemePreset.W8A8.scheme.weight, QuantConfig(bits=8))
    plain = evaluate_linear(x, w, b, sch)
    smoothed = evaluate_linear(x, w, b, sch, smoothing=smoothing_factors(feature_absmax(x), w, 0.5))
    assert smoothed.metrics.mse < plain.metrics.mse


def test_sweep_points_are_evaluate_linear_with_those_factors(gen):
    x = torch.randn(32, 64, generator=gen)
    x[:, 3] *= 25.0
    w, b = torch.randn(48, 64, generator=gen) / 8, torch.randn(48, generator=gen)
    sch = LayerScheme(SchemePreset.W8A8.scheme.weight, QuantConfig(bits=8))
    sweep = alpha_sweep(x, w, b, sch)
    assert isinstance(sweep, AlphaSweep) and sweep.alphas == DEFAULT_ALPHAS
    assert sweep.baseline == evaluate_linear(x, w, b, sch).metrics
    for alpha, m in zip(sweep.alphas, sweep.metrics, strict=True):
        s = smoothing_factors(feature_absmax(x), w, alpha)
        assert m == evaluate_linear(x, w, b, sch, smoothing=s).metrics
    assert sweep.mse() == tuple(m.mse for m in sweep.metrics)
    assert sweep.sqnr_db() == tuple(m.sqnr_db for m in sweep.metrics)
    assert sweep.best_alpha == sweep.alphas[int(np.argmin(sweep.mse()))]
    calib = alpha_sweep(x, w, b, SchemePreset.W8A8, [0.5], act_absmax=feature_absmax(x[:8]))
    xs, ws = smooth(x, w, smoothing_factors(feature_absmax(x[:8]), w, 0.5))
    cfg = SchemePreset.W8A8.scheme
    y_hat = F.linear(
        quantize(xs, cfg.activation).dequantize(), quantize(ws, cfg.weight).dequantize(), b
    )
    assert calib.metrics == (error_metrics(F.linear(x, w, b), y_hat),)


@pytest.mark.parametrize(
    ("alpha", "error", "match"),
    [
        (-0.1, ValueError, r"alpha=-0\.1 must be in \[0, 1\]"),
        (1.5, ValueError, r"alpha=1\.5 must be in \[0, 1\]"),
        (float("nan"), ValueError, r"alpha=nan must be in \[0, 1\]"),
        (True, TypeError, "alpha must be a number in"),
        ("0.5", TypeError, "got '0.5'"),
    ],
)
def test_bad_alpha_names_the_value(alpha, error, match):
    with pytest.raises(error, match=match):
        check_alpha(alpha)
    with pytest.raises(error, match=match):
        smoothing_factors(torch.ones(4), torch.ones(3, 4), alpha)
    with pytest.raises(error, match=match):
        alpha_sweep(torch.ones(2, 4), torch.ones(3, 4), None, LayerScheme(), [0.5, alpha])


def test_bad_factor_inputs_name_the_value():
    w = torch.ones(3, 4)
    with pytest.raises(ValueError, match=r"act_absmax has shape \(5,\); expected \[4\]"):
        smoothing_factors(torch.ones(5), w)
    with pytest.raises(ValueError, match="negative values"):
        smoothing_factors(torch.tensor([1.0, -1.0, 1.0, 1.0]), w)
    with pytest.raises(ValueError, match=r"weight must be 2-D \[out, in\]"):
        smoothing_factors(torch.ones(4), torch.ones(4))
    with pytest.raises(ValueError, match=r"factors has shape \(3,\)"):
        smooth(torch.ones(2, 4), w, torch.ones(3))
    with pytest.raises(ValueError, match="x has 5 features"):
        smooth(torch.ones(2, 5), w, torch.ones(4))
    with pytest.raises(ValueError, match="non-empty sequence"):
        alpha_sweep(torch.ones(2, 4), w, None, LayerScheme(), [])
    with pytest.raises(TypeError, match="scheme must be a LayerScheme"):
        alpha_sweep(torch.ones(2, 4), w, None, QuantConfig())  # type: ignore[arg-type]


def test_per_feature_granularity_gains_nothing_from_smoothing(gen):
    """Per-feature activation scales absorb a column scaling: the code of ``x / s`` is
    ``round((x / s) / (max|x_j| / s / 127))``, in which ``s`` cancels; with ``s`` a power
    of two every step is exact, so the codes are those of ``X`` itself."""
    x = torch.randn(32, 16, generator=gen)
    w = torch.randn(8, 16, generator=gen)
    sch = LayerScheme(activation=QuantConfig(bits=8, granularity=PerChannel(axis=1)))
    s = torch.full((16,), 4.0)  # a power of two: x / s and the scale are exact
    plain = evaluate_linear(x, w, None, sch)
    smoothed = evaluate_linear(x, w, None, sch, smoothing=s)
    assert torch.equal(plain.activation_q.codes, smoothed.activation_q.codes)
