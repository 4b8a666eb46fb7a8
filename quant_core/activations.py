"""Activations: capture the inputs of linear layers, name their granularities, find outliers.

An activation matrix is ``[tokens, features]``: row ``t`` is what one token feeds a layer.
Its granularities in activation terms (``ActivationGranularity``):

- per-tensor: ``PerTensor()``, one scale for the matrix;
- per-token: ``PerChannel(axis=0)``, one scale per row (token);
- per-channel (per feature): ``PerChannel(axis=1)``, one scale per column (feature).

Dynamic ranges come from the tokens being quantized (``quantize_activation(x, cfg)``);
static ranges are calibrated once on other tokens (``calibrate_ranges``) and applied to new
ones (``quantize_activation(x, cfg, ranges)``), which clips what falls outside them.

``capture_linear_inputs`` records, with forward pre-hooks (no model code copied), the input
of every ``nn.Linear`` of a module while a callable runs, keeping only real (unpadded)
tokens; ``quant_core.calibration.capture_sentence_inputs`` does it for a SentenceTransformer
on a list of sentences. ``feature_absmax`` gives the per-feature ``max|x|`` that shows
outlier features.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from .analysis import ClipStats, clip_stats
from .config import Granularity, PerChannel, PerTensor, QuantConfig
from .metrics import ErrorMetrics, error_metrics
from .quantize import QuantizedTensor, quantize
from .ranges import BlockRange
from .validation import check_float_tensor

__all__ = [
    "ActivationCapture",
    "ActivationGranularity",
    "ActivationQuant",
    "ActivationRanges",
    "LinearInputRecorder",
    "RangeComparison",
    "calibrate_layer_ranges",
    "calibrate_ranges",
    "capture_linear_inputs",
    "check_activation",
    "compare_static_dynamic",
    "feature_absmax",
    "linear_layer_names",
    "outlier_features",
    "quantize_activation",
]


class ActivationGranularity(enum.Enum):
    """Granularities of a ``[tokens, features]`` activation, named as users know them.

    ``x`` of shape ``[512, 384]``: PER_TENSOR has one scale (``[]``), PER_TOKEN one per row
    (``[512]``, ``PerChannel(axis=0)``), PER_FEATURE one per column (``[384]``,
    ``PerChannel(axis=1)``). Per-token ranges exist only for the tokens at hand, so they
    are always dynamic; static (calibrated) ranges are per-tensor or per-feature.
    """

    PER_TENSOR = "per_tensor"
    PER_TOKEN = "per_token"
    PER_FEATURE = "per_feature"

    @property
    def granularity(self) -> Granularity:
        """The ``quant_core`` granularity for a 2-D ``[tokens, features]`` matrix."""
        return _GRANULARITY[self]

    @property
    def label(self) -> str:
        """A short label for a picker: ``"per-tensor"``, ``"per-token (one scale per
        row)"``, ``"per-channel (per feature)"``."""
        return _LABEL[self]

    @property
    def allows_static(self) -> bool:
        """Whether ranges calibrated on other tokens can be applied (not per-token)."""
        return self is not ActivationGranularity.PER_TOKEN

    @classmethod
    def of(cls, granularity: Granularity) -> ActivationGranularity:
        """The member for ``granularity`` on a 2-D activation (``PerChannel(-1)`` is per
        feature); ``ValueError`` for one with no activation name (a group, an axis > 1)."""
        if isinstance(granularity, PerTensor):
            return cls.PER_TENSOR
        if isinstance(granularity, PerChannel) and granularity.axis in (0, -2):
            return cls.PER_TOKEN
        if isinstance(granularity, PerChannel) and granularity.axis in (1, -1):
            return cls.PER_FEATURE
        raise ValueError(
            f"granularity {granularity!r} has no activation name; expected PerTensor(), "
            "PerChannel(axis=0) (per token) or PerChannel(axis=1) (per feature)"
        )


