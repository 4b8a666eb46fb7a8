"""The backward pass of the research quantizers, for a teaching panel: the forward staircase
of ``q_k`` and the gradient the straight-through estimator passes, computed by torch
autograd (``quant_core.ste``) on the shown tensor.

Two paths, as DoReFa-Net trains them:

- activations: ``x_q = q_k(clip(x, 0, 1))``, gradient ``1[0 <= x <= 1]``;
- weights: ``u = tanh(w) / (2 max|tanh w|) + 1/2``, ``w_q = 2 q_k(u) - 1`` (times
  ``max|w|`` when rescaled), gradient ``(1 - tanh^2 w) / max|tanh w|`` (times ``max|w|``).

The curves are the same functions on evenly spaced inputs; the markers are the shown
tensor's own values (a strided sample of at most ``MAX_GRAD_VALUES`` of them) with the
gradients autograd gave them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from quant_core import QkVariant, dorefa_activation_ste, dorefa_weight_ste

from .formulas import latex_number

__all__ = [
    "CURVE_POINTS",
    "MAX_GRAD_VALUES",
    "SteGradients",
    "StePanel",
    "ste_gradients",
    "ste_panel",
]

CURVE_POINTS = 801
MAX_GRAD_VALUES = 1 << 20
_MARKERS = 2000
_TABLE_ROWS = 8


@dataclass(frozen=True, eq=False)
class SteGradients:
    """The shown tensor's values (``values``, float32, 1-D: all of them, or a strided sample
    of ``MAX_GRAD_VALUES`` when larger, ``sampled`` then True) through both paths:
    ``act_out`` / ``act_grad`` for the activation path, ``weight_out`` / ``weight_grad``
    for the weight path, every gradient that of the sum of the outputs (an upstream
    gradient of 1 per value), by autograd. ``tanh_max``: ``max|tanh w|`` over ``values``;
    ``scale``: ``max|w|`` when rescaled, else 1."""

    values: torch.Tensor
    sampled: bool
    act_out: torch.Tensor
    act_grad: torch.Tensor
    weight_out: torch.Tensor
    weight_grad: torch.Tensor
    tanh_max: float
    scale: float

    @property
    def n_clipped(self) -> int:
        """Values outside ``[0, 1]``: the activation path gives them no gradient."""
        return int((self.act_grad == 0).sum())


def _autograd(fn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = x.detach().clone().requires_grad_(True)
    out = fn(leaf)
    out.sum().backward()
    return out.detach(), leaf.grad.detach()


def ste_gradients(
    x: torch.Tensor,
    bits: int,
    variant: QkVariant = QkVariant.ORIGINAL,
    rescale: bool = False,
) -> SteGradients:
    """Both paths' outputs and gradients for the values of ``x`` (any shape, finite, float).
    Raises ``ValueError`` for NaN/Inf (the normalisation needs finite values)."""
    flat = x.detach().reshape(-1).to(torch.float32)
    if flat.numel() == 0:
        raise ValueError("the tensor is empty")
    if not bool(torch.isfinite(flat).all()):
        raise ValueError("the straight-through panel needs finite values")
    sampled = flat.numel() > MAX_GRAD_VALUES
    if sampled:
        step = math.ceil(flat.numel() / MAX_GRAD_VALUES)
        flat = flat[::step].contiguous()
    act_out, act_grad = _autograd(lambda t: dorefa_activation_ste(t, bits, variant), flat)
    w_out, w_grad = _autograd(lambda t: dorefa_weight_ste(t, bits, rescale, variant), flat)
    return SteGradients(
        values=flat,
        sampled=sampled,
        act_out=act_out,
        act_grad=act_grad,
        weight_out=w_out,
        weight_grad=w_grad,
        tanh_max=float(torch.tanh(flat).abs().max()),
        scale=float(flat.abs().max()) if rescale else 1.0,
    )


def _f32(t: torch.Tensor) -> np.ndarray:
    return t.numpy(force=True).astype(np.float32)


def _weight_curve(
    grads: SteGradients, bits: int, variant: QkVariant, rescale: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``w_q`` and its gradient on evenly spaced ``w`` over the shown tensor's range, with
    the normalisation's maxima of the shown tensor (its extreme value is kept among the
    points, so ``max|tanh w|`` and ``max|w|`` are the tensor's own)."""
    a = float(grads.values.abs().max())
    a = a if a > 0 else 1.0
    xs = torch.linspace(-a, a, CURVE_POINTS)
    xs[0], xs[-1] = -a, a
    out, grad = _autograd(lambda t: dorefa_weight_ste(t, bits, rescale, variant), xs)
    return xs, out, grad


