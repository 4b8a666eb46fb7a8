"""Sweep many schemes over one tensor, tabulate every metric, find the Pareto frontiers.

    grid = SchemeGrid(bits=(2, 4, 8), kinds=(GranularityKind.GROUP,), group_sizes=(32, 128),
                      algorithms=(Algorithm.RTN, Algorithm.GPTQ))
    expansion = expand_grid(grid, w.shape, has_calibration=True)
    result = run_sweep(w, expansion.schemes, progress=..., inputs=layer_inputs)
    table = sweep_table(result, tensor="encoder.layer.0.intermediate.dense.weight")

With ``inputs`` (a bundled-model layer's captured inputs) every row also has the layer's
output error on held-out sentences, and ``on_output_frontier`` beside ``on_frontier``:
GPTQ and AWQ trade weight error for output error, so the two frontiers differ.

Each row carries ``scheme_id`` (``WeightScheme.scheme_id``): a stable, URL-safe identifier
that ``WeightScheme.from_id`` turns back into the scheme (for RTN it is
``state.scheme.scheme_id`` of the config).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from quant_core import (
    ClipStats,
    ErrorMetrics,
    PerGroup,
    QuantConfig,
    RangeMethod,
    StorageReport,
    check_float_tensor,
    clip_stats,
    storage_cost,
)
from quant_core.formats.registry import family_of

from ..activations.layer import LayerInputs
from ..display.labels import scale_storage_label
from ..progress import Progress
from ..state.scheme import GranularityKind
from .frontier import pareto_mask
from .grid import GridExpansion, SchemeGrid, SkippedScheme, expand_grid
from .measure import held_out_reference, quantize_and_measure
from .weights import WeightScheme

__all__ = [
    "TABLE_COLUMNS",
    "GridExpansion",
    "SchemeGrid",
    "SchemeResult",
    "SkippedScheme",
    "SweepResult",
    "expand_grid",
    "range_label",
    "run_sweep",
    "sweep_table",
]


@dataclass(frozen=True)
class SchemeResult:
    """One scheme run on the sweep's tensor: weight errors, clipping, storage, and (for a
    model layer) the output error on held-out sentences; ``seconds``: the algorithm's
    wall time; ``note``: why its errors are what they are when its stored scales hit
    their dtype's limits (``MeasuredScheme.scale_note``; empty otherwise); ``warnings``:
    what the algorithm had to work around (``WeightQuantResult.warnings``)."""

    scheme: WeightScheme
    scheme_id: str
    metrics: ErrorMetrics
    clip: ClipStats
    storage: StorageReport
    output: ErrorMetrics | None = None
    seconds: float = 0.0
    note: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def config(self) -> QuantConfig:
        return self.scheme.config

    @property
    def label(self) -> str:
        return self.scheme.label


@dataclass(frozen=True)
class SweepResult:
    """All schemes that ran, in input order, and those that raised ``ValueError``;
    ``layer``: the layer whose held-out outputs were measured (``None``: weights only)."""

    shape: tuple[int, ...]
    results: tuple[SchemeResult, ...]
    skipped: tuple[SkippedScheme, ...]
    layer: str | None = None


def _as_scheme(item: object) -> WeightScheme:
    if isinstance(item, WeightScheme):
        return item
    if isinstance(item, QuantConfig):
        return WeightScheme(item)
    raise TypeError(f"schemes must hold WeightScheme or QuantConfig values, got {item!r}")


def run_sweep(
    x: torch.Tensor,
    schemes: Sequence[WeightScheme | QuantConfig],
    progress: Progress | None = None,
    inputs: LayerInputs | None = None,
) -> SweepResult:
    """Quantize ``x`` under every scheme (a bare ``QuantConfig`` is RTN) and measure it.

    Per scheme: ``quantize_and_measure`` (the algorithm, weight ``error_metrics`` of the
    weight the layer computes with, and with ``inputs`` the output error on
    ``inputs.x_eval``), ``clip_stats`` and ``storage_cost``. A scheme that raises
    ``ValueError`` for this tensor (a misfit granularity, GPTQ/AWQ without ``inputs``) is
    reported in ``skipped`` instead of stopping the sweep; bad input (not a finite float
    tensor, ``inputs`` of another shape) raises. Duplicate schemes run once.
    """
    check_float_tensor(x)
    reference = None if inputs is None else held_out_reference(x, inputs)
    unique = list(dict.fromkeys(_as_scheme(s) for s in schemes))
    total = len(unique)
    if progress is not None:
        progress(0, total)
    results: list[SchemeResult] = []
    skipped: list[SkippedScheme] = []
    for done, scheme in enumerate(unique, start=1):
        try:
            m = quantize_and_measure(x, scheme, inputs, reference)
        except ValueError as exc:
            skipped.append(SkippedScheme(scheme.config, str(exc), scheme.algorithm))
        else:
            results.append(
                SchemeResult(
                    scheme=scheme,
                    scheme_id=scheme.scheme_id,
                    metrics=m.metrics,
                    clip=clip_stats(m.quantized_input, m.result.quantized),
                    storage=storage_cost(tuple(x.shape), scheme.config),
                    output=m.output,
                    seconds=m.result.seconds,
                    note=m.scale_note(),
                    warnings=m.result.warnings,
                )
            )
        if progress is not None:
            progress(done, total)
    return SweepResult(
        tuple(int(d) for d in x.shape),
        tuple(results),
        tuple(skipped),
        None if inputs is None else inputs.name,
    )


TABLE_COLUMNS: tuple[str, ...] = (
    "scheme_id",
    "scheme",
    "tensor",
    "algorithm",
    "format",
    "family",
    "bits",
    "mode",
    "zero_point",
    "granularity",
    "group_size",
    "range",
    "scale_dtype",
    "mse",
    "rmse",
    "mean_abs",
    "max_abs",
    "sqnr_db",
    "cosine",
    "output_mse",
    "output_sqnr_db",
    "n_clipped",
    "n_saturated",
    "bits_per_element",
    "total_bytes",
    "ratio_vs_fp32",
    "ratio_vs_fp16",
    "seconds",
    "on_frontier",
    "on_output_frontier",
)


def range_label(cfg: QuantConfig) -> str:
    """The range method as the table shows it: ``"minmax"``, ``"mse"``, or
    ``"percentile 99.9"`` (with the percentile kept)."""
    if cfg.range_method is RangeMethod.PERCENTILE:
        return f"percentile {cfg.percentile:g}"
    return cfg.range_method.value


def shipped_family(cfg: QuantConfig) -> str:
    """The family of a shipped format (``"GGUF"``, ``"OCP MX"``, ``"NVIDIA"``, ...: the
    registry's ``PRESET_FAMILIES``), ``""`` for a scheme that is no named preset."""
    return family_of(cfg) or ""


def sweep_table(result: SweepResult, tensor: str = "") -> pd.DataFrame:
    """One row per scheme, columns ``TABLE_COLUMNS``; index is the ``scheme_id``.

    ``tensor`` names the swept tensor in every row (so a CSV stands on its own).
    ``family``: a shipped format's family (``shipped_family``), else empty.
    ``scale_dtype``: how the block scales are stored (``scale_storage_label``: ``fp16``,
    or a two-level format's ``e8m0``, ``u6/256:fp16``...).
    ``mse`` ... ``cosine`` compare the weight with the weight the layer computes with;
    ``output_mse``/``output_sqnr_db`` compare the layer's outputs on held-out sentences
    (NaN without a layer). ``bits_per_element`` includes scales and zero points;
    ``total_bytes`` is the packed size. ``on_frontier``: no other scheme beats it on both
    weight MSE and bits; ``on_output_frontier``: the same with output MSE (``<NA>``
    without a layer).
    """
    nan = float("nan")
    rows = []
    for r in result.results:
        cfg, m, s, out = r.config, r.metrics, r.storage, r.output
        gran = cfg.granularity
        rows.append(
            {
                "scheme_id": r.scheme_id,
                "scheme": r.label,
                "tensor": tensor,
                "algorithm": r.scheme.algorithm_label,
                "format": cfg.format.value,
                "family": shipped_family(cfg),
                "bits": cfg.bits,
                "mode": cfg.mode.value,
                "zero_point": cfg.zero_point.value if cfg.has_zero_point else pd.NA,
                "granularity": GranularityKind.of(gran).value,
                "group_size": gran.group_size if isinstance(gran, PerGroup) else pd.NA,
                "range": range_label(cfg),
                "scale_dtype": scale_storage_label(cfg),
                "mse": m.mse,
                "rmse": m.rmse,
                "mean_abs": m.mean_abs,
                "max_abs": m.max_abs,
                "sqnr_db": m.sqnr_db,
                "cosine": m.cosine,
                "output_mse": nan if out is None else out.mse,
                "output_sqnr_db": nan if out is None else out.sqnr_db,
                "n_clipped": r.clip.n_clipped,
                "n_saturated": r.clip.n_saturated,
                "bits_per_element": s.bits_per_element,
                "total_bytes": s.total_bytes,
                "ratio_vs_fp32": s.ratio_vs_fp32,
                "ratio_vs_fp16": s.ratio_vs_fp16,
                "seconds": r.seconds,
            }
        )
    frame = pd.DataFrame(rows, columns=list(TABLE_COLUMNS[:-2]))
    frame["group_size"] = frame["group_size"].astype("Int64")
    bits = frame["bits_per_element"].tolist()
    frame["on_frontier"] = pareto_mask(bits, frame["mse"].tolist(), minimize=True)
    has_output = bool(len(frame)) and bool(frame["output_mse"].notna().all())
    output_front = (
        pareto_mask(bits, frame["output_mse"].tolist(), minimize=True)
        if has_output
        else [pd.NA] * len(frame)
    )
    frame["on_output_frontier"] = pd.array(output_front, dtype="boolean")
    return frame.set_index("scheme_id", drop=False).rename_axis(None)
