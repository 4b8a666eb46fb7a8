"""Write a sharded ``.safetensors`` checkpoint as Hugging Face does: shard files
``model-00001-of-0000N.safetensors``... and ``model.safetensors.index.json`` mapping every
tensor to its shard, with ``metadata.total_size`` (the tensors' bytes).

Shards come from an iterable and are written one at a time, so writing a model costs the
memory of one shard: the benchmark writes a 1B-parameter checkpoint this way, and the tests
their small ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from safetensors.torch import save_file

from .checkpoint import INDEX_NAME

__all__ = ["shard_name", "write_sharded"]


def shard_name(i: int, n: int, stem: str = "model") -> str:
    """``model-00002-of-00004.safetensors`` for shard ``i`` (from 1) of ``n``."""
    if not 1 <= i <= n:
        raise ValueError(f"shard number {i} is outside 1..{n}")
    return f"{stem}-{i:05d}-of-{n:05d}.safetensors"


def write_sharded(
    folder: str | os.PathLike[str],
    shards: Iterable[Mapping[str, torch.Tensor]],
    n_shards: int,
    stem: str = "model",
) -> Path:
    """Write ``n_shards`` shards (``shards`` yields each one's ``{name: tensor}``) and the
    index into ``folder`` (created if missing); the index's path.

    ``ValueError`` when ``shards`` yields another number of shards than ``n_shards``, or a
    tensor name twice; the files written so far stay (the caller's folder)."""
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ValueError(f"n_shards must be a positive int, got {n_shards!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weight_map: dict[str, str] = {}
    total = 0
    count = 0
    for count, tensors in enumerate(shards, start=1):
        if count > n_shards:
            raise ValueError(f"shards yielded more than n_shards={n_shards} shards")
        name = shard_name(count, n_shards, stem)
        for key, tensor in tensors.items():
            if key in weight_map:
                raise ValueError(f"tensor {key!r} is in {weight_map[key]} and {name}")
            weight_map[key] = name
            total += tensor.numel() * tensor.element_size()
        save_file(dict(tensors), str(folder / name))
    if count != n_shards:
        raise ValueError(f"shards yielded {count} shards, not n_shards={n_shards}")
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    path = folder / INDEX_NAME
    path.write_text(json.dumps(index, indent=2))
    return path
