"""Quantize every ``nn.Linear`` of a model and report what it cost, layer by layer."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from .config import QuantConfig
from .formats.scales import StoredScales
from .granularity import BlockLayout
from .metrics import ErrorMetrics, error_metrics
from .quantize import QuantizedTensor, quantize
from .storage import StorageReport, storage_cost

__all__ = ["LayerReport", "ModelReport", "QuantizedLinear", "quantize_model", "report_tensor"]


@dataclass(frozen=True)
class LayerReport:
    """One weight's quantization: its name, shape, error metrics and storage."""

    name: str
    shape: tuple[int, ...]
    metrics: ErrorMetrics
    storage: StorageReport

    @property
    def bits_per_element(self) -> float:
        return self.storage.bits_per_element


@dataclass(frozen=True)
class ModelReport:
    """Per-layer reports, in module order, and the weights' bytes before and after."""

    layers: tuple[LayerReport, ...]

    @property
    def fp32_bytes(self) -> int:
        return sum(layer.storage.fp32_bytes for layer in self.layers)

    @property
    def quantized_bytes(self) -> int:
        return sum(layer.storage.total_bytes for layer in self.layers)


def report_tensor(name: str, w: torch.Tensor, qt: QuantizedTensor) -> LayerReport:
    """The ``LayerReport`` of ``w`` quantized as ``qt``."""
    return LayerReport(
        name=name,
        shape=tuple(w.shape),
        metrics=error_metrics(w.detach(), qt.dequantize()),
        storage=storage_cost(tuple(w.shape), qt.config),
    )


_STORED_FIELDS = ("codes", "min_codes", "super_scale", "super_min")
"""``StoredScales``' tensors, kept as buffers ``stored_<field>``."""


class QuantizedLinear(nn.Module):
    """A linear layer whose weight is stored as codes + scales (+ zero points).

    The weight ``[out, in]`` is dequantized in ``forward`` (``W_hat = s (q - z) + m``, see
    ``QuantizedTensor``) and applied as ``x @ W_hat.T + b``; buffers (``offset`` is ``None``
    but under ``ZeroPoint.FLOAT_MIN``; the ``stored_*`` ones, a two-level format's
    ``StoredScales``, ``None`` for one-level formats) move with ``.to(device)``.
    """

    codes: torch.Tensor
    scale: torch.Tensor
    zero_point: torch.Tensor
    offset: torch.Tensor | None

    def __init__(self, qt: QuantizedTensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.out_features, self.in_features = qt.shape
        self.config = qt.config
        self._layout: BlockLayout = qt.layout
        self._input_dtype = qt.input_dtype
        self.register_buffer("codes", qt.codes)
        self.register_buffer("scale", qt.scale)
        # dense: a format's expanded zero (one zero, stride 0) cannot take load_state_dict's copy_
        self.register_buffer("zero_point", qt.zero_point.contiguous())
        self.register_buffer("offset", qt.offset)
        # a two-level format's dequantize checks its scales against the stored second level
        stored = qt.stored
        self._two_level = stored is not None
        for name in _STORED_FIELDS:
            self.register_buffer(f"stored_{name}", getattr(stored, name, None))
        self.bias = (
            nn.Parameter(bias.detach().clone(), requires_grad=False) if bias is not None else None
        )

    @classmethod
    def from_linear(cls, linear: nn.Linear, cfg: QuantConfig) -> QuantizedLinear:
        return cls(quantize(linear.weight.detach(), cfg), linear.bias)

    def quantized_weight(self) -> QuantizedTensor:
        return QuantizedTensor(
            self.codes,
            self.scale,
            self.zero_point,
            self.config,
            self._layout,
            self._input_dtype,
            offset=self.offset,
            stored=self._stored(),
        )

    def _stored(self) -> StoredScales | None:
        if not self._two_level:
            return None
        return StoredScales(**{name: getattr(self, f"stored_{name}") for name in _STORED_FIELDS})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.quantized_weight().dequantize().to(x.dtype)
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, w, bias)

    def extra_repr(self) -> str:
        cfg = self.config.describe()
        return f"in_features={self.in_features}, out_features={self.out_features}, {cfg}"


def quantize_model(module: nn.Module, cfg: QuantConfig) -> ModelReport:
    """Replace every ``nn.Linear`` in ``module`` (in place) by a ``QuantizedLinear``.

    Returns the per-layer report in module order. A linear layer reachable under several
    names (a shared module) is quantized once, reported under its first name, and replaced
    everywhere. Raises ``ValueError`` naming the layer when ``cfg`` does not fit a weight
    (e.g. a group size that does not divide ``in``), and when ``module`` is itself an
    ``nn.Linear``, which cannot replace itself: wrap it (``nn.Sequential(linear)``). On an
    error the model is left unchanged.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    if isinstance(module, nn.Linear):
        raise ValueError(
            "module is itself an nn.Linear and cannot be replaced in place; "
            "pass a container such as nn.Sequential(linear)"
        )
    targets = [
        (n, m) for n, m in module.named_modules(remove_duplicate=False) if isinstance(m, nn.Linear)
    ]
    reports = []
    replaced: dict[int, QuantizedLinear] = {}
    for name, linear in targets:  # quantize everything first: an error changes nothing
        if id(linear) not in replaced:
            w = linear.weight.detach()
            try:
                qt = quantize(w, cfg)
            except ValueError as exc:
                raise ValueError(f"layer {name!r} (weight {tuple(w.shape)}): {exc}") from exc
            reports.append(report_tensor(name, w, qt))
            replaced[id(linear)] = QuantizedLinear(qt, linear.bias)
    for name, linear in targets:
        _set_submodule(module, name, replaced[id(linear)])
    return ModelReport(layers=tuple(reports))


def _set_submodule(root: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, new)
