"""One task of the sensitivity table: a path, a tensor name and the candidate schemes in, the
tensor's rows out. Pure and picklable, so that a worker process or a Ray worker on another
machine runs it as the page's own process would.

The worker checks the path again against the allowed roots it is given (the server's
``QLAB_MODEL_ROOTS``/``model_roots``, resolved on the worker: a shard that links outside
them is refused there too), reads the one tensor with ``io``'s ``.safetensors`` reader
(``safe_open``, the header validated, the size checked against ``FOLDER_LIMITS`` before
anything is read), converts bf16/fp16 to float32 exactly, and measures every candidate
(``quant_core.mixed.measure_tensor``). A tensor over the limits gives rows that say so.
That outline is ``measure_task(reader, task)``; ``run_task`` is it with the
``.safetensors`` reader, and a GGUF's table (``sources.gguf_task``) uses it with its own.
"""

from __future__ import annotations

import math
import os
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from quant_core.mixed import Candidate, SensitivityRow, measure_tensor

from ..io import LoadError, TensorInfo, load_safetensors_file_tensor
from ..io.common import check_size
from ..model.checkpoint import Checkpoint
from ..model.evaluate import working_copy
from ..model.files import stored_bytes
from ..model.roots import ModelRoots, check_inside, resolve_in_roots
from ..model.streaming import FOLDER_LIMITS

__all__ = [
    "SAFETENSORS",
    "ReadTensor",
    "SafetensorsReader",
    "TableTask",
    "TaskResult",
    "TensorReader",
    "is_table_weight",
    "lookup_importance",
    "measure_task",
    "run_task",
    "skipped_rows",
    "table_weight_count",
    "tasks_for",
]

_FLOAT = ("float16", "bfloat16", "float32", "float64")


_EMBEDDING = re.compile(r"(^|\.)(embed[^.]*|token_embd|wte|wpe)(\.|$)", re.IGNORECASE)


def lookup_importance(info: TensorInfo) -> torch.Tensor | None:
    """An embedding table's importance: its output for a token is one row, so with tokens
    drawn uniformly ``E|Δe|² = Σ_ij D_ij² / rows``, i.e. ``a = 1 / rows`` for every column
    (``None`` for a tensor that is not an embedding table). Without it a 30k-row table's
    summed error would count as 30k tokens' worth against a linear layer's one."""
    if not _EMBEDDING.search(info.name) or len(info.shape) != 2:
        return None
    rows, cols = info.shape
    return torch.full((cols,), 1.0 / max(rows, 1), dtype=torch.float64)


def is_table_weight(info: TensorInfo) -> bool:
    """Every 2-D float ``*.weight`` but norms: linear layers, embedding tables and the
    output head (which a mixed recipe must cover: they are often the largest tensors)."""
    parts = info.name.lower().split(".")
    return (
        parts[-1] == "weight"
        and len(info.shape) == 2
        and info.dtype in _FLOAT
        and not any("norm" in p for p in parts[:-1])
    )


def table_weight_count(checkpoint: Checkpoint) -> int:
    """The elements of ``checkpoint``'s table weights (``is_table_weight``; a task each in
    ``tasks_for``), from its headers: nothing is read."""
    return sum(math.prod(t.info.shape) for t in checkpoint.tensors if is_table_weight(t.info))


@dataclass(frozen=True, eq=False)
class TableTask:
    """Measure ``tensor`` (``shape``, ``dtype`` as its header says) of file ``shard`` in
    ``folder`` under ``candidates``. ``roots``: the allowed roots the worker checks the
    file against (empty for a file the server itself chose: the bundled model, an upload).
    ``importance``: ``[in]`` input importance or ``None``; ``held_out``: ``[tokens, in]``
    held-out inputs or ``None``."""

    folder: str
    shard: str
    tensor: str
    shape: tuple[int, ...]
    dtype: str
    candidates: tuple[Candidate, ...]
    roots: tuple[str, ...] = ()
    importance: torch.Tensor | None = None
    held_out: torch.Tensor | None = None

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class TaskResult:
    """A task's rows (candidate order), the seconds its read and all of it took, and
    where it ran (``host:pid``)."""

    tensor: str
    rows: tuple[SensitivityRow, ...]
    read_bytes: int
    read_seconds: float
    seconds: float
    worker: str


def tasks_for(
    checkpoint: Checkpoint,
    candidates: Sequence[Candidate],
    roots: ModelRoots | None,
    importance: dict[str, torch.Tensor] | None = None,
    held_out: dict[str, torch.Tensor] | None = None,
) -> tuple[TableTask, ...]:
    """One task per table weight of ``checkpoint`` (checkpoint order). ``roots``: ``None``
    for a file the server chose itself; ``importance``: by weight name (an embedding table
    without one gets ``lookup_importance``); ``held_out``: by layer name."""
    root_text = tuple(str(r) for r in roots.roots) if roots is not None else ()
    cands = tuple(candidates)
    out = []
    for t in checkpoint.tensors:
        if not is_table_weight(t.info):
            continue
        layer = t.name.removesuffix(".weight")
        out.append(
            TableTask(
                folder=str(checkpoint.folder),
                shard=t.shard,
                tensor=t.name,
                shape=t.info.shape,
                dtype=t.info.dtype,
                candidates=cands,
                roots=root_text,
                importance=(importance or {}).get(t.name, lookup_importance(t.info)),
                held_out=(held_out or {}).get(layer),
            )
        )
    return tuple(out)


