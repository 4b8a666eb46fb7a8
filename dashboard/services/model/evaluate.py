"""A whole model under one scheme: every linear weight of a ``.safetensors`` file (see
``files.is_linear_weight``), quantized and measured layer by layer, one tensor in memory at
a time."""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass

import pandas as pd

from quant_core import LayerReport, QuantConfig, quantize, report_tensor

from ..progress import Progress
from .files import TensorEntry, list_linear_weights, open_weights

__all__ = [
    "LAYER_COLUMNS",
    "LayerMetric",
    "LayerResult",
    "ModelEvalResult",
    "SkippedLayer",
    "evaluate_safetensors",
    "layer_table",
]


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
    with open_weights(path) as f:
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
