"""What a quantized file holds, as the reader reports it: the file's kind, one entry per
tensor (from the headers), and a loaded tensor.

A tensor of a Hugging Face quantized folder is stored as several tensors (GPTQ's
``qweight``, ``qzeros``, ``scales``, ``g_idx``); the reader lists it once, under the name
the original weight has (``model.layers.0.mlp.down_proj.weight``), with the bytes of all
its parts, so it matches the original by name.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch

from ..quantized_tensor import QuantizedTensor

__all__ = ["FileKind", "StoredTensor", "TensorEntry", "TypeShare"]


class FileKind(enum.Enum):
    """Which writer's layout a file or folder has."""

    GGUF = "gguf"
    GPTQ = "gptq"
    AWQ = "awq"
    COMPRESSED_TENSORS = "compressed-tensors"
    BITSANDBYTES = "bitsandbytes"
    LAB_EXPORT = "lab-export"
    SAFETENSORS = "safetensors"

    @property
    def label(self) -> str:
        return _KIND_LABELS[self]


_KIND_LABELS = {
    FileKind.GGUF: "GGUF (llama.cpp)",
    FileKind.GPTQ: "GPTQ (AutoGPTQ / GPTQModel)",
    FileKind.AWQ: "AWQ (AutoAWQ GEMM)",
    FileKind.COMPRESSED_TENSORS: "compressed-tensors pack-quantized (llm-compressor)",
    FileKind.BITSANDBYTES: "bitsandbytes 4-bit (transformers)",
    FileKind.LAB_EXPORT: "Quantization Lab export",
    FileKind.SAFETENSORS: "safetensors (not quantized)",
}


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a file, from its headers.

    ``name``: as the file names it (a Hugging Face folder: the original weight's name).
    ``type_name``: the stored type (``"Q4_K"``, ``"F16"``, ``"GPTQ int4 g128"``, ``"NF4 +
    double quant"``). ``shape``: the tensor's shape in PyTorch's order (GGUF lists its
    dimensions innermost first; they are reversed here). ``nbytes``: every byte the file
    spends on it, all parts counted (GPTQ's ``g_idx`` too). ``file``: the file holding it
    (its first part). ``quantized``: stored as codes and scales. ``original_names``: for
    GGUF, the Hugging Face names its tensor may come from (``gguf.TensorNameMap``, most
    likely first). ``parts``: the stored tensors it is made of (Hugging Face folders).
    """

    name: str
    type_name: str
    shape: tuple[int, ...]
    nbytes: int
    file: str
    quantized: bool
    original_names: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def bits_per_weight(self) -> float:
        """What the file really spends: ``8 * nbytes / numel`` (0 for an empty tensor)."""
        n = self.numel
        return 8 * self.nbytes / n if n else 0.0


@dataclass(frozen=True)
class TypeShare:
    """The tensors of one stored type in a file (the "mix" of a Q4_K_M file): ``tensors``
    of them, ``elements`` values in ``nbytes`` bytes."""

    type_name: str
    tensors: int
    elements: int
    nbytes: int

    @property
    def bits_per_weight(self) -> float:
        return 8 * self.nbytes / self.elements if self.elements else 0.0


@dataclass(frozen=True, eq=False)
class StoredTensor:
    """One tensor loaded from a file.

    ``quantized``: the lab's ``QuantizedTensor`` of what is stored (codes, scales, zero
    points or mins as the file holds them, the second level of two-level formats), or
    ``None`` for a type the lab does not model (the IQ2/IQ3/IQ1 lattice types,
    bitsandbytes FP4) or a float tensor: ``values`` then holds the values (float32, the
    entry's shape), decoded by the format's own reference (``gguf.quants.dequantize``).

    ``column_order``: ``None``, or for an act-order checkpoint (GPTQ ``desc_act``,
    compressed-tensors ``actorder``), whose groups are not runs of consecutive columns:
    ``quantized`` then holds the matrix with its columns permuted so that every group is a
    run of ``group_size`` consecutive columns (the lab's ``PerGroup`` layout), and
    ``column_order[k]`` is the file's column that permuted column ``k`` holds (int64,
    ``[in_features]``, groups in ascending order, columns ascending inside a group).
    ``dequantize()`` puts the columns back.

    ``notes``: one sentence per interpretation the reader made (a convention assumed, a
    decoder used).
    """

    entry: TensorEntry
    quantized: QuantizedTensor | None
    values: torch.Tensor | None = None
    column_order: torch.Tensor | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.quantized is None) == (self.values is None):
            raise ValueError("a StoredTensor holds either quantized or values")
        if self.column_order is not None and self.quantized is None:
            raise ValueError("column_order belongs to a quantized tensor")

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def type_name(self) -> str:
        return self.entry.type_name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.entry.shape

    def dequantize(self) -> torch.Tensor:
        """The values the file stores, float32, in the file's shape and column order."""
        if self.quantized is None:
            return self.values  # type: ignore[return-value]  # set: __post_init__
        values = self.quantized.dequantize()
        if self.column_order is None:
            return values.reshape(self.shape)
        out = torch.empty_like(values)
        out[:, self.column_order] = values
        return out

    def in_stored_order(self, original: torch.Tensor) -> torch.Tensor:
        """``original`` (the file's shape and column order) with its columns in
        ``quantized``'s order: the matrix to compare ``quantized`` with cell by cell."""
        if self.column_order is None:
            return original
        return original[:, self.column_order]