_GRANULARITY: dict[ActivationGranularity, Granularity] = {
    ActivationGranularity.PER_TENSOR: PerTensor(),
    ActivationGranularity.PER_TOKEN: PerChannel(axis=0),
    ActivationGranularity.PER_FEATURE: PerChannel(axis=1),
}
_LABEL: dict[ActivationGranularity, str] = {
    ActivationGranularity.PER_TENSOR: "per-tensor",
    ActivationGranularity.PER_TOKEN: "per-token (one scale per row)",
    ActivationGranularity.PER_FEATURE: "per-channel (per feature)",
}


def check_activation(x: object, name: str = "x") -> torch.Tensor:
    """``x`` if it is a finite float ``[tokens, features]`` matrix; ``TypeError`` /
    ``ValueError`` naming its type, dtype or shape otherwise."""
    x = check_float_tensor(x, name)
    if x.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D [tokens, features] activation, got shape {tuple(x.shape)}"
        )
    return x


def feature_absmax(x: torch.Tensor) -> torch.Tensor:
    """Per-feature ``max_t |x[t, j]|`` of a ``[tokens, features]`` activation: float32
    ``[features]``. The outlier strip: a few features far above the rest are what wrecks
    per-tensor int8 (LLM.int8, SmoothQuant)."""
    x = check_activation(x)
    return x.detach().abs().amax(dim=0).to(torch.float32)


def outlier_features(x: torch.Tensor, *, factor: float = 6.0) -> torch.Tensor:
    """Indices (int64, ascending) of the features whose ``max|x_j|`` exceeds ``factor``
    times the median over features of ``max|x_j|``: the outliers of ``x``.

    ``factor`` must be a number > 1 (``ValueError``/``TypeError`` otherwise).
    """
    if isinstance(factor, bool) or not isinstance(factor, int | float):
        raise TypeError(f"factor must be a number, got {factor!r}")
    if not factor > 1.0:
        raise ValueError(f"factor={factor} must be > 1")
    amax = feature_absmax(x)
    return (amax > factor * amax.median()).nonzero().reshape(-1)


@dataclass(frozen=True, eq=False)
class ActivationCapture:
    """The inputs of linear layers recorded while a model ran.

    ``inputs``: layer name (as in ``named_modules()``) -> ``[tokens, in_features]`` float32
    on the CPU, padding tokens removed, in module order. Layers fed the same tensor (the
    query, key and value of one attention block) share one tensor: treat them as read-only.
    ``seconds``: wall time of the capture (the model's run included).
    """

    inputs: Mapping[str, torch.Tensor]
    seconds: float

    @property
    def nbytes(self) -> int:
        """Bytes held, a tensor shared by several layers counted once."""
        seen: dict[int, int] = {}
        for x in self.inputs.values():
            seen[x.untyped_storage().data_ptr()] = x.untyped_storage().nbytes()
        return sum(seen.values())

    @property
    def layer_names(self) -> tuple[str, ...]:
        return tuple(self.inputs)

    def __getitem__(self, name: str) -> torch.Tensor:
        """``inputs[name]``; a ``KeyError`` lists the captured layers."""
        try:
            return self.inputs[name]
        except KeyError:
            raise KeyError(
                f"no captured input for layer {name!r}; captured: {', '.join(self.inputs)}"
            ) from None


