"""Every ``nn.Linear`` weight of the bundled model quantized by one algorithm (step 1 of
the whole-model report, cached apart from the sentences: see ``outputs``), and the static
activation ranges that go with those weights.

AWQ's codes encode ``W diag(s)`` and its layer runs as ``(X / s) Ŵᵀ``: its static ranges
are calibrated on ``X / s``, what the layer's activation quantizer sees.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from quant_core import (
    ActivationCapture,
    ActivationRanges,
    Algorithm,
    AWQOptions,
    GPTQOptions,
    HQQOptions,
    QuantConfig,
    WeightQuantResult,
    calibrate_layer_ranges,
    calibrate_ranges,
    fallback_config,
    linear_layer,
    quantize_weight,
)
from quant_core.calibration import transformer_of
from quant_core.capture import linear_layer_names

from ..progress import Progress
from .evaluate import SkippedLayer

__all__ = ["QuantizedLinears", "linear_scales", "quantize_linears", "static_ranges"]


@dataclass(frozen=True, eq=False)
class QuantizedLinears:
    """Every linear layer of a transformer quantized under ``config`` by ``algorithm``.

    ``results``: by layer name (module order) the algorithm's ``WeightQuantResult``;
    ``skipped``: layers the config does not fit (kept float); ``seconds``: the wall time
    of all of it; ``warnings``: the algorithm's, each prefixed by its layer.
    """

    config: QuantConfig
    algorithm: Algorithm
    results: Mapping[str, WeightQuantResult]
    skipped: tuple[SkippedLayer, ...]
    seconds: float
    warnings: tuple[str, ...]


def quantize_linears(
    model: nn.Module,
    cfg: QuantConfig,
    algorithm: Algorithm = Algorithm.RTN,
    *,
    options: GPTQOptions | AWQOptions | HQQOptions | None = None,
    calibration: ActivationCapture | None = None,
    progress: Progress | None = None,
) -> QuantizedLinears:
    """Quantize every ``nn.Linear`` weight of ``model``'s transformer (a loaded
    SentenceTransformer) under ``cfg`` with ``algorithm`` (``quant_core.quantize_weight``).

    ``calibration``: the layers' captured inputs, needed by GPTQ and AWQ (``ValueError``
    with ``Algorithm.unavailable_reason`` otherwise, or when it lacks a layer).
    ``progress(done, total)``: ``(0, total)`` first, then after every layer. A layer the
    config does not fit is skipped with the reason; the model is never modified.
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"algorithm must be an Algorithm, got {algorithm!r}")
    reason = algorithm.unavailable_reason(cfg, has_calibration=calibration is not None)
    if reason is not None:
        raise ValueError(reason)
    start = time.perf_counter()
    inner = transformer_of(model)
    names = linear_layer_names(inner)
    if algorithm.needs_calibration and calibration is not None:
        missing = [n for n in names if n not in calibration.inputs]
        if missing:
            raise ValueError(f"the calibration capture has no inputs for {missing}")
    results: dict[str, WeightQuantResult] = {}
    skipped: list[SkippedLayer] = []
    warnings: list[str] = []
    if progress is not None:
        progress(0, len(names))
    for done, name in enumerate(names, start=1):
        w = linear_layer(inner, name).weight.detach()
        x = calibration[name] if algorithm.needs_calibration and calibration else None
        try:
            layer_cfg = fallback_config(cfg, tuple(w.shape))  # llama-quantize's fallback
            res = quantize_weight(w, layer_cfg, algorithm, calibration=x, options=options)
        except ValueError as exc:
            skipped.append(SkippedLayer(name, tuple(w.shape), str(exc)))
        else:
            results[name] = res
            warnings.extend(f"{name}: {text}" for text in res.warnings)
        if progress is not None:
            progress(done, len(names))
    return QuantizedLinears(
        config=cfg,
        algorithm=algorithm,
        results=results,
        skipped=tuple(skipped),
        seconds=time.perf_counter() - start,
        warnings=tuple(warnings),
    )


def static_ranges(
    capture: ActivationCapture, cfg: QuantConfig, linears: QuantizedLinears
) -> dict[str, ActivationRanges]:
    """Static activation ranges under ``cfg`` calibrated on ``capture`` (the calibration
    sentences), per layer; an AWQ layer's on ``X / s``, what its quantizer sees.
    ``ValueError`` for a per-token ``cfg`` (``calibrate_ranges``)."""
    ranges = calibrate_layer_ranges(capture, cfg)
    for name, res in linear_scales(linears).items():
        if name in ranges:
            ranges[name] = calibrate_ranges(capture[name] / res, cfg)
    return ranges


def linear_scales(linears: QuantizedLinears) -> dict[str, torch.Tensor]:
    """AWQ's input scales ``s`` ``[in]`` by layer (empty for the other algorithms)."""
    return {n: r.input_scale for n, r in linears.results.items() if r.input_scale is not None}
