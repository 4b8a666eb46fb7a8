"""Run a module's linear layers on fake-quantized inputs (and weights) until removed.

``fake_quantize_linears`` installs, on every ``nn.Linear`` of a module (or the named ones),
a forward pre-hook that replaces the layer's input ``X`` by ``X_hat = dequantize(quantize(X))``
on the fly, and optionally swaps its weight for the dequantized ``W_hat``; ``remove()`` (or
leaving the ``with`` block) restores the module exactly. A 3-D input ``[batch, seq, F]`` is
quantized on its real tokens only (``token_mask``), so padding never widens a range.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from types import TracebackType
from typing import Any

import torch
from torch import nn

from .activations import ActivationRanges, quantize_activation
from .capture import linear_layer_names
from .config import QuantConfig
from .linear_eval import LayerScheme, SchemePreset, linear_layer
from .quantize import QuantizedTensor, quantize

__all__ = [
    "FakeQuantLinears",
    "as_layer_scheme",
    "check_layer_ranges",
    "fake_quantize_linears",
    "quantized_layer_weight",
]


def as_layer_scheme(scheme: object) -> LayerScheme:
    if isinstance(scheme, SchemePreset):
        return scheme.scheme
    if not isinstance(scheme, LayerScheme):
        raise TypeError(f"scheme must be a LayerScheme or SchemePreset, got {scheme!r}")
    return scheme


def check_layer_ranges(
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
    scheme = as_layer_scheme(scheme)
    names = linear_layer_names(module, layers)
    ranges = check_layer_ranges(activation_ranges, names, scheme)
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
            weights[name] = quantized_layer_weight(name, linear, scheme.weight).dequantize()
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ValueError(f"dequantized_weights names layers that are not quantized: {unknown}")
    return FakeQuantLinears(module, names, scheme, ranges, weights)


def quantized_layer_weight(name: str, linear: nn.Linear, cfg: QuantConfig) -> QuantizedTensor:
    w = linear.weight.detach()
    try:
        return quantize(w, cfg)
    except ValueError as exc:
        raise ValueError(f"layer {name!r} (weight {tuple(w.shape)}): {exc}") from exc
