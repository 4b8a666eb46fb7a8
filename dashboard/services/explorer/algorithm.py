"""The explorer under GPTQ, AWQ or HQQ: the algorithm's ``QuantizedTensor`` measured as
round-to-nearest is (``explore(..., quantized=)``), what differs from RTN, and for a layer
of the bundled model its output error on held-out sentences against RTN's.

What the maps show: GPTQ and HQQ keep the weight's own space, so the maps are ``W`` and
its codes. AWQ's codes encode ``W diag(s)`` (``s = mean|X_j|^α`` per input channel), so
its maps show that scaled weight, the one the codes and scales belong to; the layer
computes with ``Ŵ diag(s)⁻¹`` (``effective_weight``), whose error against ``W`` and whose
output error are reported beside the maps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from quant_core import (
    Algorithm,
    AWQResult,
    ErrorMetrics,
    HQQResult,
    QuantConfig,
    WeightQuantResult,
    error_metrics,
    layer_output_error,
    quantize,
    quantize_weight,
)

from ..state.algorithm import AlgorithmChoice
from .explore import Exploration, explore

__all__ = ["AlgorithmExploration", "OutputComparison", "explore_algorithm"]


@dataclass(frozen=True)
class OutputComparison:
    """The layer output ``Y = X Wᵀ`` against ``X Ŵᵀ`` on ``n_tokens`` tokens of
    ``n_sentences`` held-out sentences: ``mse`` for the algorithm (``label``), ``rtn_mse``
    for round-to-nearest under the same config. (A bias cancels in ``Y - Ŷ``.)"""

    label: str
    n_sentences: int
    n_tokens: int
    mse: float
    rtn_mse: float

    @property
    def ratio(self) -> float:
        """``mse / rtn_mse`` (below 1: the algorithm is better on this data)."""
        return self.mse / self.rtn_mse if self.rtn_mse > 0 else float("inf")

    def describe(self) -> str:
        """``"output MSE on 18 held-out sentences (412 tokens): GPTQ 1.35e-02 vs RTN
        1.71e-02 (0.79× RTN)"``."""
        return (
            f"output MSE on {self.n_sentences} held-out sentences ({self.n_tokens:,} tokens): "
            f"{self.label} {self.mse:.3g} vs RTN {self.rtn_mse:.3g} ({self.ratio:.2f}× RTN)"
        )


@dataclass(frozen=True, eq=False)
class AlgorithmExploration:
    """``exploration``: what the maps show (``W`` for GPTQ/HQQ, ``W diag(s)`` for AWQ),
    measured on ``result.quantized``. ``codes_changed``: stored codes that differ from those
    RTN stores for ``W`` under the same config. ``effective``: error of
    the weight the layer computes with against ``W``, and ``rtn_effective`` RTN's;
    ``output``: held-out output errors (``None`` without held-out inputs)."""

    choice: AlgorithmChoice
    result: WeightQuantResult
    exploration: Exploration
    codes_changed: int
    effective: ErrorMetrics
    rtn_effective: ErrorMetrics
    output: OutputComparison | None
    n_calibration_tokens: int = 0

    @property
    def shows_scaled_weight(self) -> bool:
        """AWQ: the maps show ``W diag(s)``, not ``W``."""
        return self.result.input_scale is not None

    def notes(self) -> tuple[str, ...]:
        """Plain sentences for the page: what was done, what the maps show, what changed."""
        res, exp = self.result, self.exploration
        n = exp.original.numel()
        label = self.choice.describe()
        head = f"{label} in {res.seconds:.2f} s"
        if self.choice.algorithm.needs_calibration:
            sentences = "your" if self.choice.custom_calibration else "the bundled"
            head += (
                f", calibrated on {sentences} {len(self.choice.calibration)} sentences "
                f"({self.n_calibration_tokens:,} tokens)"
            )
        changed = f"{self.codes_changed:,} of {n:,} codes ({self.codes_changed / n:.1%})"
        lines = [f"{head}: {changed} differ from round-to-nearest's."]
        d = res.details
        if isinstance(d, AWQResult):
            s = res.input_scale if res.input_scale is not None else torch.ones(1)
            lines.append(
                f"AWQ (α = {d.alpha:g}): the maps show **W·diag(s)**, the weight its codes and "
                "scales encode (round-to-nearest of W·diag(s); "
                f"s = mean|X_j|^α, from {float(s.min()):.3g} to "
                f"{float(s.max()):.3g}); the layer computes with Ŵ·diag(s)⁻¹, whose error "
                f"against W is MSE {self.effective.mse:.3g} (RTN {self.rtn_effective.mse:.3g})."
            )
        elif isinstance(d, HQQResult):
            lines.append(
                f"HQQ refit the {d.variable.value.replace('_', ' ')} in {d.iterations} "
                f"iterations: mean |error| {d.error_trace[d.iterations]:.4g} (RTN "
                f"{d.error_trace[0]:.4g}); weight MSE {self.effective.mse:.3g} vs RTN "
                f"{self.rtn_effective.mse:.3g}."
            )
        else:
            lines.append(
                f"GPTQ trades weight error for output error: weight MSE "
                f"{self.effective.mse:.3g} vs RTN {self.rtn_effective.mse:.3g}. In the worked "
                "table, 'rounded' is plain rounding under the same scale; where the code "
                "differs, GPTQ moved it to absorb the earlier columns' errors."
            )
        for warning in res.warnings:
            lines.append(f"{self.choice.algorithm.label}: {warning}")
        return tuple(lines)


