"""Whole-model activation quantization: every linear layer runs on fake-quantized inputs.

Every layer runs on fake-quantized inputs through ``quant_core.fake_quant``.

``per_layer_output_errors`` measures each layer alone on captured float inputs (its own
quantization error, not the error accumulated upstream), and ``model_output_report`` adds
the sentence-embedding cosines of the float model against the fully quantized one.

    report = model_output_report(model, CALIBRATION_SENTENCES, SchemePreset.W8A8)
    report.ranked("sqnr_db")[:5]   # the most sensitive layers
    report.mean_cosine
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .activations import ActivationRanges
from .analysis import ClipStats
from .calibration import capture_and_embed, check_sentences, run_sentences, transformer_of
from .capture import ActivationCapture, linear_layer_names
from .fake_quant import (
    as_layer_scheme,
    check_layer_ranges,
    fake_quantize_linears,
    quantized_layer_weight,
)
from .linear_eval import LayerScheme, SchemePreset, evaluate_linear, linear_layer
from .metrics import ErrorMetrics
from .quantize import QuantizedTensor

__all__ = [
    "RANK_METRICS",
    "LayerOutputError",
    "ModelOutputReport",
    "model_output_report",
    "parameter_sharing_copy",
    "per_layer_output_errors",
    "rank_layers",
]

# ErrorMetrics field -> whether a larger value means a larger error.
RANK_METRICS: Mapping[str, bool] = {
    "mse": True,
    "rmse": True,
    "mean_abs": True,
    "max_abs": True,
    "sqnr_db": False,
    "cosine": False,
}


@dataclass(frozen=True)
class LayerOutputError:
    """One linear layer's output error on captured float inputs ``[n_tokens, in]``.

    ``output``: quantized weight and input against the float layer; ``weight_only`` /
    ``activation_only``: one side quantized (``None`` when the scheme keeps it float);
    ``activation_clip``: inputs clipped (static ranges) or ``None``.
    """

    name: str
    in_features: int
    out_features: int
    n_tokens: int
    output: ErrorMetrics
    weight_only: ErrorMetrics | None
    activation_only: ErrorMetrics | None
    activation_clip: ClipStats | None


def rank_layers(
    layers: Sequence[LayerOutputError], metric: str = "sqnr_db"
) -> tuple[LayerOutputError, ...]:
    """``layers`` most sensitive first by their output ``metric`` (an ``ErrorMetrics``
    field in ``RANK_METRICS``): descending for errors (mse, ...), ascending for SQNR and
    cosine; ties keep the given order."""
    if metric not in RANK_METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of: {', '.join(RANK_METRICS)}")
    worse_is_larger = RANK_METRICS[metric]
    return tuple(
        sorted(
            layers,
            key=lambda r: getattr(r.output, metric),
            reverse=worse_is_larger,
        )
    )


def per_layer_output_errors(
    module: nn.Module,
    capture: ActivationCapture,
    scheme: LayerScheme | SchemePreset,
    *,
    activation_ranges: Mapping[str, ActivationRanges] | None = None,
    weights: Mapping[str, QuantizedTensor] | None = None,
) -> tuple[LayerOutputError, ...]:
    """Per captured layer of ``module`` (in capture order), its output error under
    ``scheme`` on the captured float input (``evaluate_linear``). ``weights``: quantized
    weights to reuse (under ``scheme.weight``), by layer name."""
    scheme = as_layer_scheme(scheme)
    if not isinstance(capture, ActivationCapture):
        raise TypeError(f"capture must be an ActivationCapture, got {type(capture).__name__}")
    ranges = check_layer_ranges(activation_ranges, list(capture.inputs), scheme)
    reused = {} if weights is None else weights
    out = []
    for name, x in capture.inputs.items():
        linear = linear_layer(module, name)
        ev = evaluate_linear(
            x,
            linear.weight,
            linear.bias,
            scheme,
            activation_ranges=ranges.get(name),
            weight_q=reused.get(name),
        )
        out.append(
            LayerOutputError(
                name=name,
                in_features=linear.in_features,
                out_features=linear.out_features,
                n_tokens=int(x.shape[0]),
                output=ev.metrics,
                weight_only=ev.weight_only,
                activation_only=ev.activation_only,
                activation_clip=ev.activation_clip,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class ModelOutputReport:
    """A SentenceTransformer under one scheme: per-layer output errors (module order) and
    per-sentence cosines between its float and fully quantized embeddings.

    ``capture_seconds``: the float forward that captured the inputs; ``seconds``: all of it.
    """

    scheme: LayerScheme
    layers: tuple[LayerOutputError, ...]
    sentences: tuple[str, ...]
    cosines: tuple[float, ...]
    capture_seconds: float
    seconds: float

    def ranked(self, metric: str = "sqnr_db") -> tuple[LayerOutputError, ...]:
        """The layers most sensitive first by ``metric`` (see ``rank_layers``)."""
        return rank_layers(self.layers, metric)

    @property
    def mean_cosine(self) -> float:
        return sum(self.cosines) / len(self.cosines)

    @property
    def min_cosine(self) -> float:
        return min(self.cosines)


def parameter_sharing_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model``'s module tree that shares its parameters, buffers and tokenizer:
    hooks and swapped weights on the copy leave the original (perhaps shared by other
    threads) untouched, at a fraction of a full copy's cost."""
    memo: dict[int, Any] = {id(t): t for t in (*model.parameters(), *model.buffers())}
    for m in model.modules():
        tokenizer = getattr(m, "tokenizer", None)
        if tokenizer is not None:
            memo[id(tokenizer)] = tokenizer
    return copy.deepcopy(model, memo)