def linear_layer_names(module: nn.Module, layers: Collection[str] | None = None) -> list[str]:
    """Names (``named_modules()`` order) of the ``nn.Linear`` layers of ``module``: all of
    them, or those in ``layers``.

    Raises ``TypeError`` for a ``module`` that is not an ``nn.Module`` or ``layers`` that is
    a bare string, and ``ValueError`` naming a layer that does not exist or is not an
    ``nn.Linear``, or when ``module`` has no linear layer at all.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    modules = dict(module.named_modules())
    linear = [n for n, m in modules.items() if isinstance(m, nn.Linear)]
    if layers is None:
        if not linear:
            raise ValueError(f"{type(module).__name__} has no nn.Linear layer to capture")
        return linear
    if isinstance(layers, str) or not isinstance(layers, Collection):
        raise TypeError(
            f"layers must be a collection of layer names (not a bare string), got {layers!r}"
        )
    wanted = set()
    for name in layers:
        if name not in modules:
            raise ValueError(f"module has no layer named {name!r}")
        if not isinstance(modules[name], nn.Linear):
            raise ValueError(
                f"layer {name!r} is a {type(modules[name]).__name__}, not an nn.Linear"
            )
        wanted.add(name)
    if not wanted:
        raise ValueError("layers is empty; name at least one nn.Linear layer")
    return [n for n in linear if n in wanted]


class LinearInputRecorder:
    """Forward pre-hooks that record the inputs of named ``nn.Linear`` layers.

    The building block of ``capture_linear_inputs``: install, run the model any number of
    times (setting ``token_mask`` before each batch), ``remove()``, then ``result()``.
    ``token_mask`` (bool ``[batch, seq]`` or ``None``): a 3-D input ``[batch, seq, F]``
    keeps the rows where it is true; without it every row is kept. A 2-D input ``[n, F]``
    is kept whole, a 1-D one as one row.
    """

    def __init__(self, module: nn.Module, names: list[str]) -> None:
        self.token_mask: torch.Tensor | None = None
        self._names = names
        self._pieces: dict[str, list[torch.Tensor]] = {n: [] for n in names}
        self._last_in: torch.Tensor | None = None
        self._last_out: torch.Tensor | None = None
        self._handles = [
            module.get_submodule(n).register_forward_pre_hook(self._hook(n), with_kwargs=True)
            for n in names
        ]
        self._start = time.perf_counter()
        self._seconds: float | None = None

    def _rows(self, x: torch.Tensor) -> torch.Tensor:
        """The rows of ``x`` to keep, as a new float32 CPU ``[tokens, F]`` tensor."""
        mask = self.token_mask
        if x.dim() == 3 and mask is not None:
            if tuple(mask.shape) != tuple(x.shape[:2]):
                raise ValueError(
                    f"token_mask shape {tuple(mask.shape)} does not match the "
                    f"[batch, seq] of the layer input {tuple(x.shape)}"
                )
            # boolean indexing copies; .to() copies again only for another device/dtype
            return x[mask.to(x.device)].to(device="cpu", dtype=torch.float32)
        return x.reshape(-1, x.shape[-1]).to(device="cpu", dtype=torch.float32, copy=True)

    def _hook(self, name: str) -> Callable[..., None]:
        def hook(mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            x = args[0] if args else kwargs["input"]
            if x is self._last_in:  # q, k and v see one tensor: record it once
                rows = self._last_out
            else:
                # Outside inference mode the copy is an ordinary tensor, usable later in
                # in-place ops (an inference tensor is not).
                with torch.inference_mode(False):
                    rows = self._rows(x.detach())
                self._last_in, self._last_out = x, rows
            self._pieces[name].append(rows)

        return hook

    def remove(self) -> None:
        """Remove every hook (idempotent) and stop the clock."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._last_in = self._last_out = None
        if self._seconds is None:
            self._seconds = time.perf_counter() - self._start

    def result(self) -> ActivationCapture:
        """The capture: each layer's recorded rows, joined over runs in call order.

        Raises ``ValueError`` naming the layers that never ran."""
        self.remove()
        missing = [n for n in self._names if not self._pieces[n]]
        if missing:
            raise ValueError(f"layer(s) never ran, so nothing was captured: {missing}")
        joined: dict[tuple[int, ...], torch.Tensor] = {}
        inputs: dict[str, torch.Tensor] = {}
        for name in self._names:
            pieces = self._pieces[name]
            key = tuple(id(p) for p in pieces)
            if key not in joined:  # layers that saw the same tensors share one result
                joined[key] = pieces[0] if len(pieces) == 1 else torch.cat(pieces)
            inputs[name] = joined[key]
        seconds = self._seconds if self._seconds is not None else 0.0
        return ActivationCapture(inputs=MappingProxyType(inputs), seconds=seconds)


