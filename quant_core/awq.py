"""AWQ (Lin et al., 2023): scale the weight's input channels by how active their inputs
are before rounding, and fold the inverse scale into the input.

For a linear layer ``Y = X Wᵀ`` with calibration inputs ``X [tokens, in]``:

1. ``a_j = mean_t |X_tj|``, the mean magnitude of input channel ``j``;
2. for each ``α`` of a grid (``0, 1/n, ..., (n-1)/n``, ``n = 20``, as the reference):
   ``s = max(a^α, 1e-4)``, normalised as the reference does, ``s ← s / sqrt(max(s) min(s))``;
   the layer runs as ``(X / s) Q(W diag(s))ᵀ``, so its effective weight is
   ``W_eff = Q(W diag(s)) diag(s)⁻¹`` and its output error
   ``E(α) = ||X Wᵀ - X W_effᵀ||² / (tokens · out)`` (a mean over the output's entries);
3. keep the ``α`` of least ``E``. ``α = 0`` gives ``s = 1``, plain round-to-nearest, so
   AWQ's error on its calibration inputs is never above RTN's.

``Q`` is ``quantize`` under the given config (any format, granularity and zero-point
convention: AWQ only changes what is rounded). Scaling a salient channel up by ``s_j``
shrinks its relative rounding error by ``s_j``, and the channels are judged by their
inputs, which weight-only methods never see.

``E`` is computed without forming ``X W_effᵀ``: with ``X = Q_X R`` (a QR factorisation),
``||X Dᵀ|| = ||R Dᵀ||`` for ``D = W - W_eff``, and ``R`` has ``min(tokens, in)`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from .algo_checks import check_calibration, check_config, check_weight
from .config import QuantConfig
from .quantize import QuantizedTensor, quantize

__all__ = ["AWQOptions", "AWQResult", "awq_quantize", "awq_scales"]

# The reference's floor on a^alpha: an input channel that is always 0 keeps a usable scale.
_MIN_SCALE = 1e-4


@dataclass(frozen=True)
class AWQOptions:
    """``n_grid``: the number of ``α`` values searched, ``α = i / n_grid`` for
    ``i = 0 .. n_grid - 1`` (the reference's grid: 0, 0.05, ..., 0.95 for 20)."""

    n_grid: int = 20

    def __post_init__(self) -> None:
        if isinstance(self.n_grid, bool) or not isinstance(self.n_grid, int):
            raise TypeError(f"n_grid must be an int, got {self.n_grid!r}")
        if self.n_grid < 1:
            raise ValueError(f"n_grid={self.n_grid} must be >= 1")

    @property
    def alphas(self) -> tuple[float, ...]:
        return tuple(i / self.n_grid for i in range(self.n_grid))


@dataclass(frozen=True, eq=False)
class AWQResult:
    """What ``awq_quantize`` returns.

    ``quantized``: ``Q(W diag(s))``, the scaled weight, in ``quantize``'s layout.
    ``input_scale``: ``s`` (float32, ``[in]``); the layer runs as ``(x / s) Ŵᵀ + b``.
    ``alpha``: the chosen exponent; ``alphas``/``errors``: the searched grid and the mean
    squared output error on the calibration inputs at each (``errors[0]``, at ``α = 0``,
    is round-to-nearest's). ``activation_mean``: ``mean|X_j|`` per input channel.
    """

    quantized: QuantizedTensor
    input_scale: torch.Tensor
    alpha: float
    alphas: tuple[float, ...]
    errors: tuple[float, ...]
    activation_mean: torch.Tensor
    warnings: tuple[str, ...] = ()

    @property
    def error(self) -> float:
        """The chosen scales' mean squared output error on the calibration inputs."""
        return self.errors[self.alphas.index(self.alpha)]

    def effective_weight(self) -> torch.Tensor:
        """``Ŵ diag(s)⁻¹`` (float32 ``[out, in]``): the weight in the original input space,
        so ``x @ effective_weight().T`` is what the quantized layer computes."""
        return self.quantized.dequantize() / self.input_scale


def awq_scales(activation_mean: torch.Tensor, alpha: float) -> torch.Tensor:
    """``s = max(a^α, 1e-4) / sqrt(max(s) min(s))`` (float32, ``a``'s shape), the
    reference's per-input-channel scales for mean magnitudes ``a`` (``mean|X_j|``)."""
    s = activation_mean.to(torch.float32).pow(alpha).clamp(min=_MIN_SCALE)
    return s / (s.max() * s.min()).sqrt()


def _output_factor(x: torch.Tensor) -> torch.Tensor:
    """``Rᵀ`` (float32 ``[in, r]``, ``r = min(tokens, in)``) with ``||X v|| = ||R v||``."""
    r = torch.linalg.qr(x.to(torch.float64), mode="r").R
    return r.T.to(torch.float32).contiguous()


def awq_quantize(
    w: torch.Tensor,
    calibration: torch.Tensor,
    cfg: QuantConfig,
    options: AWQOptions | None = None,
) -> AWQResult:
    """AWQ-quantize a linear weight ``w [out, in]`` with calibration inputs
    ``calibration [tokens, in]`` (the layer's inputs) under ``cfg`` (see the module
    docstring). Runs on ``w``'s device. Raises ``ValueError`` for mismatched shapes and
    for stochastic rounding (the search compares deterministic errors)."""
    w = check_weight(w)
    cfg = check_config(cfg, "AWQ", integer_only=False)
    options = AWQOptions() if options is None else options
    if not isinstance(options, AWQOptions):
        raise TypeError(f"options must be AWQOptions, got {type(options).__name__}")
    x = check_calibration(calibration, w.shape[1]).to(device=w.device, dtype=torch.float32)
    w32 = w.detach().to(torch.float32)
    act_mean = x.abs().mean(dim=0)
    factor = _output_factor(x)
    norm = float(x.shape[0] * w.shape[0])

    errors = []
    best: tuple[float, float, torch.Tensor, QuantizedTensor] | None = None
    for alpha in options.alphas:
        s = awq_scales(act_mean, alpha)
        qt = quantize(w32 * s, cfg)
        diff = w32 - qt.dequantize() / s
        err = float((diff @ factor).to(torch.float64).square().sum()) / norm
        errors.append(err)
        if best is None or err < best[0]:
            best = (err, alpha, s, qt)
    if best is None:  # n_grid >= 1, so the loop ran
        raise RuntimeError("AWQ searched no alpha")
    _, alpha, s, qt = best
    return AWQResult(
        quantized=replace(qt, input_dtype=w.dtype),
        input_scale=s,
        alpha=alpha,
        alphas=options.alphas,
        errors=tuple(errors),
        activation_mean=act_mean,
    )
