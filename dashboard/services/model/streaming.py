"""The per-layer report of a model folder, streamed: one row per linear weight as soon as it
is measured, with memory bounded by the largest tensor, not by the model.

For each linear weight of a ``checkpoint.Checkpoint`` (shard by shard, each shard's
weights in natural name order):

1. its size is checked against ``FOLDER_LIMITS`` from the header, before any read;
2. its shard is opened with ``safe_open`` for this one tensor (``io``'s reader, which
   re-validates the header) and closed again, and the tensor is copied out of the map:
   ``safe_open`` maps the whole shard, and the pages a read touches stay resident while
   the map lives, so keeping a 5 GB shard open across its tensors would grow the process
   by 5 GB;
3. the tensor is read as stored and copied out of the map as float32 (bf16/fp16 converted
   exactly, this one tensor only: ``evaluate.working_copy``, which says why), quantized
   under the scheme (RTN, or HQQ: a folder holds no calibration inputs) and measured by
   ``report_tensor``, exactly as ``evaluate.iter_layers`` does for one file.

Peak memory is then one tensor's float32 copy, its codes and its dequantized copy (about
``2.5 x`` its float32 bytes; ``tests/services/test_model_folder_stream`` measures it).

``FOLDER_LIMITS`` is larger than the explorer's 64M elements: the explorer keeps a tensor,
its codes, its dequantized copy and its figures in caches, while the report keeps nothing
but one row per weight. 2**28 elements (a 16384 x 16384 matrix; a 70B model's MLP weights
are 28672 x 8192 = 235M) need about 2.5 GB while measured. A larger weight (a 128k
vocabulary's ``lm_head``) is listed as skipped with the limit named.

``ReportStore`` keeps the rows of each (folder, scheme) report as they come, so a rerun
that interrupts a report (the page's script stops at its next Streamlit call) resumes it
where it stopped, and a finished report is shown again without reading anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from quant_core import (
    Algorithm,
    AWQOptions,
    GPTQOptions,
    HQQOptions,
    QuantConfig,
    fallback_config,
    quantize_weight,
    report_tensor,
)

from ..io import Limits, LoadError, load_safetensors_file_tensor
from ..io.common import check_size
from ..row_store import RowStore
from .checkpoint import Checkpoint, CheckpointError, CheckpointTensor
from .evaluate import LayerResult, ModelEvalResult, SkippedLayer, working_copy

__all__ = [
    "FOLDER_LIMITS",
    "STREAM_COLUMNS",
    "ReportStore",
    "StreamedLayer",
    "collect",
    "run_report",
    "stream_report",
    "stream_table",
]

FOLDER_LIMITS = Limits(max_elements=2**28, max_bytes=2**30)

Options = GPTQOptions | AWQOptions | HQQOptions | None


@dataclass(frozen=True)
class StreamedLayer:
    """One row of the streamed report: weight ``done`` of ``total`` (from 1), where it is
    stored (``tensor``), its result (a ``LayerResult``, or a ``SkippedLayer`` with the
    reason: over the limits, or a scheme that does not fit its shape), the bytes read
    (``read_bytes``: 0 when it was skipped before reading), the seconds that read took
    (``read_seconds``) and all of it took (read, quantize, measure: ``seconds``)."""

    done: int
    total: int
    tensor: CheckpointTensor
    result: LayerResult | SkippedLayer
    read_bytes: int
    read_seconds: float
    seconds: float

    def record(self) -> dict[str, object]:
        """The row as ``STREAM_COLUMNS`` (metrics ``None`` for a skipped weight)."""
        info = self.tensor.info
        row: dict[str, object] = dict.fromkeys(STREAM_COLUMNS)
        row |= {
            "name": info.name,
            "shape": "×".join(str(d) for d in info.shape),
            "dtype": info.dtype,
            "shard": self.tensor.shard,
            "stored_bytes": self.tensor.stored_bytes,
            "seconds": self.seconds,
        }
        if isinstance(self.result, LayerResult):
            m, s = self.result.report.metrics, self.result.report.storage
            row |= {
                "mse": m.mse,
                "sqnr_db": m.sqnr_db,
                "bits_per_element": s.bits_per_element,
                "quantized_bytes": s.total_bytes,
            }
        else:
            row["skipped"] = self.result.reason
        return row


STREAM_COLUMNS: tuple[str, ...] = (
    "name",
    "shape",
    "dtype",
    "shard",
    "mse",
    "sqnr_db",
    "bits_per_element",
    "stored_bytes",
    "quantized_bytes",
    "seconds",
    "skipped",
)


def stream_report(
    checkpoint: Checkpoint,
    cfg: QuantConfig,
    algorithm: Algorithm = Algorithm.RTN,
    options: Options = None,
    limits: Limits = FOLDER_LIMITS,
    start: int = 0,
) -> Iterator[StreamedLayer]:
    """Yield a ``StreamedLayer`` per linear weight of ``checkpoint`` from weight ``start``
    on (0: the first), one tensor in memory at a time (module docstring).

    ``algorithm`` must be data-free (RTN, or HQQ with its ``options``): ``ValueError``
    otherwise, before anything is read. A weight over ``limits`` or one the scheme cannot
    fit comes as a ``SkippedLayer``. ``CheckpointError`` when a shard changed since it was
    listed (a tensor's shape or dtype no longer matches, or the file became unreadable)."""
    if not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"checkpoint must be a Checkpoint, got {type(checkpoint).__name__}")
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"algorithm must be an Algorithm, got {algorithm!r}")
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be Limits, got {type(limits).__name__}")
    weights = checkpoint.linear_weights
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= len(weights):
        raise ValueError(f"start must be an int in [0, {len(weights)}], got {start!r}")
    reason = algorithm.unavailable_reason(cfg, has_calibration=False)
    if reason is not None:
        raise ValueError(reason)
    for done, tensor in enumerate(weights[start:], start=start + 1):
        began = time.perf_counter()
        result, read = _measure(checkpoint, tensor, cfg, algorithm, options, limits)
        took = time.perf_counter() - began
        nbytes = (tensor.stored_bytes or 0) if read is not None else 0
        yield StreamedLayer(done, len(weights), tensor, result, nbytes, read or 0.0, took)