def _markers(grads: SteGradients) -> torch.Tensor:
    n = grads.values.numel()
    if n <= _MARKERS:
        return torch.arange(n)
    return torch.arange(0, n, math.ceil(n / _MARKERS))


def ste_figure(grads: SteGradients, bits: int, variant: QkVariant, rescale: bool) -> go.Figure:
    """Two panels, one above the other: the activation path over ``[-0.5, 1.5]`` and the
    weight path over ``[-max|w|, max|w|]``; in each, the forward staircase, the STE's
    gradient (dashed) and the shown tensor's values with their autograd gradients."""
    fig = make_subplots(
        rows=2,
        cols=1,
        vertical_spacing=0.16,
        subplot_titles=(
            "Activations: x_q = q_k(clip(x, 0, 1)); STE gradient 1 inside [0, 1], 0 outside",
            "Weights: w_q = 2 q_k(tanh w / (2 max|tanh w|) + ½) − 1; gradient through tanh",
        ),
    )
    xs = torch.linspace(-0.5, 1.5, CURVE_POINTS)
    a_out, a_grad = _autograd(lambda t: dorefa_activation_ste(t, bits, variant), xs)
    w_xs, w_out, w_grad = _weight_curve(grads, bits, variant, rescale)
    pick = _markers(grads)
    vals = grads.values[pick]
    shown = [
        (1, xs, a_out, a_grad, grads.act_grad[pick], "x_q (forward)", "∂x_q/∂x (STE)"),
        (2, w_xs, w_out, w_grad, grads.weight_grad[pick], "w_q (forward)", "∂w_q/∂w (STE)"),
    ]
    for row, x, out, grad, marker_grad, out_name, grad_name in shown:
        legend = row == 1
        fig.add_trace(
            go.Scatter(
                x=_f32(x), y=_f32(out), mode="lines", line={"color": "#4c78a8", "width": 2},
                name="forward (staircase)", legendgroup="fwd", showlegend=legend,
                hovertemplate=f"{out_name}: %{{y:.4g}} at %{{x:.4g}}<extra></extra>",
            ),
            row=row, col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=_f32(x), y=_f32(grad), mode="lines",
                line={"color": "#e45756", "width": 2, "dash": "dash"},
                name="gradient passed back (STE)", legendgroup="grad", showlegend=legend,
                hovertemplate=f"{grad_name}: %{{y:.4g}} at %{{x:.4g}}<extra></extra>",
            ),
            row=row, col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=_f32(vals), y=_f32(marker_grad), mode="markers",
                marker={"color": "#222", "size": 5, "opacity": 0.6},
                name="this tensor's values (autograd)", legendgroup="vals", showlegend=legend,
                hovertemplate=f"value %{{x:.5g}}: {grad_name} = %{{y:.5g}}<extra></extra>",
            ),
            row=row, col=1,
        )
    fig.update_xaxes(title_text="x", row=1, col=1)
    fig.update_xaxes(title_text="w", row=2, col=1)
    fig.update_annotations(font_size=12)
    fig.update_layout(
        height=620,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": -0.12},
    )
    return fig


