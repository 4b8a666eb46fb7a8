"""A whole model under one scheme: every linear weight of a ``.safetensors`` file (see
``files.is_linear_weight``), quantized and measured layer by layer, one tensor in memory at
a time.

``iter_layers`` streams the report (one ``LayerResult`` or ``SkippedLayer`` per weight, as
each is done), so a page can draw a large model's rows while the rest are computed;
``evaluate_safetensors`` collects it.

A bf16/fp16 weight is read as stored and converted to float32 when its turn comes
(``working_copy``), one weight at a time: ``quantize`` would make that float32 copy itself,
and ``error_metrics``' one-pass compiled sums take float32 only (on a bf16 weight they run
the eager float64 path, about 25 times slower on a 4096 x 11008 weight). The conversion is
exact (every bf16/fp16 value is a float32), so the codes are those of the stored weight.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd
import torch

from quant_core import (
    Algorithm,
    AWQOptions,
    GPTQOptions,
    HQQOptions,
    LayerReport,
    QuantConfig,
    fallback_config,
    quantize_weight,
    report_tensor,
)
from quant_core.validation import nonfinite_text

from ..io import TensorInfo, open_safetensors_file
from ..progress import Progress
from .files import is_linear_weight, list_linear_weights, stored_bytes

__all__ = [
    "COLUMN_LABELS",
    "LAYER_COLUMNS",
    "LayerMetric",
    "LayerResult",
    "ModelEvalResult",
    "SkippedLayer",
    "evaluate_safetensors",
    "iter_layers",
    "layer_table",
    "order_by",
    "working_copy",
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

    entry: TensorInfo
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
        return sum(stored_bytes(r.entry) or 0 for r in self.layers)


_HALF = (torch.bfloat16, torch.float16)


def working_copy(w: torch.Tensor) -> torch.Tensor:
    """``w`` as the report quantizes it: bf16/fp16 converted to float32 (exactly), other
    dtypes as they are (a tensor memory-mapped from a file stays mapped: ``clone`` it)."""
    return w.to(torch.float32) if w.dtype in _HALF else w


def iter_layers(
    path: str | os.PathLike[str],
    cfg: QuantConfig,
    algorithm: Algorithm = Algorithm.RTN,
    options: GPTQOptions | AWQOptions | HQQOptions | None = None,
) -> Iterator[tuple[int, int, LayerResult | SkippedLayer]]:
    """``(done, total, result)`` for each linear weight of a ``.safetensors`` file, quantized
    under ``cfg`` one at a time, in natural name order; ``done`` counts from 1.

    ``algorithm``: a data-free one (RTN or HQQ, with its ``options``): a file holds no
    inputs to calibrate on, so GPTQ and AWQ raise ``ValueError`` (the bundled model's page
    runs them through ``outputs.quantize_linears``).

    A weight the scheme cannot fit (``quantize`` raises ``ValueError``, e.g. a group size
    that does not divide its last dimension) comes as a ``SkippedLayer`` with the reason.
    Raises ``LoadError`` (a ``ValueError``) naming the file when it cannot be read.
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"algorithm must be an Algorithm, got {algorithm!r}")
    reason = algorithm.unavailable_reason(cfg, has_calibration=False)
    if reason is not None:
        raise ValueError(reason)
    with open_safetensors_file(path) as (infos, handle):
        weights = [i for i in infos if is_linear_weight(i.name, i.shape, i.dtype)]
        for done, info in enumerate(weights, start=1):
            w = working_copy(handle.get_tensor(info.name))
            try:
                layer_cfg = fallback_config(cfg, tuple(w.shape))  # llama-quantize's
                qt = quantize_weight(w, layer_cfg, algorithm, options=options).quantized
            except ValueError as exc:
                # quantize names its argument "x"; the report's row names the weight
                why = str(exc) if bool(w.isfinite().all()) else nonfinite_text(w, "the weight")
                yield done, len(weights), SkippedLayer(info.name, info.shape, why)
            else:
                yield done, len(weights), LayerResult(info, report_tensor(info.name, w, qt))
            del w


def evaluate_safetensors(
    path: str | os.PathLike[str],
    cfg: QuantConfig,
    progress: Progress | None = None,
    algorithm: Algorithm = Algorithm.RTN,
    options: GPTQOptions | AWQOptions | HQQOptions | None = None,
) -> ModelEvalResult:
    """Every result of ``iter_layers`` (with ``algorithm``, RTN or HQQ) collected;
    ``progress(done, total)`` is called with ``(0, total)`` first and after every weight."""
    if progress is not None:
        progress(0, len(list_linear_weights(path)))
    layers: list[LayerResult] = []
    skipped: list[SkippedLayer] = []
    for done, total, result in iter_layers(path, cfg, algorithm, options):
        (layers if isinstance(result, LayerResult) else skipped).append(result)
        if progress is not None:
            progress(done, total)
    return ModelEvalResult(cfg, tuple(layers), tuple(skipped))