def model_output_report(
    model: nn.Module,
    sentences: Sequence[str],
    scheme: LayerScheme | SchemePreset,
    *,
    activation_ranges: Mapping[str, ActivationRanges] | None = None,
) -> ModelOutputReport:
    """Quantize a loaded SentenceTransformer's linear layers under ``scheme`` and report:

    1. one float forward over ``sentences`` captures every linear input (real tokens) and
       the float embeddings;
    2. each layer's output error on its captured input (``per_layer_output_errors``);
    3. a forward of a parameter-sharing copy with every layer fake-quantized
       (``fake_quantize_linears``, the same quantized weights) gives the quantized
       embeddings; ``cosines[i]`` compares sentence ``i``'s two embeddings.

    ``model`` itself is never modified. ``activation_ranges``: static ranges by layer
    name (the others are dynamic).
    """
    start = time.perf_counter()
    scheme = as_layer_scheme(scheme)
    texts = check_sentences(sentences)
    inner = transformer_of(model)
    names = linear_layer_names(inner)
    ranges = check_layer_ranges(activation_ranges, names, scheme)
    weights = {}
    if scheme.weight is not None:
        cfg = scheme.weight
        weights = {n: quantized_layer_weight(n, linear_layer(inner, n), cfg) for n in names}
    capture, fp32 = capture_and_embed(model, texts)
    layers = per_layer_output_errors(
        inner, capture, scheme, activation_ranges=ranges, weights=weights
    )
    twin = parameter_sharing_copy(model)
    handle = fake_quantize_linears(
        transformer_of(twin),
        scheme,
        activation_ranges=ranges,
        dequantized_weights={n: qt.dequantize() for n, qt in weights.items()},
    )
    with handle:

        def set_mask(mask: torch.Tensor) -> None:
            handle.token_mask = mask

        quantized = run_sentences(twin, texts, set_mask)
    cos = torch.nn.functional.cosine_similarity(fp32.double(), quantized.double(), dim=1)
    return ModelOutputReport(
        scheme=scheme,
        layers=layers,
        sentences=texts,
        cosines=tuple(float(c) for c in cos),
        capture_seconds=capture.seconds,
        seconds=time.perf_counter() - start,
    )