def capture_linear_inputs(
    module: nn.Module,
    run: Callable[[], object],
    *,
    token_mask: torch.Tensor | None = None,
    layers: Collection[str] | None = None,
) -> ActivationCapture:
    """Record the input of every ``nn.Linear`` of ``module`` (or the named ``layers``)
    while ``run()`` executes, with forward pre-hooks removed afterwards (also on error).

    ``token_mask`` (bool or 0/1 integer ``[batch, seq]``, e.g. an attention mask): a 3-D
    input ``[batch, seq, F]`` keeps only the tokens where it is true, giving
    ``[n_real_tokens, F]``; a 2-D input (MiniLM's pooler sees one ``[CLS]`` vector per
    sentence) is kept whole. A layer that runs several times gets its inputs joined in
    call order. ``run`` is called as is: wrap it in ``torch.inference_mode()`` yourself.

    Raises ``TypeError`` for a non-module, a non-callable ``run`` or a ``token_mask`` that
    is not a bool/integer tensor, ``ValueError`` for a ``token_mask`` that is not 2-D or
    does not match a layer's input, unknown or non-linear ``layers``, and layers that never
    ran.
    """
    names = linear_layer_names(module, layers)
    if not callable(run):
        raise TypeError(f"run must be a callable taking no arguments, got {type(run).__name__}")
    mask = None
    if token_mask is not None:
        if not isinstance(token_mask, torch.Tensor):
            raise TypeError(f"token_mask must be a torch.Tensor, got {type(token_mask).__name__}")
        if token_mask.dtype.is_floating_point or token_mask.dtype.is_complex:
            raise TypeError(f"token_mask must be a bool or integer tensor, got {token_mask.dtype}")
        if token_mask.dim() != 2:
            raise ValueError(
                f"token_mask must be 2-D [batch, seq], got shape {tuple(token_mask.shape)}"
            )
        mask = token_mask.bool()
    recorder = LinearInputRecorder(module, names)
    recorder.token_mask = mask
    try:
        run()
    finally:
        recorder.remove()
    return recorder.result()


# --- Static and dynamic ranges --------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ActivationRanges:
    """Static activation ranges calibrated on ``n_tokens`` tokens of ``n_features``
    features under ``config`` (per-tensor or per-feature).

    ``ranges``: ``lo``/``hi`` of shape ``[1, 1]`` (per tensor) or ``[n_features, 1]`` (per
    feature), what ``quantize(..., ranges=...)`` takes; under a symmetric config
    ``lo = -hi``.
    """

    config: QuantConfig
    ranges: BlockRange
    n_features: int
    n_tokens: int

    @property
    def granularity(self) -> ActivationGranularity:
        return ActivationGranularity.of(self.config.granularity)


def _check_config(cfg: object) -> QuantConfig:
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    return cfg


def calibrate_ranges(x: torch.Tensor, cfg: QuantConfig) -> ActivationRanges:
    """Static ranges of ``cfg`` chosen on the calibration activation ``x`` ``[tokens, F]``:
    per block, the range ``quantize(x, cfg)`` fits its grid to (min-max, percentile or MSE,
    as ``cfg.range_method`` says).

    Raises ``ValueError`` for a per-token (or per-group) ``cfg``: those ranges belong to
    the calibration tokens themselves, and a held-out sentence has other tokens.
    """
    x = check_activation(x)
    cfg = _check_config(cfg)
    gran = ActivationGranularity.of(cfg.granularity)
    if not gran.allows_static:
        raise ValueError(
            f"static ranges must be per-tensor or per-feature, not {gran.label} "
            f"({cfg.granularity!r}): a held-out sentence has other tokens, so per-token "
            "ranges are always dynamic"
        )
    qt = quantize(x, cfg)
    if qt.chosen_range is None:  # quantize always sets it; keep the type checker honest
        raise ValueError(f"quantize chose no range for {cfg.describe()}")
    return ActivationRanges(
        config=cfg, ranges=qt.chosen_range, n_features=int(x.shape[1]), n_tokens=int(x.shape[0])
    )


