"""Whole-model activation quantization: every linear layer runs on fake-quantized inputs.

``fake_quantize_linears`` installs, on every ``nn.Linear`` of a module (or the named ones),
a forward pre-hook that replaces the layer's input ``X`` by ``X_hat = dequantize(quantize(X))``
on the fly, and optionally swaps its weight for the dequantized ``W_hat``; ``remove()`` (or
leaving the ``with`` block) restores the module exactly. A 3-D input ``[batch, seq, F]`` is
quantized on its real tokens only (``token_mask``), so padding never widens a range.

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
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch
from torch import nn

from .activations import ActivationRanges, quantize_activation
from .analysis import ClipStats
from .calibration import capture_and_embed, check_sentences, run_sentences, transformer_of
from .capture import ActivationCapture, linear_layer_names
from .config import QuantConfig
from .linear_eval import LayerScheme, SchemePreset, evaluate_linear, linear_layer
from .metrics import ErrorMetrics
from .quantize import QuantizedTensor, quantize

__all__ = [
    "RANK_METRICS",
    "FakeQuantLinears",
    "LayerOutputError",
    "ModelOutputReport",
    "fake_quantize_linears",
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


def _as_scheme(scheme: object) -> LayerScheme:
    if isinstance(scheme, SchemePreset):
        return scheme.scheme
    if not isinstance(scheme, LayerScheme):
        raise TypeError(f"scheme must be a LayerScheme or SchemePreset, got {scheme!r}")
    return scheme


def _check_ranges(
    ranges: object, names: Sequence[str], scheme: LayerScheme
) -> Mapping[str, ActivationRanges]:
    if ranges is None or (isinstance(ranges, Mapping) and not ranges):
        return {}
    if not isinstance(ranges, Mapping):
        raise TypeError(
            f"activation_ranges must map layer names to ActivationRanges, got {ranges!r}"
        )
    if scheme.activation is None:
        raise ValueError("activation_ranges given, but the scheme keeps activations in float")
    unknown = sorted(set(ranges) - set(names))
    if unknown:
        raise ValueError(f"activation_ranges names layers that are not quantized: {unknown}")
    for name, r in ranges.items():
        if not isinstance(r, ActivationRanges):
            raise TypeError(f"activation_ranges[{name!r}] is a {type(r).__name__}")
        if r.config != scheme.activation:
            raise ValueError(
                f"activation_ranges[{name!r}] was calibrated under {r.config.describe()}, "
                f"not {scheme.activation.describe()}"
            )
    return ranges


class FakeQuantLinears:
    """Hooks that run linear layers on fake-quantized inputs (and weights), until removed.

    Made by ``fake_quantize_linears``; a context manager. ``token_mask`` (bool
    ``[batch, seq]`` or ``None``): set it before each batch; a 3-D input keeps its other
    (padding) rows in float and quantizes the real ones, whose ranges alone count.
    While installed the module is modified (hooks, swapped weights): do not share it with
    concurrent callers.
    """

    def __init__(
        self,
        module: nn.Module,
        names: Sequence[str],
        scheme: LayerScheme,
        ranges: Mapping[str, ActivationRanges],
        weights: Mapping[str, torch.Tensor],
    ) -> None:
        self.token_mask: torch.Tensor | None = None
        self.layers: tuple[str, ...] = tuple(names)
        self.scheme = scheme
        self._originals: list[tuple[nn.Linear, nn.Parameter]] = []
        self._handles: list[Any] = []
        for name in names:
            linear = module.get_submodule(name)
            if name in weights:
                w_hat = weights[name].to(device=linear.weight.device, dtype=linear.weight.dtype)
                self._originals.append((linear, linear.weight))
                linear.weight = nn.Parameter(w_hat, requires_grad=False)
            if scheme.activation is not None:
                hook = self._hook(scheme.activation, ranges.get(name))
                self._handles.append(linear.register_forward_pre_hook(hook, with_kwargs=True))

    def _hook(self, cfg: QuantConfig, ranges: ActivationRanges | None) -> Callable[..., Any]:
        def fake_quant(rows: torch.Tensor) -> torch.Tensor:
            x_hat = quantize_activation(rows.to(torch.float32), cfg, ranges).dequantize()
            return x_hat.to(rows.dtype)

        def hook(mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            x = args[0] if args else kwargs["input"]
            flat = x.reshape(-1, x.shape[-1])
            mask = self.token_mask
            if x.dim() == 3 and mask is not None and not bool(mask.all()):
                if tuple(mask.shape) != tuple(x.shape[:2]):
                    raise ValueError(
                        f"token_mask shape {tuple(mask.shape)} does not match the "
                        f"[batch, seq] of the layer input {tuple(x.shape)}"
                    )
                rows = mask.to(x.device).reshape(-1).nonzero().reshape(-1)
                out = flat.index_copy(0, rows, fake_quant(flat.index_select(0, rows)))
            else:
                out = fake_quant(flat)
            out = out.reshape(x.shape)
            if args:
                return (out, *args[1:]), kwargs
            return args, {**kwargs, "input": out}

        return hook

    def remove(self) -> None:
        """Remove the hooks and put the original weights back (idempotent)."""
        for handle in self._handles:
            handle.remove()
        for linear, weight in reversed(self._originals):
            linear.weight = weight
        self._handles, self._originals = [], []

    def __enter__(self) -> FakeQuantLinears:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()


def fake_quantize_linears(
    module: nn.Module,
    scheme: LayerScheme | SchemePreset,
    *,
    layers: Collection[str] | None = None,
    activation_ranges: Mapping[str, ActivationRanges] | None = None,
    dequantized_weights: Mapping[str, torch.Tensor] | None = None,
) -> FakeQuantLinears:
    """Run every ``nn.Linear`` of ``module`` (or the named ``layers``) under ``scheme``
    until the returned handle is removed: inputs fake-quantized under
    ``scheme.activation`` (dynamic ranges, or the static ``activation_ranges`` of a layer
    that has them), weights replaced by their dequantized quantization under
    ``scheme.weight`` (or by the given ``dequantized_weights`` ``[out, in]`` per layer,
    e.g. from GPTQ); a side that is ``None`` stays float.

    All weights are quantized before anything is installed, so an error (a scheme that
    does not fit a layer: ``ValueError`` naming it) leaves the module unchanged.
    """
    scheme = _as_scheme(scheme)
    names = linear_layer_names(module, layers)
    ranges = _check_ranges(activation_ranges, names, scheme)
    weights: dict[str, torch.Tensor] = {}
    given = {} if dequantized_weights is None else dict(dequantized_weights)
    for name in names:
        linear = linear_layer(module, name)
        if name in given:
            w = given[name]
            if not isinstance(w, torch.Tensor) or tuple(w.shape) != tuple(linear.weight.shape):
                raise ValueError(
                    f"dequantized_weights[{name!r}] must be a tensor of shape "
                    f"{tuple(linear.weight.shape)}"
                )
            weights[name] = w.detach()
        elif scheme.weight is not None:
            weights[name] = _quantized_weight(name, linear, scheme.weight).dequantize()
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ValueError(f"dequantized_weights names layers that are not quantized: {unknown}")
    return FakeQuantLinears(module, names, scheme, ranges, weights)


def _quantized_weight(name: str, linear: nn.Linear, cfg: QuantConfig) -> QuantizedTensor:
    w = linear.weight.detach()
    try:
        return quantize(w, cfg)
    except ValueError as exc:
        raise ValueError(f"layer {name!r} (weight {tuple(w.shape)}): {exc}") from exc


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
    scheme = _as_scheme(scheme)
    if not isinstance(capture, ActivationCapture):
        raise TypeError(f"capture must be an ActivationCapture, got {type(capture).__name__}")
    ranges = _check_ranges(activation_ranges, list(capture.inputs), scheme)
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
    scheme = _as_scheme(scheme)
    texts = check_sentences(sentences)
    inner = transformer_of(model)
    names = linear_layer_names(inner)
    ranges = _check_ranges(activation_ranges, names, scheme)
    weights = {}
    if scheme.weight is not None:
        cfg = scheme.weight
        weights = {n: _quantized_weight(n, linear_layer(inner, n), cfg) for n in names}
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
