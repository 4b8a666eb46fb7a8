"""A checkpoint as its headers describe it: the shards, every tensor (name, shape, dtype,
shard) and which tensors the per-layer report quantizes. ``folder.open_checkpoint`` builds
one from a model folder; ``streaming`` reads its tensors one at a time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..io import LoadedTensor, LoadError, TensorInfo, load_safetensors_file_tensor
from .files import is_linear_weight, stored_bytes

__all__ = [
    "INDEX_NAME",
    "LISTING_COLUMNS",
    "SINGLE_NAME",
    "Checkpoint",
    "CheckpointError",
    "CheckpointTensor",
    "Shard",
    "listing_table",
    "read_tensor",
]

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


class CheckpointError(LoadError):
    """A model folder that cannot be used; ``str(err)`` is the message to show."""


@dataclass(frozen=True)
class CheckpointTensor:
    """One tensor as its shard's header lists it: ``info`` (name, shape, dtype in torch's
    spelling) and ``shard``, the file's name inside the folder."""

    info: TensorInfo
    shard: str

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def stored_bytes(self) -> int | None:
        """Bytes the tensor takes in its shard, for float dtypes; ``None`` for others."""
        return stored_bytes(self.info)

    @property
    def is_linear_weight(self) -> bool:
        """``files.is_linear_weight``: a 2-D float ``*.weight`` outside embeddings/norms."""
        return is_linear_weight(self.info.name, self.info.shape, self.info.dtype)


@dataclass(frozen=True)
class Shard:
    """One ``.safetensors`` file of a checkpoint: its name in the folder, size in bytes,
    modification time (ns) and how many tensors its header lists."""

    name: str
    size: int
    mtime_ns: int
    tensors: int


@dataclass(frozen=True)
class Checkpoint:
    """A model folder whose headers have been read and cross-checked.

    ``folder``: resolved; ``shards``: in natural name order (``-00002-`` before
    ``-00010-``); ``tensors``: shard by shard, each shard's in natural name order;
    ``index``: the index file's name, ``None`` for one file; ``notes``: what was ignored,
    one sentence each."""

    folder: Path
    shards: tuple[Shard, ...]
    tensors: tuple[CheckpointTensor, ...]
    index: str | None
    notes: tuple[str, ...] = ()

    def tensor(self, name: str) -> CheckpointTensor:
        """The tensor called ``name``; ``CheckpointError`` naming it when there is none."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise CheckpointError(f"{self.folder.name}: no tensor named {name!r} in its headers")

    def shard_path(self, shard: str) -> Path:
        """The path of shard file ``shard``; ``ValueError`` for a name not in ``shards``."""
        if shard not in {s.name for s in self.shards}:
            raise ValueError(f"{shard!r} is not a shard of {self.folder}")
        return self.folder / shard

    @property
    def linear_weights(self) -> tuple[CheckpointTensor, ...]:
        """The tensors the whole-model report quantizes (``files.is_linear_weight``)."""
        return tuple(t for t in self.tensors if t.is_linear_weight)

    @property
    def stored_bytes(self) -> int:
        """The shards' total size in bytes (headers included)."""
        return sum(s.size for s in self.shards)

    @property
    def largest_weight(self) -> CheckpointTensor | None:
        """The linear weight with the most elements (the report's memory is bounded by this
        one tensor, not by the model); ``None`` when there is none."""
        return max(self.linear_weights, key=lambda t: t.info.numel, default=None)

    @property
    def key(self) -> str:
        """Identifies this folder's content for caches: the folder and every shard's name,
        size and modification time (a rewritten shard gives a new key)."""
        parts = [str(self.folder)] + [f"{s.name}:{s.size}:{s.mtime_ns}" for s in self.shards]
        return "|".join(parts)


def read_tensor(checkpoint: Checkpoint, name: str) -> LoadedTensor:
    """One tensor of ``checkpoint``, read alone from its shard under the explorer's limits
    (``io.DEFAULT_LIMITS``: checked from the header before anything is allocated), as the
    explorer takes it (bf16/fp16 widened to float32 exactly, said in ``notes``).
    ``CheckpointError`` for an unknown name; ``LoadError`` for a tensor over the limits or
    a shard that changed since its header was read."""
    t = checkpoint.tensor(name)
    return load_safetensors_file_tensor(checkpoint.shard_path(t.shard), name)


# ---------------------------------------------------------------------------------------
# What the page shows

LISTING_COLUMNS = ("name", "shape", "dtype", "shard", "bytes", "report")


def listing_table(checkpoint: Checkpoint) -> pd.DataFrame:
    """Every tensor of ``checkpoint`` from its headers, one row each in checkpoint order:
    ``LISTING_COLUMNS`` (``shape`` such as ``"4096×11008"``; ``bytes`` as stored, ``None``
    for non-float dtypes; ``report``: whether the per-layer report quantizes it)."""
    rows = [
        {
            "name": t.name,
            "shape": "×".join(str(d) for d in t.info.shape),
            "dtype": t.info.dtype,
            "shard": t.shard,
            "bytes": t.stored_bytes,
            "report": t.is_linear_weight,
        }
        for t in checkpoint.tensors
    ]
    return pd.DataFrame(rows, columns=list(LISTING_COLUMNS))