class LayerMetric(enum.Enum):
    """A per-layer quantity to chart or rank by; the value is its table column.

    ``MSE``/``SQNR_DB``/``COSINE``: the weight's own error (``layer_table`` and
    ``outputs.output_table``); ``OUTPUT_*``: the layer output's error ``Y`` vs ``Ŷ``
    (``output_table`` only); ``BITS_PER_ELEMENT``/``BYTES``: the storage cost.
    """

    MSE = "mse"
    SQNR_DB = "sqnr_db"
    COSINE = "cosine"
    OUTPUT_MSE = "out_mse"
    OUTPUT_SQNR_DB = "out_sqnr_db"
    OUTPUT_COSINE = "out_cosine"
    BITS_PER_ELEMENT = "bits_per_element"
    BYTES = "quantized_bytes"

    @property
    def label(self) -> str:
        return _METRIC_LABELS[self]

    @property
    def higher_is_worse(self) -> bool:
        """Whether a larger value is a larger error (or cost): MSE, bits and bytes; SQNR
        and cosine are better when larger."""
        return self not in (
            LayerMetric.SQNR_DB,
            LayerMetric.COSINE,
            LayerMetric.OUTPUT_SQNR_DB,
            LayerMetric.OUTPUT_COSINE,
        )

    @property
    def is_error(self) -> bool:
        """An error metric (the worst layer is the most sensitive), not a storage cost."""
        return self not in (LayerMetric.BITS_PER_ELEMENT, LayerMetric.BYTES)

    @property
    def worse(self) -> str:
        """``"higher is worse"`` or ``"lower is worse"``."""
        return "higher is worse" if self.higher_is_worse else "lower is worse"


_METRIC_LABELS = {
    LayerMetric.MSE: "weight MSE",
    LayerMetric.SQNR_DB: "weight SQNR (dB)",
    LayerMetric.COSINE: "weight cosine",
    LayerMetric.OUTPUT_MSE: "output MSE",
    LayerMetric.OUTPUT_SQNR_DB: "output SQNR (dB)",
    LayerMetric.OUTPUT_COSINE: "output cosine",
    LayerMetric.BITS_PER_ELEMENT: "bits per element",
    LayerMetric.BYTES: "bytes (quantized)",
}


def order_by(table: pd.DataFrame, metric: LayerMetric) -> pd.DataFrame:
    """``table``'s rows worst first by ``metric`` (descending when higher is worse,
    ascending otherwise; ties keep the table's order). ``ValueError`` when the table has
    no column for it (weight-only tables have no output errors)."""
    if not isinstance(metric, LayerMetric):
        raise TypeError(f"metric must be a LayerMetric, got {metric!r}")
    if metric.value not in table.columns:
        raise ValueError(
            f"the table has no {metric.label} column ({metric.value!r}); it has: "
            f"{', '.join(map(str, table.columns))}"
        )
    return table.sort_values(
        metric.value, ascending=not metric.higher_is_worse, kind="stable", ignore_index=True
    )


# What each column of ``layer_table`` and ``outputs.output_table`` means, in the words the
# page shows as its header (the frames keep short names for code and CSV).
COLUMN_LABELS: dict[str, str] = {
    "name": "layer",
    "shape": "shape (out×in)",
    "n_elements": "elements",
    "tokens": "tokens",
    "dtype": "stored dtype",
    "mse": "weight MSE",
    "rmse": "weight RMSE",
    "mean_abs": "weight mean |err|",
    "max_abs": "weight max |err|",
    "sqnr_db": "weight SQNR (dB)",
    "cosine": "weight cosine",
    "out_mse": "output MSE",
    "out_sqnr_db": "output SQNR (dB)",
    "out_cosine": "output cosine",
    "weight_only_sqnr_db": "output SQNR, weights only (dB)",
    "activation_only_sqnr_db": "output SQNR, inputs only (dB)",
    "clipped_pct": "inputs clipped (%)",
    "held_out_sqnr_db": "weights-only SQNR, this algorithm (dB)",
    "rtn_held_out_sqnr_db": "weights-only SQNR, RTN (dB)",
    "gain_vs_rtn_db": "gain over RTN (dB)",
    "stored_as": "stored as",
    "bits_per_element": "bits per element",
    "stored_bytes": "bytes as stored",
    "fp32_bytes": "bytes in fp32",
    "quantized_bytes": "bytes quantized",
    "ratio_vs_fp32": "smaller than fp32 by",
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
                "n_elements": r.entry.numel,
                "dtype": r.entry.dtype,
                "mse": m.mse,
                "rmse": m.rmse,
                "mean_abs": m.mean_abs,
                "max_abs": m.max_abs,
                "sqnr_db": m.sqnr_db,
                "cosine": m.cosine,
                "bits_per_element": s.bits_per_element,
                "stored_bytes": stored_bytes(r.entry),
                "fp32_bytes": s.fp32_bytes,
                "quantized_bytes": s.total_bytes,
                "ratio_vs_fp32": s.ratio_vs_fp32,
            }
        )
    frame = pd.DataFrame(rows, columns=list(LAYER_COLUMNS))
    return frame.sort_values("sqnr_db", kind="stable", ignore_index=True)
