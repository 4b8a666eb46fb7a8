"""What the mixed-precision page measures and judges, besides a model folder: a single
``.safetensors`` file the server chose (the bundled MiniLM, an upload) as a ``Checkpoint``,
the bundled model's input importance and held-out inputs, and its sentence embeddings under
a mixed recipe."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from quant_core import QuantConfig
from quant_core.calibration import run_sentences, transformer_of
from quant_core.mixed.causal import fake_quantized

from ..files.open import QuantizedModel
from ..io import list_safetensors_file
from ..model.checkpoint import Checkpoint, CheckpointTensor, Shard

__all__ = ["EmbeddingJudgement", "embedding_judgement", "file_checkpoint", "quantized_model_note"]


def quantized_model_note(model: QuantizedModel) -> str:
    """Why the page measures nothing for a file the quantized-file reader opened (a
    ``.gguf``, a GPTQ/AWQ/... folder): the table quantizes float weights read from
    ``.safetensors``. A GGUF of F32/F16/BF16 tensors only (``convert_hf_to_gguf``'s output)
    is not quantized, and was called "a quantized file"."""
    name = model.label
    if any(t.quantized for t in model.file.tensors):
        return (
            f"{name} is a quantized file: the table measures each scheme on float weights. "
            "Pick the model's original (unquantized) folder or file to compare schemes."
        )
    return (
        f"{name} stores floats ({model.file.kind.label}), but the table reads float weights "
        "from .safetensors files only: pick the model's .safetensors folder or file to "
        "compare schemes."
    )


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