def ste_formulas(grads: SteGradients, bits: int, rescale: bool) -> tuple[str, ...]:
    """LaTeX lines (valid KaTeX): both paths' forward and backward, the weight path with
    this tensor's ``max|tanh w|`` (and ``max|w|``)."""
    t_max = latex_number(grads.tanh_max)
    scale = rf"\cdot {latex_number(grads.scale)}" if rescale else ""
    return (
        rf"x_q = q_k\left(\operatorname{{clip}}(x, 0, 1)\right),\quad k = {bits}",
        r"\frac{\partial L}{\partial x} = \frac{\partial L}{\partial x_q}\cdot"
        r"\underbrace{\frac{\partial q_k}{\partial u}}_{:=\,1\ (\mathrm{STE})}\cdot"
        r"\mathbb{1}\left[0 \le x \le 1\right]",
        r"u = \frac{\tanh w}{2\max|\tanh w|} + \frac{1}{2},\quad w_q = 2\,q_k(u) - 1"
        + (r"\ \ (\times \max|w|)" if rescale else ""),
        r"\frac{\partial w_q}{\partial w} = 2\cdot 1\cdot\frac{1 - \tanh^2 w}{2\max|\tanh w|}"
        rf" = \frac{{1 - \tanh^2 w}}{{{t_max}}}{scale}",
    )


def ste_notes(grads: SteGradients) -> tuple[str, ...]:
    """The straight-through idea, and how each path keeps its input in ``[0, 1]``, with
    this tensor's numbers."""
    n = grads.values.numel()
    share = grads.n_clipped / n
    sample = f" (a strided sample of {n:,} of them)" if grads.sampled else ""
    g = grads.weight_grad
    return (
        "The backward pass: q_k is a staircase, flat between its steps, so its true "
        "derivative is 0 almost everywhere and nothing would reach the weights. The "
        "straight-through estimator keeps the staircase forward and passes the incoming "
        "gradient straight through it backward (∂q_k/∂u := 1); what is around q_k then "
        "decides the gradient.",
        "How is the input kept in [0, 1]? Activations are clipped: DoReFa bounds them with "
        "clip(x, 0, 1), so a value outside gets no gradient at all (here "
        f"{grads.n_clipped:,} of {n:,} values{sample}, {share:.1%}, seen as activations). "
        "Weights are not clipped: tanh squashes them and dividing by max|tanh w| maps them "
        "exactly onto [−1, 1], then ½(·) + ½ onto [0, 1]; every weight keeps a gradient, "
        "(1 − tanh² w)/max|tanh w|, smaller for large |w| "
        f"(here from {float(g.min()):.4g} to {float(g.max()):.4g}).",
        "And back: an activation's x_q stays in [0, 1] (the next layer's weights absorb the "
        "scale); a weight's w_q = 2 q_k(u) − 1 lies in [−1, 1], times max|w| when rescaled "
        f"(here max|w| = {float(grads.values.abs().max()):.4g}). The markers are this "
        "tensor's values with the gradient autograd gave each.",
    )


def ste_table(grads: SteGradients) -> pd.DataFrame:
    """The first values: both paths' outputs, autograd's gradient and the formula's."""
    rows = []
    v = grads.values
    for i in range(min(_TABLE_ROWS, v.numel())):
        x = float(v[i])
        rows.append(
            {
                "value": x,
                "x_q = q_k(clip(x))": float(grads.act_out[i]),
                "∂/∂x (autograd)": float(grads.act_grad[i]),
                "1[0 ≤ x ≤ 1]": 1.0 if 0.0 <= x <= 1.0 else 0.0,
                "w_q": float(grads.weight_out[i]),
                "∂w_q/∂w (autograd)": float(grads.weight_grad[i]),
                "(1 − tanh² w)/max|tanh w|": (1 - math.tanh(x) ** 2)
                / (grads.tanh_max if grads.tanh_max > 0 else 1.0)
                * grads.scale,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True, eq=False)
class StePanel:
    """What the panel shows: ``formulas`` (LaTeX), ``notes`` (plain text), ``figure`` and
    ``table``; ``gradients`` the numbers behind them."""

    gradients: SteGradients
    formulas: tuple[str, ...]
    notes: tuple[str, ...]
    figure: go.Figure
    table: pd.DataFrame


def ste_panel(
    x: torch.Tensor, bits: int, variant: QkVariant = QkVariant.ORIGINAL, rescale: bool = False
) -> StePanel:
    """The straight-through panel of ``x`` at ``bits`` with ``variant`` (see the module)."""
    grads = ste_gradients(x, bits, variant, rescale)
    return StePanel(
        gradients=grads,
        formulas=ste_formulas(grads, bits, rescale),
        notes=ste_notes(grads),
        figure=ste_figure(grads, bits, variant, rescale),
        table=ste_table(grads),
    )
