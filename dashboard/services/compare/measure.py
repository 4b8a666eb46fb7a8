"""One weight scheme run on a weight, measured on the weight and, for a bundled-model
layer, on the layer's outputs over held-out sentences.

    ref = held_out_reference(w, inputs)         # x_eval wᵀ + b, once per layer
    q = quantize_and_measure(w, scheme, inputs, ref)
    q.metrics.mse, q.output.mse                 # weight error; output error on held-out text
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from quant_core import (
    ErrorMetrics,
    WeightQuantResult,
    check_float_tensor,
    clip_stats,
    error_metrics,
)

from ..activations.layer import LayerInputs
from ..display.scale_limits import overflow_text, scale_limit_text
from .weights import WeightScheme, quantize_scheme

__all__ = ["MeasuredScheme", "check_layer", "held_out_reference", "quantize_and_measure"]


def check_layer(w: torch.Tensor, inputs: LayerInputs) -> None:
    """``ValueError`` unless ``w`` is the ``[out, in]`` weight of the layer whose captured
    inputs are ``inputs`` (its shape, and ``in`` columns in both input sets)."""
    if not isinstance(inputs, LayerInputs):
        raise TypeError(f"inputs must be LayerInputs, got {type(inputs).__name__}")
    shape = tuple(int(d) for d in w.shape)
    if shape != tuple(inputs.weight.shape):
        raise ValueError(
            f"weight {shape} is not layer {inputs.name!r}'s {tuple(inputs.weight.shape)}"
        )
    for what, x in (("calibration", inputs.x_calib), ("held-out", inputs.x_eval)):
        if x.dim() != 2 or x.shape[1] != shape[1]:
            raise ValueError(
                f"layer {inputs.name!r}: {what} inputs {tuple(x.shape)} are not "
                f"[tokens, {shape[1]}]"
            )


@dataclass(frozen=True, eq=False)
class MeasuredScheme:
    """One scheme on one weight ``w``.

    ``effective``: the weight the layer computes with (``result.effective_weight()``,
    float32 ``[out, in]``); ``metrics``: ``w`` against it; ``output``: the layer's output
    ``x ŵᵀ + b`` against ``x wᵀ + b`` on the held-out inputs (``None`` without a layer).
    ``quantized_input``: the tensor the codes encode (``w``, or AWQ's ``w diag(s)``), for
    clipping counts against the codes' ranges.
    """

    scheme: WeightScheme
    result: WeightQuantResult
    effective: torch.Tensor
    metrics: ErrorMetrics
    output: ErrorMetrics | None
    quantized_input: torch.Tensor

    def scale_note(self) -> str:
        """Why the weight errors are what they are when the stored scales hit their dtype's
        limits (``display.scale_limits.scale_limit_text``); empty when they do not."""
        qt = self.result.quantized
        clipped = clip_stats(self.quantized_input, qt).n_clipped
        return scale_limit_text(qt, clipped, float(self.metrics.sqnr_db))


def held_out_reference(w: torch.Tensor, inputs: LayerInputs) -> torch.Tensor:
    """The float layer's output on the held-out inputs, ``x_eval wᵀ + b`` (float32, as
    ``layer_output_error`` computes it): computed once, shared by every scheme of a
    sweep. ``ValueError`` as ``check_layer``."""
    check_float_tensor(w)
    check_layer(w, inputs)
    return _linear(inputs.x_eval, w, inputs.bias)


def _linear(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    b = None if bias is None else bias.to(torch.float32)
    return F.linear(x.to(torch.float32), w.to(torch.float32), b)


def quantize_and_measure(
    w: torch.Tensor,
    scheme: WeightScheme,
    inputs: LayerInputs | None = None,
    reference: torch.Tensor | None = None,
) -> MeasuredScheme:
    """Quantize ``w`` under ``scheme`` (calibrated on ``inputs.x_calib`` when the
    algorithm needs it) and measure the weight error and, with ``inputs``, the output error
    on ``inputs.x_eval`` (held-out sentences, bias included; the same metrics as
    ``layer_output_error``). ``reference``: ``held_out_reference(w, inputs)`` when the
    caller measures many schemes (computed here otherwise). ``ValueError`` when the scheme
    cannot run (no calibration for GPTQ/AWQ, a codebook format for GPTQ/HQQ, a misfit
    granularity) or ``w`` is not the layer's weight."""
    if inputs is not None and reference is None:
        reference = held_out_reference(w, inputs)
    else:
        check_float_tensor(w)
    result = quantize_scheme(w, scheme, None if inputs is None else inputs.x_calib)
    overflow = overflow_text(result.quantized)
    if overflow:
        # error_metrics would refuse the decoded inf as if the input held it ("x_hat holds
        # ... Inf value(s); quantization needs finite values"): say what happened instead
        raise ValueError(overflow[0].lower() + overflow[1:])
    effective = result.effective_weight()
    output = None
    if inputs is not None and reference is not None:
        output = error_metrics(reference, _linear(inputs.x_eval, effective, inputs.bias))
    scale = result.input_scale
    return MeasuredScheme(
        scheme=scheme,
        result=result,
        effective=effective,
        metrics=error_metrics(w, effective),
        output=output,
        quantized_input=w if scale is None else w.to(torch.float32) * scale,
    )