def skipped_rows(task: TableTask, reason: str) -> tuple[SensitivityRow, ...]:
    """A skipped row per candidate (``reason``): the tensor is kept as stored, at its
    stored size, and the table goes on."""
    nan = float("nan")
    bits = (stored_bytes(TensorInfo(task.tensor, task.shape, task.dtype)) or 0) * 8
    return tuple(
        SensitivityRow(
            task.tensor, c.name, task.shape, bits, 0, nan, nan, nan, nan, nan,
            task.importance is not None, None, reason, 0.0,
        )
        for c in task.candidates
    )  # fmt: skip


@dataclass(frozen=True, eq=False)
class ReadTensor:
    """A task's tensor as read: ``values`` float32 ``[*task.shape]``, a copy of its own (out
    of any file map); ``stored_bytes``: what the file spends on it (its rows' stored size)."""

    values: torch.Tensor
    stored_bytes: int


class TensorReader(Protocol):
    """Where a task's tensor comes from (``measure_task``): a ``.safetensors`` shard
    (``SafetensorsReader``) or an opened GGUF (``sources.GgufReader``). Picklable, so that a
    task function made of one (``functools.partial(measure_task, reader)``) ships to a
    worker process."""

    def bytes_per_element(self, task: TableTask) -> int:
        """The bytes per element the read holds: the size check before it (``check_size``
        against ``FOLDER_LIMITS``) counts these."""
        ...

    def read(self, task: TableTask, path: Path) -> ReadTensor:
        """The tensor; ``path``: the task's file, checked against the task's roots.
        ``LoadError`` when it cannot be read."""
        ...


@dataclass(frozen=True)
class SafetensorsReader:
    """The task's tensor from its ``.safetensors`` shard (``io``'s reader, the header
    validated), bf16/fp16 converted to float32 exactly; its stored bytes from its header's
    dtype and shape."""

    def bytes_per_element(self, task: TableTask) -> int:
        return getattr(torch, task.dtype).itemsize

    def read(self, task: TableTask, path: Path) -> ReadTensor:
        mapped = load_safetensors_file_tensor(path, task.tensor, FOLDER_LIMITS).tensor
        if tuple(mapped.shape) != task.shape:
            raise LoadError(
                f"{task.shard} changed since it was listed: {task.tensor!r} is now "
                f"{list(mapped.shape)}, was {list(task.shape)}"
            )
        w = working_copy(mapped)
        w = mapped.clone() if w is mapped else w  # out of the file's map: it is read now
        del mapped
        nbytes = stored_bytes(TensorInfo(task.tensor, task.shape, task.dtype)) or 0
        return ReadTensor(w, nbytes)


def measure_task(reader: TensorReader, task: TableTask) -> TaskResult:
    """Read the task's tensor with ``reader`` and measure it (module docstring): the file
    checked against the task's roots first (``PathRefused`` outside them), then the size
    (over ``FOLDER_LIMITS``: a skipped row per candidate, nothing read), then the read
    (``LoadError`` when it fails) and ``measure_tensor`` at the stored size."""
    start = time.perf_counter()
    where = f"{socket.gethostname()}:{os.getpid()}"
    path = Path(task.folder) / task.shard
    if task.roots:
        roots = ModelRoots(tuple(Path(r) for r in task.roots))
        resolve_in_roots(task.folder, roots)
        path = check_inside(path, roots)
    try:
        check_size(task.tensor, task.shape, reader.bytes_per_element(task), FOLDER_LIMITS)
    except LoadError as exc:  # skipped, kept as stored; the table goes on
        rows = skipped_rows(task, f"not read: {exc}")
        return TaskResult(task.tensor, rows, 0, 0.0, time.perf_counter() - start, where)
    got = reader.read(task, path)
    read = time.perf_counter() - start
    rows = measure_tensor(
        task.tensor,
        got.values,
        task.candidates,
        importance=task.importance,
        held_out=task.held_out,
        stored_bits=got.stored_bytes * 8,
    )
    return TaskResult(task.tensor, rows, got.stored_bytes, read, time.perf_counter() - start, where)


SAFETENSORS = SafetensorsReader()


def run_task(task: TableTask) -> TaskResult:
    """``measure_task`` of a ``.safetensors`` shard: the runner's default task function, a
    module-level function so that worker processes and Ray take it by name. ``PathRefused``
    when the file is outside the roots the task carries; ``LoadError`` when it cannot be
    read."""
    return measure_task(SAFETENSORS, task)