def _measure(
    checkpoint: Checkpoint,
    tensor: CheckpointTensor,
    cfg: QuantConfig,
    algorithm: Algorithm,
    options: Options,
    limits: Limits,
) -> tuple[LayerResult | SkippedLayer, float | None]:
    """The weight's result and the seconds its read took (``None``: not read)."""
    info = tensor.info
    try:  # from the header, before anything is read; the reader checks again
        check_size(info.name, info.shape, getattr(torch, info.dtype).itemsize, limits)
    except LoadError as exc:
        return SkippedLayer(info.name, info.shape, f"not read: {exc}"), None
    if info.numel == 0:
        return SkippedLayer(info.name, info.shape, "empty: nothing to quantize"), None
    began = time.perf_counter()
    try:
        path = checkpoint.shard_path(tensor.shard)
        mapped = load_safetensors_file_tensor(path, info.name, limits).tensor
    except LoadError as exc:
        raise CheckpointError(f"{tensor.shard} changed since it was listed: {exc}") from exc
    if tuple(mapped.shape) != info.shape or str(mapped.dtype).removeprefix("torch.") != info.dtype:
        raise CheckpointError(
            f"{tensor.shard} changed since it was listed: {info.name!r} is now "
            f"{list(mapped.shape)} {mapped.dtype}, was {list(info.shape)} {info.dtype}"
        )
    # Read it now, out of the file's map (unmapped with ``mapped``): the read is timed
    # here, not inside quantize, and a file rewritten later cannot fault under us.
    w = working_copy(mapped)
    w = mapped.clone() if w is mapped else w
    del mapped
    read = time.perf_counter() - began
    try:
        layer_cfg = fallback_config(cfg, tuple(w.shape))  # llama-quantize's fallback
        qt = quantize_weight(w, layer_cfg, algorithm, options=options).quantized
    except ValueError as exc:
        return SkippedLayer(info.name, info.shape, str(exc)), read
    return LayerResult(info, report_tensor(info.name, w, qt)), read


class ReportStore(RowStore[StreamedLayer]):
    """The rows of streamed reports by key (folder and scheme; ``RowStore``), for at most
    ``max_reports`` keys."""

    def __init__(self, max_reports: int = 8) -> None:
        super().__init__(StreamedLayer, max_reports)


def run_report(
    store: ReportStore,
    key: str,
    checkpoint: Checkpoint,
    cfg: QuantConfig,
    algorithm: Algorithm = Algorithm.RTN,
    options: Options = None,
    *,
    on_rows: Callable[[tuple[StreamedLayer, ...], int], None] | None = None,
    every_s: float = 0.5,
    limits: Limits = FOLDER_LIMITS,
) -> tuple[StreamedLayer, ...]:
    """Every row of the report of ``checkpoint`` under ``cfg``, resumed from ``store``'s
    rows for ``key`` (which must name the folder's content and the scheme) and added to
    it as each weight is done.

    ``on_rows(rows, total)`` is called before the first weight, then at most every
    ``every_s`` seconds and after the last; an exception it raises (Streamlit stopping a
    script for a rerun) stops the report, and the rows done so far stay in ``store``."""
    if not isinstance(store, ReportStore):
        raise TypeError(f"store must be a ReportStore, got {type(store).__name__}")
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")
    total = len(checkpoint.linear_weights)
    rows = store.rows(key)
    if on_rows is not None:
        on_rows(rows, total)
    last = time.monotonic()
    if len(rows) < total:
        for row in stream_report(checkpoint, cfg, algorithm, options, limits, start=len(rows)):
            rows = store.add(key, row)
            now = time.monotonic()
            if on_rows is not None and (now - last >= every_s or len(rows) >= total):
                on_rows(rows, total)
                last = now
            if len(rows) >= total:
                break
    return rows


def stream_table(rows: Sequence[StreamedLayer]) -> pd.DataFrame:
    """The rows so far, in streaming order, as ``STREAM_COLUMNS``."""
    return pd.DataFrame([r.record() for r in rows], columns=list(STREAM_COLUMNS))


def collect(cfg: QuantConfig, rows: Sequence[StreamedLayer]) -> ModelEvalResult:
    """The finished stream as the ``ModelEvalResult`` that ``evaluate.layer_table`` and the
    page's charts take (layers and skipped ones in streaming order)."""
    layers = tuple(r.result for r in rows if isinstance(r.result, LayerResult))
    skipped = tuple(r.result for r in rows if isinstance(r.result, SkippedLayer))
    return ModelEvalResult(cfg, layers, skipped)
