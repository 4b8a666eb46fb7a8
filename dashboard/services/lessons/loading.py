"""Loading quantized weights back: the explorer's ``.safetensors`` export written and read
again. The one place the lessons use the export's reader (which may move into quant_core),
so a change of home is a change here."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from safetensors.torch import load

from quant_core import QuantizedTensor

from ..explorer.explore import Exploration
from ..explorer.exports import quantized_safetensors, read_quantized_safetensors

__all__ = ["RoundTrip", "StoredTensor", "round_trip"]


@dataclass(frozen=True)
class StoredTensor:
    """One tensor of the file: its ``name``, ``dtype``, ``shape`` and ``nbytes``."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


@dataclass(frozen=True, eq=False)
class RoundTrip:
    """``file_bytes``: the whole file; ``tensors``: what it holds; ``loaded``: the
    ``QuantizedTensor`` read back; ``same_codes`` / ``same_values``: whether its codes and
    its dequantized values equal those before saving, bit for bit."""

    file_bytes: int
    tensors: tuple[StoredTensor, ...]
    loaded: QuantizedTensor
    same_codes: bool
    same_values: bool

    @property
    def tensor_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


def round_trip(exp: Exploration) -> RoundTrip:
    """Save ``exp``'s quantized tensor as the explorer's export does and load it back."""
    data = quantized_safetensors(exp)
    stored = load(data)
    loaded = read_quantized_safetensors(data)
    tensors = tuple(
        StoredTensor(
            name,
            str(t.dtype).removeprefix("torch."),
            tuple(t.shape),
            t.numel() * t.element_size(),
        )
        for name, t in stored.items()
    )
    before = exp.qt
    return RoundTrip(
        file_bytes=len(data),
        tensors=tensors,
        loaded=loaded,
        same_codes=torch.equal(loaded.codes.to(torch.int32), before.codes.to(torch.int32)),
        same_values=torch.equal(loaded.dequantize(), before.dequantize()),
    )