def explore_algorithm(
    w: torch.Tensor,
    cfg: QuantConfig,
    choice: AlgorithmChoice,
    *,
    calibration: torch.Tensor | None = None,
    held_out: torch.Tensor | None = None,
    n_held_out_sentences: int = 0,
) -> AlgorithmExploration:
    """Quantize the weight ``w`` (``[out, in]``, finite) under ``cfg`` with ``choice`` and
    measure it.

    ``calibration``: the layer's inputs ``[tokens, in]`` on the calibration sentences
    (needed by GPTQ and AWQ); ``held_out``: its inputs on ``n_held_out_sentences`` other
    sentences, for the output errors (``None``: no output comparison). Raises
    ``ValueError`` when the algorithm cannot run (``Algorithm.unavailable_reason``), for
    RTN (the explorer's own path) and for a non-finite ``w``.
    """
    if not isinstance(choice, AlgorithmChoice):
        raise TypeError(f"choice must be an AlgorithmChoice, got {type(choice).__name__}")
    if choice.algorithm is Algorithm.RTN:
        raise ValueError("RTN needs no algorithm run: explore(w, cfg) is round-to-nearest")
    w32 = w.to(torch.float32)
    if not bool(torch.isfinite(w32).all()):
        raise ValueError(f"{choice.algorithm.label} needs a finite weight (no NaN/Inf)")
    x = calibration if choice.algorithm.needs_calibration else None
    res = quantize_weight(w32, cfg, choice.algorithm, calibration=x, options=choice.options)
    shown = w32 if res.input_scale is None else w32 * res.input_scale
    exp = explore(shown, cfg, quantized=res.quantized)
    exp = replace(exp, scheme_label=f"{cfg.describe()} · {choice.describe()}")
    rtn = quantize(w32, cfg)
    changed = int((rtn.codes != res.quantized.codes).sum())
    w_eff = res.effective_weight()
    rtn_w = rtn.dequantize()
    output = None
    if held_out is not None:
        output = OutputComparison(
            label=choice.algorithm.label,
            n_sentences=n_held_out_sentences,
            n_tokens=int(held_out.shape[0]),
            mse=layer_output_error(w32, w_eff, held_out).mse,
            rtn_mse=layer_output_error(w32, rtn_w, held_out).mse,
        )
    return AlgorithmExploration(
        choice=choice,
        result=res,
        exploration=exp,
        codes_changed=changed,
        effective=error_metrics(w32, w_eff),
        rtn_effective=error_metrics(w32, rtn_w),
        output=output,
        n_calibration_tokens=0 if x is None else int(x.shape[0]),
    )
