"""Sweep many schemes over one tensor, tabulate every metric, find the Pareto frontier.

    grid = SchemeGrid(bits=(2, 4, 8), modes=(Mode.SYMMETRIC,), kinds=(GranularityKind.GROUP,),
                      group_sizes=(32, 128))
    expansion = expand_grid(grid, x.shape)         # configs + skipped (with reasons)
    result = run_sweep(x, expansion.configs, progress=lambda done, total: ...)
    table = sweep_table(result)                    # one row per scheme, sortable
    on_front = pareto_mask(table.bits_per_element, table.mse)

Each row carries ``scheme_id`` (``state.scheme.scheme_id``): a stable, URL-safe identifier
that ``state.scheme.config_from_scheme_id`` turns back into the config.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pandas as pd
import torch

from quant_core import (
    ClipStats,
    ErrorMetrics,
    Format,
    Granularity,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    StorageReport,
    check_float_tensor,
    clip_stats,
    error_metrics,
    layout_for,
    quantize,
    storage_cost,
)

from ..progress import Progress
from ..state.scheme import GranularityKind, scheme_id
from .frontier import pareto_mask

__all__ = [
    "TABLE_COLUMNS",
    "GridExpansion",
    "SchemeGrid",
    "SchemeResult",
    "SkippedScheme",
    "SweepResult",
    "expand_grid",
    "run_sweep",
    "sweep_table",
]


@dataclass(frozen=True)
class SchemeGrid:
    """A grid of schemes: every combination of the chosen values, deduplicated.

    ``bits`` and ``modes`` apply to ``Format.INT`` only: the other formats have a fixed
    width and always use absmax (symmetric) scaling, so they yield one scheme per
    granularity whatever ``bits``/``modes`` hold. ``group_sizes`` apply to
    ``GranularityKind.GROUP`` only; ``axis`` to ``GranularityKind.CHANNEL`` only.
    ``base`` supplies every other field (range method, percentile, rounding, seed,
    scale dtype).

    Example: ``bits=(4, 8)``, both modes, ``kinds=(TENSOR, GROUP)``, ``group_sizes=(32, 64)``,
    ``formats=(INT, NF4)`` gives ``2*2*(1+2) = 12`` INT schemes and ``1+2 = 3`` NF4 ones.
    """

    bits: tuple[int, ...] = (4, 8)
    modes: tuple[Mode, ...] = (Mode.SYMMETRIC,)
    kinds: tuple[GranularityKind, ...] = (GranularityKind.TENSOR,)
    group_sizes: tuple[int, ...] = (128,)
    formats: tuple[Format, ...] = (Format.INT,)
    axis: int = 0
    base: QuantConfig = field(default_factory=QuantConfig)

    def __post_init__(self) -> None:
        for name in ("bits", "modes", "kinds", "group_sizes", "formats"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                raise TypeError(f"SchemeGrid.{name} must be a tuple, got {type(value).__name__}")
        _check_members("modes", self.modes, Mode)
        _check_members("kinds", self.kinds, GranularityKind)
        _check_members("formats", self.formats, Format)
        for b in self.bits:
            QuantConfig(bits=b)  # raises naming the bad width
        for g in self.group_sizes:
            PerGroup(g)  # raises naming the bad size
        PerChannel(self.axis)
        if not isinstance(self.base, QuantConfig):
            raise TypeError(f"SchemeGrid.base must be a QuantConfig, got {self.base!r}")


def _check_members(name: str, values: tuple[object, ...], kind: type[enum.Enum]) -> None:
    for v in values:
        if not isinstance(v, kind):
            raise TypeError(f"SchemeGrid.{name} must hold {kind.__name__} values, got {v!r}")


@dataclass(frozen=True)
class SkippedScheme:
    """A scheme left out of a sweep and why (the message of the error it raised)."""

    config: QuantConfig
    reason: str

    @property
    def label(self) -> str:
        return self.config.describe()


@dataclass(frozen=True)
class GridExpansion:
    """The schemes of a grid that fit a shape, in grid order, and those that do not."""

    configs: tuple[QuantConfig, ...]
    skipped: tuple[SkippedScheme, ...]


def _granularities(grid: SchemeGrid) -> list[Granularity]:
    out: list[Granularity] = []
    for kind in grid.kinds:
        if kind is GranularityKind.TENSOR:
            out.append(PerTensor())
        elif kind is GranularityKind.CHANNEL:
            out.append(PerChannel(grid.axis))
        else:
            out.extend(PerGroup(g) for g in grid.group_sizes)
    return out


def expand_grid(grid: SchemeGrid, shape: tuple[int, ...] | torch.Size) -> GridExpansion:
    """Every distinct scheme of ``grid``, split by whether it fits a tensor of ``shape``.

    Order: format, then granularity, then mode, then bits (each in the grid's order).
    A scheme whose granularity does not fit (a group size that does not divide the last
    dimension, an axis out of range) goes to ``skipped`` with ``layout_for``'s message.
    """
    shape = tuple(int(d) for d in shape)
    seen: dict[QuantConfig, None] = {}
    for fmt in grid.formats:
        for gran in _granularities(grid):
            if fmt is Format.INT:
                for mode in grid.modes:
                    for b in grid.bits:
                        cfg = replace(grid.base, format=fmt, granularity=gran, mode=mode, bits=b)
                        seen.setdefault(cfg, None)
            else:
                cfg = replace(
                    grid.base, format=fmt, granularity=gran, mode=Mode.SYMMETRIC, bits=fmt.bits
                )
                seen.setdefault(cfg, None)
    configs: list[QuantConfig] = []
    skipped: list[SkippedScheme] = []
    for cfg in seen:
        try:
            layout_for(shape, cfg.granularity)
        except ValueError as exc:
            skipped.append(SkippedScheme(cfg, str(exc)))
        else:
            configs.append(cfg)
    return GridExpansion(tuple(configs), tuple(skipped))


@dataclass(frozen=True)
class SchemeResult:
    """One scheme run on the sweep's tensor: errors, clipping and storage."""

    config: QuantConfig
    scheme_id: str
    metrics: ErrorMetrics
    clip: ClipStats
    storage: StorageReport

    @property
    def label(self) -> str:
        return self.config.describe()


@dataclass(frozen=True)
class SweepResult:
    """All schemes that ran, in input order, and those that raised ``ValueError``."""

    shape: tuple[int, ...]
    results: tuple[SchemeResult, ...]
    skipped: tuple[SkippedScheme, ...]


def run_sweep(
    x: torch.Tensor, configs: Sequence[QuantConfig], progress: Progress | None = None
) -> SweepResult:
    """Quantize ``x`` under every config and measure it.

    Per scheme: ``quantize``, ``dequantize``, ``error_metrics``, ``clip_stats`` and
    ``storage_cost``. A config that raises ``ValueError`` for this tensor is reported in
    ``skipped`` instead of stopping the sweep; bad input (not a finite float tensor) raises.
    Duplicate configs run once.
    """
    check_float_tensor(x)
    unique = list(dict.fromkeys(configs))
    for cfg in unique:
        if not isinstance(cfg, QuantConfig):
            raise TypeError(f"configs must hold QuantConfig values, got {cfg!r}")
    total = len(unique)
    if progress is not None:
        progress(0, total)
    results: list[SchemeResult] = []
    skipped: list[SkippedScheme] = []
    for done, cfg in enumerate(unique, start=1):
        try:
            qt = quantize(x, cfg)
        except ValueError as exc:
            skipped.append(SkippedScheme(cfg, str(exc)))
        else:
            results.append(
                SchemeResult(
                    config=cfg,
                    scheme_id=scheme_id(cfg),
                    metrics=error_metrics(x, qt.dequantize()),
                    clip=clip_stats(x, qt),
                    storage=storage_cost(tuple(x.shape), cfg),
                )
            )
        if progress is not None:
            progress(done, total)
    return SweepResult(tuple(int(d) for d in x.shape), tuple(results), tuple(skipped))


TABLE_COLUMNS: tuple[str, ...] = (
    "scheme_id",
    "scheme",
    "format",
    "bits",
    "mode",
    "granularity",
    "group_size",
    "mse",
    "rmse",
    "mean_abs",
    "max_abs",
    "sqnr_db",
    "cosine",
    "n_clipped",
    "n_saturated",
    "bits_per_element",
    "total_bytes",
    "ratio_vs_fp32",
    "ratio_vs_fp16",
    "on_frontier",
)


def sweep_table(result: SweepResult) -> pd.DataFrame:
    """One row per scheme, columns ``TABLE_COLUMNS``; index is the ``scheme_id``.

    ``bits_per_element`` includes scales and zero points; ``total_bytes`` is the packed
    size; ``on_frontier`` marks the schemes no other scheme beats on both MSE and bits.
    """
    rows = []
    for r in result.results:
        cfg, m, s = r.config, r.metrics, r.storage
        gran = cfg.granularity
        rows.append(
            {
                "scheme_id": r.scheme_id,
                "scheme": r.label,
                "format": cfg.format.value,
                "bits": cfg.bits,
                "mode": cfg.mode.value,
                "granularity": GranularityKind.of(gran).value,
                "group_size": gran.group_size if isinstance(gran, PerGroup) else pd.NA,
                "mse": m.mse,
                "rmse": m.rmse,
                "mean_abs": m.mean_abs,
                "max_abs": m.max_abs,
                "sqnr_db": m.sqnr_db,
                "cosine": m.cosine,
                "n_clipped": r.clip.n_clipped,
                "n_saturated": r.clip.n_saturated,
                "bits_per_element": s.bits_per_element,
                "total_bytes": s.total_bytes,
                "ratio_vs_fp32": s.ratio_vs_fp32,
                "ratio_vs_fp16": s.ratio_vs_fp16,
            }
        )
    frame = pd.DataFrame(rows, columns=list(TABLE_COLUMNS[:-1]))
    frame["group_size"] = frame["group_size"].astype("Int64")
    frame["on_frontier"] = pareto_mask(
        frame["bits_per_element"].tolist(), frame["mse"].tolist(), minimize=True
    )
    return frame.set_index("scheme_id", drop=False).rename_axis(None)
