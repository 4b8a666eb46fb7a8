"""What the mixed-precision page measures and judges, besides a model folder: a single
``.safetensors`` file the server chose (the bundled MiniLM, an upload) as a ``Checkpoint``,
a GGUF of float tensors (``gguf_checkpoint``, read by ``gguf_task``),
the bundled model's input importance and held-out inputs, and its sentence embeddings under
a mixed recipe."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from quant_core import QuantConfig
from quant_core.calibration import run_sentences, transformer_of
from quant_core.files import FileKind, QuantizedFile
from quant_core.mixed.causal import fake_quantized

from ..files.open import QuantizedModel
from ..io import LoadError, TensorInfo, list_safetensors_file
from ..model.checkpoint import Checkpoint, CheckpointTensor, Shard
from ..model.streaming import FOLDER_LIMITS
from .tasks import ReadTensor, TableTask, TaskResult, measure_task

__all__ = [
    "EmbeddingJudgement",
    "GgufReader",
    "embedding_judgement",
    "file_checkpoint",
    "gguf_checkpoint",
    "gguf_task",
    "quantized_model_note",
]

_GGUF_FLOATS = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
"""GGUF's float types in torch's spelling (``TensorInfo.dtype``)."""


def quantized_model_note(model: QuantizedModel) -> str:
    """Why the page measures nothing for a file the quantized-file reader opened that
    ``gguf_checkpoint`` does not take (a quantized ``.gguf``, a GPTQ/AWQ/... folder): the
    table quantizes float weights."""
    return (
        f"{model.label} is a quantized file: the table measures each scheme on float weights. "
        "Pick the model's original (unquantized) folder or file to compare schemes."
    )


def gguf_checkpoint(file: QuantizedFile) -> Checkpoint | None:
    """A GGUF with no quantized tensor (``convert_hf_to_gguf``'s output: F32/F16/BF16,
    maybe F64 or integer tensors beside) as a ``Checkpoint`` of its tensors under their
    GGUF names, shapes in PyTorch's order, one "shard" per part; ``None`` for anything else
    (a quantized tensor, another layout). The table takes its 2-D float weights.
    Its tensors are read by ``gguf_task``, not from a folder: the table runs in the
    server's process."""
    if file.kind is not FileKind.GGUF or not file.tensors:
        return None
    if any(t.quantized for t in file.tensors):
        return None
    parts: dict[str, list[int]] = {}
    for t in file.tensors:
        part = parts.setdefault(t.file, [0, 0])
        part[0] += t.nbytes
        part[1] += 1
    shards = tuple(Shard(name, size, 0, n) for name, (size, n) in parts.items())
    tensors = tuple(
        # another type (I32, I8) is listed under its GGUF name, which is_table_weight
        # leaves out of the table
        CheckpointTensor(
            TensorInfo(t.name, t.shape, _GGUF_FLOATS.get(t.type_name, t.type_name)), t.file
        )
        for t in file.tensors
    )
    return Checkpoint(Path(file.name), shards, tensors, None)


@dataclass(frozen=True, eq=False)
class GgufReader:
    """A ``TensorReader`` of ``file``'s tensors: the values as the file stores them (float32,
    from ``QuantizedFile.load``), at the size the file spends on them. The size check
    counts 4 bytes per element: the read holds float32 whatever the stored type."""

    file: QuantizedFile

    def bytes_per_element(self, task: TableTask) -> int:
        return 4

    def read(self, task: TableTask, path: Path) -> ReadTensor:
        entry = self.file.entry(task.tensor)
        try:
            w = self.file.load(task.tensor, max_elements=FOLDER_LIMITS.max_elements).dequantize()
        except ValueError as exc:  # QuantizedFileError: a short or changed file
            raise LoadError(str(exc)) from None
        return ReadTensor(w, entry.nbytes)


def gguf_task(file: QuantizedFile) -> Callable[[TableTask], TaskResult]:
    """The task function of ``file``'s table (``runner.run_tasks``' ``task_fn``, in the
    server's process: the file is open here): ``measure_task`` with a ``GgufReader``, the
    outline ``run_task`` follows for a safetensors weight."""
    return partial(measure_task, GgufReader(file))


def file_checkpoint(path: str | os.PathLike[str]) -> Checkpoint:
    """One ``.safetensors`` file as a one-shard ``Checkpoint`` (its header read and checked
    by ``io``); for files the server chose itself, so no roots apply."""
    path = Path(path)
    infos = list_safetensors_file(path)
    st = path.stat()
    shard = Shard(path.name, st.st_size, st.st_mtime_ns, len(infos))
    tensors = tuple(CheckpointTensor(i, path.name) for i in infos)
    return Checkpoint(path.parent, (shard,), tensors, None)


@dataclass(frozen=True)
class EmbeddingJudgement:
    """Sentence embeddings under a recipe against fp32: the mean and the worst cosine
    over the sentences, and how many tensors were quantized / not found in the model."""

    mean_cosine: float
    min_cosine: float
    quantized: int
    unmatched: tuple[str, ...]


def embedding_judgement(
    model: nn.Module,
    sentences: Sequence[str],
    recipe: Mapping[str, QuantConfig],
    reference: torch.Tensor,
) -> EmbeddingJudgement:
    """The bundled SentenceTransformer's embeddings of ``sentences`` with the weights of
    ``recipe`` fake-quantized (restored afterwards), against ``reference`` (the fp32
    embeddings ``[n, dim]`` of the same sentences)."""
    inner = transformer_of(model)
    with fake_quantized(inner, recipe) as (quantized, unmatched):
        emb = run_sentences(model, sentences)
    cos = F.cosine_similarity(emb.double(), reference.double(), dim=1)
    return EmbeddingJudgement(float(cos.mean()), float(cos.min()), quantized, unmatched)
