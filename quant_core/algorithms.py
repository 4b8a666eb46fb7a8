"""One front door to the weight-quantization algorithms: RTN, GPTQ, AWQ and HQQ.

    res = quantize_weight(w, cfg, Algorithm.GPTQ, calibration=x)  # x: [tokens, in]
    res.quantized            # a QuantizedTensor, as quantize() returns
    res.effective_weight()   # the weight the quantized layer computes with, [out, in]
    layer_output_error(w, res.effective_weight(), x_held_out)

Every algorithm returns the same ``QuantizedTensor`` as ``quantize`` (codes, scales, zero
points in its layout), so metrics, storage accounting, packing and exports work unchanged.
AWQ also returns per-input-channel scales ``s``: its codes encode ``W diag(s)``, the layer
runs as ``(x / s) Ŵᵀ + b``, and ``effective_weight()`` is ``Ŵ diag(s)⁻¹`` (in a deployed
model ``1/s`` is folded into the op before, so it costs no storage).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from .awq import AWQOptions, AWQResult, awq_quantize
from .config import Format, QuantConfig, Recipe, Rounding, coerce_enum
from .gptq import GPTQOptions, GPTQResult, gptq_quantize
from .hqq import HQQOptions, HQQResult, hqq_quantize
from .metrics import ErrorMetrics, error_metrics
from .quantize import QuantizedTensor, quantize
from .validation import check_float_tensor

__all__ = [
    "Algorithm",
    "AlgorithmOptions",
    "WeightQuantResult",
    "layer_output_error",
    "quantize_weight",
    "quantize_weights",
]

AlgorithmOptions = GPTQOptions | AWQOptions | HQQOptions


class Algorithm(enum.Enum):
    """How a weight's codes are chosen.

    RTN: round to nearest on the config's grid (``quantize``); data-free.
    GPTQ: columns rounded one by one, each error pushed onto the columns not yet rounded
    through the inverse Hessian ``(2 XᵀX)⁻¹`` of the layer's calibration inputs ``X``.
    AWQ: input channels scaled by ``mean|X_j|^α`` before rounding (``α`` searched on the
    calibration inputs' output error), the inverse folded into the input.
    HQQ: data-free; a half-quadratic solver refits each block's zero point (or scale) to
    minimise an ``l_p`` (``p < 1``) weight error.
    """

    RTN = "rtn"
    GPTQ = "gptq"
    AWQ = "awq"
    HQQ = "hqq"

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def needs_calibration(self) -> bool:
        """Whether the algorithm needs the layer's inputs (GPTQ, AWQ)."""
        return self in (Algorithm.GPTQ, Algorithm.AWQ)

    @property
    def options_type(self) -> type | None:
        """The options dataclass the algorithm takes (``None`` for RTN)."""
        return _OPTIONS[self]

    def unavailable_reason(self, cfg: QuantConfig, *, has_calibration: bool) -> str | None:
        """Why this algorithm cannot run for ``cfg`` (and the data at hand), in a sentence
        a UI can show; ``None`` when it can."""
        if self.needs_calibration and not has_calibration:
            return (
                f"{self.label} chooses codes from a linear layer's inputs (calibration "
                "data), and this tensor has none (no model runs it on sentences): use RTN or "
                "HQQ, or pick a linear layer's weight"
            )
        if self is Algorithm.RTN:
            return None
        if cfg.rounding is not Rounding.NEAREST:
            return f"{self.label} needs nearest rounding (stochastic rounding is RTN only)"
        if self in (Algorithm.GPTQ, Algorithm.HQQ) and cfg.format is not Format.INT:
            return (
                f"{self.label} works on an integer grid; {cfg.format.value} is not the int "
                "format"
            )
        if self in (Algorithm.GPTQ, Algorithm.HQQ) and (
            cfg.two_level or cfg.recipe is Recipe.LLAMA_CPP
        ):
            # the reason that holds for this format (Q8_0 keeps one fp16 scale per block:
            # "stores its scales in two levels or ..." left the reader to guess)
            why = (
                f"{cfg.name} stores its block scales in two levels"
                if cfg.two_level
                else f"{cfg.name} follows llama.cpp's own quantizer"
            )
            return (
                f"{self.label} fits one float scale per block by the lab's rounding; {why} "
                "(use RTN, its owner's quantizer, or AWQ)"
            )
        return None


_LABELS = {
    Algorithm.RTN: "RTN",
    Algorithm.GPTQ: "GPTQ",
    Algorithm.AWQ: "AWQ",
    Algorithm.HQQ: "HQQ",
}
_OPTIONS: dict[Algorithm, type | None] = {
    Algorithm.RTN: None,
    Algorithm.GPTQ: GPTQOptions,
    Algorithm.AWQ: AWQOptions,
    Algorithm.HQQ: HQQOptions,
}


def _coerce_algorithm(algorithm: object) -> Algorithm:
    return coerce_enum(algorithm, Algorithm, "algorithm")


@dataclass(frozen=True, eq=False)
class WeightQuantResult:
    """One weight quantized by one algorithm.

    ``quantized``: codes, scales, zero points (``quantize``'s layout and dtypes).
    ``input_scale``: AWQ's per-input-channel ``s`` (float32 ``[in]``), else ``None``.
    ``details``: the algorithm's own result (``GPTQResult``: dampening, dead columns,
    permutation, proxy loss; ``AWQResult``: ``α`` and the error curve; ``HQQResult``:
    iterations and the error trace), ``None`` for RTN.
    ``warnings``: what the algorithm had to work around (also raised as
    ``AlgorithmWarning``). ``seconds``: wall time of the call.
    """

    algorithm: Algorithm
    quantized: QuantizedTensor
    input_scale: torch.Tensor | None = None
    details: GPTQResult | AWQResult | HQQResult | None = None
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0

    def effective_weight(self) -> torch.Tensor:
        """The weight the quantized layer computes with, in the original input space
        (float32, the weight's shape): ``dequantize()``, divided column-wise by AWQ's ``s``."""
        w_hat = self.quantized.dequantize()
        return w_hat if self.input_scale is None else w_hat / self.input_scale

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """The quantized layer on ``x [..., in]``: ``(x / s) Ŵᵀ + b`` (``s = 1`` but for AWQ),
        in float32."""
        x = x.to(torch.float32)
        if self.input_scale is not None:
            x = x / self.input_scale.to(x.device)
        b = None if bias is None else bias.to(torch.float32)
        return F.linear(x, self.quantized.dequantize().to(x.device), b)

    def summary(self) -> dict[str, float | int | str]:
        """The diagnostics a UI shows, as a flat label -> value mapping."""
        out: dict[str, float | int | str] = {"algorithm": self.algorithm.label}
        d = self.details
        if isinstance(d, GPTQResult):
            out |= {
                "damp": d.damp,
                "calibration tokens": d.n_tokens,
                "dead columns": d.dead_columns,
                "act order": "yes" if d.permutation is not None else "no",
                "proxy loss": d.proxy_loss,
            }
        elif isinstance(d, AWQResult):
            out |= {"alpha": d.alpha, "output MSE": d.error, "RTN output MSE": d.errors[0]}
        elif isinstance(d, HQQResult):
            out |= {
                "solved for": d.variable.value.replace("_", " "),
                "iterations": d.iterations,
                "mean |error|": d.error_trace[d.iterations],
                "RTN mean |error|": d.error_trace[0],
            }
        out["seconds"] = self.seconds
        return out


def _check_options(algorithm: Algorithm, options: object) -> None:
    expected = algorithm.options_type
    if options is None:
        return
    if expected is None:
        raise TypeError(f"RTN takes no options, got {type(options).__name__}")
    if not isinstance(options, expected):
        raise TypeError(
            f"{algorithm.label} takes {expected.__name__}, got {type(options).__name__}"
        )


def quantize_weight(
    w: torch.Tensor,
    cfg: QuantConfig,
    algorithm: Algorithm | str = Algorithm.RTN,
    *,
    calibration: torch.Tensor | None = None,
    options: AlgorithmOptions | None = None,
    generator: torch.Generator | None = None,
) -> WeightQuantResult:
    """Quantize weight ``w`` under ``cfg`` with ``algorithm``.

    ``calibration``: the layer's inputs ``[tokens, in_features]`` (padding removed), needed
    by GPTQ and AWQ (``ValueError`` without it, with the reason), ignored by RTN and HQQ.
    GPTQ and AWQ need ``w`` 2-D ``[out, in]``; RTN and HQQ take any float tensor.
    ``options``: ``GPTQOptions``/``AWQOptions``/``HQQOptions`` for that algorithm (defaults
    when ``None``; ``TypeError`` for another algorithm's). ``generator``: stochastic
    rounding, RTN only. Raises ``ValueError`` when the algorithm cannot run ``cfg``
    (see ``Algorithm.unavailable_reason``).
    """
    algorithm = _coerce_algorithm(algorithm)
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    _check_options(algorithm, options)
    reason = algorithm.unavailable_reason(cfg, has_calibration=calibration is not None)
    if reason is not None:
        raise ValueError(reason)
    start = time.perf_counter()
    if algorithm is Algorithm.RTN:
        qt = quantize(w, cfg, generator)
        return WeightQuantResult(algorithm, qt, seconds=time.perf_counter() - start)
    if calibration is None and algorithm.needs_calibration:  # unavailable_reason said so
        raise ValueError(f"{algorithm.label} needs calibration inputs")
    if algorithm is Algorithm.GPTQ and calibration is not None:
        g_opts = options if isinstance(options, GPTQOptions) else None
        g = gptq_quantize(w, calibration, cfg, g_opts)
        seconds = time.perf_counter() - start
        return WeightQuantResult(algorithm, g.quantized, None, g, g.warnings, seconds)
    if algorithm is Algorithm.AWQ and calibration is not None:
        a_opts = options if isinstance(options, AWQOptions) else None
        a = awq_quantize(w, calibration, cfg, a_opts)
        seconds = time.perf_counter() - start
        return WeightQuantResult(algorithm, a.quantized, a.input_scale, a, a.warnings, seconds)
    h_opts = options if isinstance(options, HQQOptions) else None
    h = hqq_quantize(w, cfg, h_opts)
    seconds = time.perf_counter() - start
    return WeightQuantResult(algorithm, h.quantized, None, h, h.warnings, seconds)


def quantize_weights(
    weights: Mapping[str, torch.Tensor],
    cfg: QuantConfig,
    algorithm: Algorithm | str = Algorithm.RTN,
    *,
    calibration: Mapping[str, torch.Tensor] | None = None,
    options: AlgorithmOptions | None = None,
) -> dict[str, WeightQuantResult]:
    """``quantize_weight`` over named weights (e.g. every linear layer of a model), in
    order; ``calibration`` maps the same names to their inputs (an
    ``ActivationCapture.inputs``). A failure names the layer (``ValueError``)."""
    if not isinstance(weights, Mapping):
        raise TypeError(
            f"weights must be a mapping of name -> tensor, got {type(weights).__name__}"
        )
    algorithm = _coerce_algorithm(algorithm)
    out: dict[str, WeightQuantResult] = {}
    for name, w in weights.items():
        x = None
        if algorithm.needs_calibration:
            if calibration is None or name not in calibration:
                raise ValueError(
                    f"layer {name!r}: {algorithm.label} needs its calibration inputs, and "
                    "calibration has none for it"
                )
            x = calibration[name]
        try:
            out[name] = quantize_weight(w, cfg, algorithm, calibration=x, options=options)
        except ValueError as exc:
            raise ValueError(f"layer {name!r} (weight {tuple(w.shape)}): {exc}") from exc
    return out


def layer_output_error(
    w: torch.Tensor,
    w_hat: torch.Tensor,
    x: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> ErrorMetrics:
    """Error metrics of the layer output ``x ŵᵀ + b`` against ``x wᵀ + b`` (float32
    matmuls, metrics in float64), for inputs ``x [tokens, in]``: the output error of a
    quantized weight on data (calibration or held-out). ``w``/``w_hat``: ``[out, in]``."""
    w = check_float_tensor(w, "w")
    w_hat = check_float_tensor(w_hat, "w_hat")
    x = check_float_tensor(x, "x")
    if w.dim() != 2 or tuple(w_hat.shape) != tuple(w.shape):
        raise ValueError(
            f"w and w_hat must be 2-D of one shape, got {tuple(w.shape)} and {tuple(w_hat.shape)}"
        )
    if x.dim() != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"x must be [tokens, {w.shape[1]}], got {tuple(x.shape)}")
    x32 = x.to(device=w.device, dtype=torch.float32)
    b = None if bias is None else bias.to(device=w.device, dtype=torch.float32)
    y = F.linear(x32, w.to(torch.float32), b)
    y_hat = F.linear(x32, w_hat.to(device=w.device, dtype=torch.float32), b)
    return error_metrics(y, y_hat)