def calibrate_layer_ranges(
    capture: ActivationCapture, cfg: QuantConfig
) -> dict[str, ActivationRanges]:
    """``calibrate_ranges`` for every layer of ``capture`` (layers sharing one input share
    one result), for ``fake_quantize_linears`` / ``model_output_report``."""
    if not isinstance(capture, ActivationCapture):
        raise TypeError(f"capture must be an ActivationCapture, got {type(capture).__name__}")
    done: dict[int, ActivationRanges] = {}
    out = {}
    for name, x in capture.inputs.items():
        if id(x) not in done:
            done[id(x)] = calibrate_ranges(x, cfg)
        out[name] = done[id(x)]
    return out


def quantize_activation(
    x: torch.Tensor, cfg: QuantConfig, ranges: ActivationRanges | None = None
) -> QuantizedTensor:
    """Quantize the activation ``x`` ``[tokens, F]`` under ``cfg``: with dynamic ranges
    (chosen from ``x`` itself) when ``ranges`` is ``None``, else with the static
    ``ranges`` (values beyond them clip; ``clip_stats`` counts them).

    Raises ``ValueError`` when ``ranges`` was calibrated under another config or for
    another number of features.
    """
    x = check_activation(x)
    cfg = _check_config(cfg)
    if ranges is None:
        return quantize(x, cfg)
    if not isinstance(ranges, ActivationRanges):
        raise TypeError(f"ranges must be ActivationRanges, got {type(ranges).__name__}")
    if ranges.config != cfg:
        raise ValueError(
            f"ranges were calibrated under {ranges.config.describe()}, not {cfg.describe()}"
        )
    if ranges.n_features != x.shape[1]:
        raise ValueError(
            f"ranges were calibrated on {ranges.n_features} features; x has {x.shape[1]} "
            f"(shape {tuple(x.shape)})"
        )
    return quantize(x, cfg, ranges=ranges.ranges)


@dataclass(frozen=True, eq=False)
class ActivationQuant:
    """One activation quantized: its codes, the error of its dequantized values and how
    many values clipped."""

    quantized: QuantizedTensor
    metrics: ErrorMetrics
    clip: ClipStats

    @property
    def clipped_fraction(self) -> float:
        return self.clip.n_clipped / self.clip.n_elements


@dataclass(frozen=True, eq=False)
class RangeComparison:
    """The same activation under dynamic ranges (its own) and static ranges (calibrated on
    other tokens)."""

    dynamic: ActivationQuant
    static: ActivationQuant
    ranges: ActivationRanges


def _measure(x: torch.Tensor, qt: QuantizedTensor) -> ActivationQuant:
    return ActivationQuant(qt, error_metrics(x, qt.dequantize()), clip_stats(x, qt))


def compare_static_dynamic(
    x: torch.Tensor,
    cfg: QuantConfig,
    *,
    calibration: torch.Tensor | None = None,
    ranges: ActivationRanges | None = None,
) -> RangeComparison:
    """``x`` ``[tokens, F]`` quantized under ``cfg`` with dynamic ranges (its own) and with
    static ranges: calibrated on ``calibration`` ``[tokens', F]`` (other tokens of the same
    layer), or the given ``ranges``; pass exactly one of the two. Metrics and clipping side
    by side.

    Raises as ``calibrate_ranges`` (a per-token ``cfg``) and ``quantize_activation``.
    """
    x = check_activation(x)
    if (calibration is None) == (ranges is None):
        raise ValueError("pass exactly one of calibration (to calibrate on) and ranges")
    if ranges is None:
        calibration = check_activation(calibration, "calibration")
        if calibration.shape[1] != x.shape[1]:
            raise ValueError(
                f"calibration has {calibration.shape[1]} features and x {x.shape[1]}: "
                "static ranges apply to the same layer's inputs"
            )
        ranges = calibrate_ranges(calibration, cfg)
    dynamic = _measure(x, quantize_activation(x, cfg))
    static = _measure(x, quantize_activation(x, cfg, ranges))
    return RangeComparison(dynamic=dynamic, static=static, ranges=ranges)
