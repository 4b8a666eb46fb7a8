"""Capture the inputs of ``nn.Linear`` layers while a model runs (forward pre-hooks, no
model code copied), keeping only real (unpadded) tokens.

    cap = capture_linear_inputs(model, lambda: model(**batch), token_mask=attention_mask)
    cap["encoder.layer.0.attention.self.query"]   # [n_real_tokens, in_features] float32

``quant_core.calibration.capture_sentence_inputs`` does it for a SentenceTransformer on a
list of sentences.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

__all__ = [
    "ActivationCapture",
    "LinearInputRecorder",
    "capture_linear_inputs",
    "linear_layer_names",
]


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
