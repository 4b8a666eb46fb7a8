"""The bundled model with every linear layer quantized (weights by an algorithm, inputs
fake-quantized on the fly): per-layer output errors and the sentence embeddings.

Two steps, cached apart by the page (the weights change less often than the sentences):

1. ``quantize_linears``: every ``nn.Linear`` weight of the transformer by one algorithm
   (``quant_core.quantize_weight``; GPTQ/AWQ calibrated on an ``ActivationCapture``).
2. ``output_report``: one float forward over the sentences captures each layer's input
   ``X`` and the float embeddings; per layer, ``Y = X Wᵀ + b`` against
   ``Ŷ = X̂ Ŵᵀ + b``; then a forward of a parameter-sharing copy with every layer quantized
   (``quant_core.fake_quantize_linears``) gives the quantized embeddings.

AWQ's codes encode ``W diag(s)`` and its layer runs as ``(X / s) Ŵᵀ`` (``1/s`` folded into
the op before): so the activation quantizer sees ``X / s``, as a deployed AWQ layer's
would, static ranges are calibrated on ``X / s``, and with float activations the layer
computes ``X Ŵ_effᵀ`` with ``Ŵ_eff = Ŵ diag(s)⁻¹`` (``effective_weight()``). The scales
``s`` are not counted in the bits per element (a deployed model folds them away).

What depends on the sentences only (the float forward: each layer's input ``X``, its
output ``Y`` and the float embeddings) is a ``FloatReference`` (``float_reference``): a
page computes it once per sentence list and passes it to every report, so a new bit width
pays for the quantization, the quantized outputs and one quantized forward only. Each
layer's weight is dequantized once per report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from quant_core import (
    ActivationCapture,
    ActivationRanges,
    Algorithm,
    ErrorMetrics,
    LayerScheme,
    QuantConfig,
    WeightQuantResult,
    clip_stats,
    error_metrics,
    fake_quantize_linears,
    layer_output_error,
    linear_layer,
    quantize_activation,
    quantize_dequantize,
    storage_cost,
)
from quant_core.calibration import capture_and_embed, check_sentences, run_sentences, transformer_of
from quant_core.model_activations import parameter_sharing_copy

from .evaluate import SkippedLayer
from .linears import QuantizedLinears, linear_scales, quantize_linears, static_ranges

__all__ = [
    "FloatReference",
    "LayerOutputRow",
    "ModelOutputs",
    "QuantizedLinears",
    "float_reference",
    "output_report",
    "quantize_linears",
    "static_ranges",
]


@dataclass(frozen=True)
class LayerOutputRow:
    """One linear layer on the page's sentences.

    ``weight``: the effective weight against ``W``; ``output``: ``Ŷ`` (weights and inputs
    quantized) against ``Y`` on the captured float input; ``weight_only``: ``X Ŵ_effᵀ + b``;
    ``activation_only``: ``X̂ Wᵀ + b`` (``None`` with float activations);
    ``clipped_fraction``: inputs clipped by static ranges (``None`` when dynamic or float);
    ``held_out`` / ``held_out_rtn``: weight-only output error on held-out sentences of the
    algorithm and of RTN (``None`` without a held-out capture); ``stored_as``: the scheme
    the weight is stored in, by name (llama-quantize's fallback where the page's GGUF
    type does not fit the rows: ``"Q5_0"`` for MiniLM's 384-wide layers under Q4_K).
    """

    name: str
    shape: tuple[int, int]
    n_tokens: int
    weight: ErrorMetrics
    output: ErrorMetrics
    weight_only: ErrorMetrics
    activation_only: ErrorMetrics | None
    clipped_fraction: float | None
    bits_per_element: float
    quantized_bytes: int
    fp32_bytes: int
    held_out: ErrorMetrics | None
    held_out_rtn: ErrorMetrics | None
    stored_as: str = ""


@dataclass(frozen=True)
class ModelOutputs:
    """The model under one scheme on ``sentences``: a row per quantized layer (module
    order), the skipped layers, and per sentence the cosine of its float and quantized
    embeddings. ``seconds``: this report (the weights' time is ``QuantizedLinears``')."""

    scheme: LayerScheme
    algorithm: Algorithm
    layers: tuple[LayerOutputRow, ...]
    skipped: tuple[SkippedLayer, ...]
    sentences: tuple[str, ...]
    cosines: tuple[float, ...]
    seconds: float

    @property
    def fp32_bytes(self) -> int:
        """The quantized layers' weights as fp32."""
        return sum(r.fp32_bytes for r in self.layers)

    @property
    def quantized_bytes(self) -> int:
        """The same weights under the scheme (codes, scales, zero points; not AWQ's ``s``)."""
        return sum(r.quantized_bytes for r in self.layers)

    @property
    def mean_cosine(self) -> float:
        return sum(self.cosines) / len(self.cosines)

    @property
    def min_cosine(self) -> float:
        return min(self.cosines)


@dataclass(frozen=True)
class FloatReference:
    """The float model on ``sentences``: every linear layer's input (``capture``,
    ``[tokens, in]``), its float32 output ``Y = X Wᵀ + b`` (``outputs``, ``[tokens, out]``)
    and the sentence embeddings (``[n_sentences, dim]``). It depends on the sentences alone
    (about 25 MB for 15 sentences on MiniLM), so a page keeps it across schemes."""

    sentences: tuple[str, ...]
    capture: ActivationCapture
    outputs: Mapping[str, torch.Tensor]
    embeddings: torch.Tensor


def float_reference(model: nn.Module, sentences: tuple[str, ...]) -> FloatReference:
    """One float forward of ``model`` over ``sentences`` (``check_sentences``): the inputs,
    float32 outputs of every linear layer of its transformer and the embeddings."""
    texts = check_sentences(sentences)
    capture, embeddings = capture_and_embed(model, texts)
    inner = transformer_of(model)
    outputs = {}
    for name in capture.inputs:
        linear = linear_layer(inner, name)
        b = None if linear.bias is None else linear.bias.detach().to(torch.float32)
        w = linear.weight.detach().to(torch.float32)
        outputs[name] = F.linear(capture[name].to(torch.float32), w, b)
    return FloatReference(texts, capture, outputs, embeddings)


def _layer_row(
    name: str,
    linear: nn.Linear,
    res: WeightQuantResult,
    dequantized: torch.Tensor,
    reference: FloatReference,
    activation: QuantConfig | None,
    ranges: ActivationRanges | None,
    held_out: torch.Tensor | None,
    algorithm: Algorithm,
) -> LayerOutputRow:
    w = linear.weight.detach().to(torch.float32)
    b = None if linear.bias is None else linear.bias.detach().to(torch.float32)
    x_stored = reference.capture[name]
    x = x_stored.to(torch.float32)
    y = reference.outputs[name]
    s = res.input_scale
    w_eff = dequantized if s is None else dequantized / s  # res.effective_weight()
    y_w = F.linear(x, w_eff, b)
    weight_only = error_metrics(y, y_w)
    output, activation_only, clipped = weight_only, None, None
    if activation is not None:
        xs = x if s is None else x / s
        aq = quantize_activation(xs, activation, ranges)
        xs_hat = aq.dequantize()
        output = error_metrics(y, F.linear(xs_hat, dequantized, b))
        x_hat = xs_hat if s is None else xs_hat * s
        activation_only = error_metrics(y, F.linear(x_hat, w, b))
        if ranges is not None:
            clipped = clip_stats(xs, aq).n_clipped / max(xs.numel(), 1)
    held, held_rtn = None, None
    if held_out is not None:
        # The report's own inputs (the page's case): the same matmuls as weight_only.
        same = held_out is x_stored
        held = weight_only if same else layer_output_error(w, w_eff, held_out, b)
        if algorithm is Algorithm.RTN:
            held_rtn = held  # the algorithm is RTN: the same codes (quantize_weight)
        else:
            rtn = quantize_dequantize(w, res.quantized.config).values
            held_rtn = (
                error_metrics(y, F.linear(x, rtn, b))
                if same
                else layer_output_error(w, rtn, held_out, b)
            )
    st = storage_cost(tuple(w.shape), res.quantized.config)
    return LayerOutputRow(
        name=name,
        shape=(int(w.shape[0]), int(w.shape[1])),
        n_tokens=int(x.shape[0]),
        weight=error_metrics(w, w_eff),
        output=output,
        weight_only=weight_only,
        activation_only=activation_only,
        clipped_fraction=clipped,
        bits_per_element=st.bits_per_element,
        quantized_bytes=st.total_bytes,
        fp32_bytes=st.fp32_bytes,
        held_out=held,
        held_out_rtn=held_rtn,
        stored_as=res.quantized.config.name,
    )


def _divide_input(s: torch.Tensor) -> Callable[..., Any]:
    def hook(mod: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (args[0] / s.to(args[0].dtype), *args[1:])

    return hook


def output_report(
    model: nn.Module,
    sentences: tuple[str, ...],
    linears: QuantizedLinears,
    activation: QuantConfig | None = None,
    *,
    ranges: Mapping[str, ActivationRanges] | None = None,
    held_out: ActivationCapture | None = None,
    reference: FloatReference | None = None,
) -> ModelOutputs:
    """``model`` (a loaded SentenceTransformer, never modified) with the weights of
    ``linears`` and every linear input fake-quantized under ``activation`` (``None``:
    float), on ``sentences`` (``check_sentences``): see the module docstring.

    ``ranges``: static ranges by layer (``static_ranges``; dynamic without them);
    ``held_out``: a capture on other sentences, for each layer's weight-only output error
    of the algorithm and of RTN (``reference.capture`` itself: on these sentences, reusing
    the report's own matmuls). ``reference``: ``float_reference(model, sentences)``, kept
    by the caller (``ValueError`` when it is of other sentences); computed here without it.
    Skipped layers keep float weights; their inputs are still quantized in the embedding
    forward.
    """
    start = time.perf_counter()
    if not isinstance(linears, QuantizedLinears):
        raise TypeError(f"linears must be QuantizedLinears, got {type(linears).__name__}")
    texts = check_sentences(sentences)
    scheme = LayerScheme(weight=linears.config, activation=activation)
    ranges = {} if ranges is None else dict(ranges)
    inner = transformer_of(model)
    if reference is None:
        reference = float_reference(model, texts)
    elif not isinstance(reference, FloatReference) or reference.sentences != texts:
        raise ValueError("reference must be the FloatReference of these sentences")
    fp32 = reference.embeddings
    dequantized = {n: r.quantized.dequantize() for n, r in linears.results.items()}
    rows = tuple(
        _layer_row(
            name,
            linear_layer(inner, name),
            res,
            dequantized[name],
            reference,
            activation,
            ranges.get(name),
            None if held_out is None or name not in held_out.inputs else held_out[name],
            linears.algorithm,
        )
        for name, res in linears.results.items()
    )
    twin = parameter_sharing_copy(model)
    twin_inner = transformer_of(twin)
    # AWQ layers divide their input by s before the activation quantizer sees it (hooks
    # run in registration order), then compute with the dequantized codes of W diag(s).
    scale_hooks = [
        linear_layer(twin_inner, name).register_forward_pre_hook(_divide_input(s))
        for name, s in linear_scales(linears).items()
    ]
    handle = fake_quantize_linears(
        twin_inner,
        LayerScheme(activation=activation),
        activation_ranges=ranges or None,
        dequantized_weights=dequantized,
    )
    try:
        with handle:

            def set_mask(mask: torch.Tensor) -> None:
                handle.token_mask = mask

            quantized = run_sentences(twin, texts, set_mask)
    finally:
        for hook in scale_hooks:
            hook.remove()
    cos = F.cosine_similarity(fp32.double(), quantized.double(), dim=1).clamp(-1.0, 1.0)
    return ModelOutputs(
        scheme=scheme,
        algorithm=linears.algorithm,
        layers=rows,
        skipped=linears.skipped,
        sentences=texts,
        cosines=tuple(float(c) for c in cos),
        seconds=time.perf_counter() - start,
    )
