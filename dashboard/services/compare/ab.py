"""A/B: two schemes on one tensor, element by element and block by block.

    ab = compare_ab(x, cfg_a, cfg_b)        # blocks: cfg's groups, else rows
    ab.totals                               # WinTotals(a=..., b=..., ties=...)
    ab.abs_error_difference()               # |e_a| - |e_b|: negative where A is closer
    ab = compare_ab(w, WeightScheme(cfg, Algorithm.RTN), WeightScheme(cfg, Algorithm.GPTQ),
                    layer_a=inputs, layer_b=inputs)   # + output errors on held-out text

A tensor is compared as the explorer shows it: its 2-D view (``sources.values.to_2d_view``:
``[n]`` -> ``[1, n]``, ``[d0, d1, ...]`` -> ``[d0, d1 * ...]``), quantized as that matrix.
Errors are ``e = x - x_hat`` (original minus the weight the layer computes with: the
dequantized codes, divided by AWQ's input scales) in float32, kept as 2-D numpy matrices
ready for heatmaps; see ``ab_figures``. A side's ``layer`` (a bundled-model layer's
captured inputs) calibrates GPTQ/AWQ and gives that side's output error on held-out
sentences.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from quant_core import (
    ErrorMetrics,
    Granularity,
    PerChannel,
    PerGroup,
    QuantConfig,
    StorageReport,
    check_float_tensor,
    layout_for,
    storage_cost,
)

from ..activations.layer import LayerInputs
from ..display.labels import scheme_label
from ..sources.values import to_2d_view
from .measure import quantize_and_measure
from .weights import WeightScheme

__all__ = [
    "ABResult",
    "WinTotals",
    "Winner",
    "compare_ab",
    "default_block_granularity",
    "metrics_table",
]


class Winner(enum.IntEnum):
    """Which scheme has the lower MSE in a block; the value is what winner maps hold
    (negative for A, matching ``|e_a| - |e_b| < 0`` where A is closer)."""

    A = -1
    TIE = 0
    B = 1


@dataclass(frozen=True)
class WinTotals:
    """How many blocks each scheme won (strictly lower MSE), and how many tied."""

    a: int
    b: int
    ties: int

    @property
    def total(self) -> int:
        return self.a + self.b + self.ties


def _grid_shape(shape: tuple[int, int], granularity: Granularity) -> tuple[int, int]:
    """The 2-D grid one value per block is drawn as: groups keep their place in the matrix
    (``[rows, C/g]``); channels become one column; a single block is ``(1, 1)``."""
    if isinstance(granularity, PerGroup):
        return shape[0], shape[1] // granularity.group_size
    if isinstance(granularity, PerChannel):
        return shape[granularity.axis], 1
    return 1, 1


def default_block_granularity(cfg_a: QuantConfig, cfg_b: QuantConfig) -> Granularity:
    """The blocks to compare in when the caller names none: A's groups if A is per-group,
    else B's if B is, else rows of the matrix (``PerChannel(0)``)."""
    for cfg in (cfg_a, cfg_b):
        if isinstance(cfg.granularity, PerGroup):
            return cfg.granularity
    return PerChannel(0)


@dataclass(frozen=True, eq=False)
class ABResult:
    """Schemes A and B on one tensor.

    ``shape``: the tensor's own shape; ``error_a``/``error_b``: ``x - x_hat`` (float32) on
    its 2-D view, the matrix both schemes quantized.
    ``block_mse_a``/``block_mse_b``: each block's MSE (float64), on the block grid
    (``[rows, C/g]`` for groups, ``[C, 1]`` for channels, ``[1, 1]`` per tensor);
    ``winner``: ``Winner`` values (int8) on the same grid.
    ``output_a``/``output_b``: each side's layer output error on held-out sentences
    (``None`` without a layer). ``note_a``/``note_b``: why a side's errors are what they
    are when its stored scales hit their dtype's limits (``scale_limit_text``; empty
    otherwise). ``warnings_a``/``warnings_b``: what each side's algorithm had to work
    around (``WeightQuantResult.warnings``: GPTQ on fewer calibration tokens than input
    features, ...), as the explorer shows them.
    """

    shape: tuple[int, ...]
    scheme_a: WeightScheme
    scheme_b: WeightScheme
    metrics_a: ErrorMetrics
    metrics_b: ErrorMetrics
    storage_a: StorageReport
    storage_b: StorageReport
    error_a: np.ndarray
    error_b: np.ndarray
    block_granularity: Granularity
    block_mse_a: np.ndarray
    block_mse_b: np.ndarray
    winner: np.ndarray
    totals: WinTotals
    output_a: ErrorMetrics | None = None
    output_b: ErrorMetrics | None = None
    note_a: str = ""
    note_b: str = ""
    warnings_a: tuple[str, ...] = ()
    warnings_b: tuple[str, ...] = ()

    @property
    def config_a(self) -> QuantConfig:
        return self.scheme_a.config

    @property
    def config_b(self) -> QuantConfig:
        return self.scheme_b.config

    def abs_error_difference(self) -> np.ndarray:
        """``|e_a| - |e_b|`` (float32): negative where A is closer to ``x``."""
        return np.abs(self.error_a) - np.abs(self.error_b)

    @property
    def max_abs_error(self) -> float:
        """``max(|e_a|, |e_b|)`` over both maps: the half-width of a shared symmetric scale."""
        return float(max(np.abs(self.error_a).max(), np.abs(self.error_b).max()))


def _as_scheme(item: object, which: str) -> WeightScheme:
    if isinstance(item, WeightScheme):
        return item
    if isinstance(item, QuantConfig):
        return WeightScheme(item)
    raise TypeError(f"scheme {which} must be a WeightScheme or QuantConfig, got {item!r}")


def _error(
    x: torch.Tensor, scheme: WeightScheme, layer: LayerInputs | None, which: str
) -> tuple[torch.Tensor, ErrorMetrics, ErrorMetrics | None, str, tuple[str, ...]]:
    try:
        m = quantize_and_measure(x, scheme, layer)
    except ValueError as exc:
        raise ValueError(f"scheme {which} ({scheme.label}): {exc}") from exc
    err = x.to(torch.float32) - m.effective
    return err, m.metrics, m.output, m.scale_note(), m.result.warnings


def _block_mse(err: torch.Tensor, granularity: Granularity) -> np.ndarray:
    layout = layout_for(tuple(err.shape), granularity)
    mse = layout.to_blocks(err).to(torch.float64).square_().mean(dim=1)
    return mse.numpy().reshape(_grid_shape(layout.shape, granularity))


def compare_ab(
    x: torch.Tensor,
    cfg_a: WeightScheme | QuantConfig,
    cfg_b: WeightScheme | QuantConfig,
    block_granularity: Granularity | None = None,
    *,
    layer_a: LayerInputs | None = None,
    layer_b: LayerInputs | None = None,
) -> ABResult:
    """Quantize the 2-D view of ``x`` under both schemes (a bare ``QuantConfig`` is RTN)
    and compare them.

    ``block_granularity`` sets the blocks whose MSEs decide a winner (default:
    ``default_block_granularity`` of the configs). A block is won by the scheme with the
    strictly lower MSE; equal MSEs (e.g. both exact) tie. ``layer_a``/``layer_b``: the
    layer's captured inputs for each side (the same layer and held-out sentences; the
    calibration sentences may differ), both or neither. Raises ``ValueError`` naming the
    scheme when one cannot run on ``x`` (a misfit, GPTQ/AWQ without a layer), or when
    ``block_granularity`` does not fit.
    """
    check_float_tensor(x)
    scheme_a, scheme_b = _as_scheme(cfg_a, "A"), _as_scheme(cfg_b, "B")
    cfg_a, cfg_b = scheme_a.config, scheme_b.config
    if (layer_a is None) != (layer_b is None):
        raise ValueError("give both layer_a and layer_b, or neither")
    shape = tuple(int(d) for d in x.shape)
    x = to_2d_view(x.detach().cpu()).matrix
    mshape = (int(x.shape[0]), int(x.shape[1]))
    if block_granularity is None:
        block_granularity = default_block_granularity(cfg_a, cfg_b)
    layout_for(mshape, block_granularity)  # raises naming the misfit before any work
    err_a, metrics_a, output_a, note_a, warnings_a = _error(x, scheme_a, layer_a, "A")
    err_b, metrics_b, output_b, note_b, warnings_b = _error(x, scheme_b, layer_b, "B")
    mse_a = _block_mse(err_a, block_granularity)
    mse_b = _block_mse(err_b, block_granularity)
    winner = np.where(mse_a < mse_b, Winner.A, np.where(mse_a > mse_b, Winner.B, Winner.TIE))
    winner = winner.astype(np.int8)
    totals = WinTotals(
        a=int((winner == Winner.A).sum()),
        b=int((winner == Winner.B).sum()),
        ties=int((winner == Winner.TIE).sum()),
    )
    return ABResult(
        shape=shape,
        scheme_a=scheme_a,
        scheme_b=scheme_b,
        metrics_a=metrics_a,
        metrics_b=metrics_b,
        storage_a=storage_cost(mshape, cfg_a),
        storage_b=storage_cost(mshape, cfg_b),
        error_a=err_a.numpy(),
        error_b=err_b.numpy(),
        block_granularity=block_granularity,
        block_mse_a=mse_a,
        block_mse_b=mse_b,
        winner=winner,
        totals=totals,
        output_a=output_a,
        output_b=output_b,
        note_a=note_a,
        note_b=note_b,
        warnings_a=warnings_a,
        warnings_b=warnings_b,
    )


def metrics_table(ab: ABResult) -> pd.DataFrame:
    """One row per scheme (A, B): its name, algorithm, weight errors, held-out output
    errors (when measured) and storage."""
    rows = []
    for name, scheme, m, out, s in (
        ("A", ab.scheme_a, ab.metrics_a, ab.output_a, ab.storage_a),
        ("B", ab.scheme_b, ab.metrics_b, ab.output_b, ab.storage_b),
    ):
        row: dict[str, object] = {
            "": name,
            "scheme": scheme_label(scheme.config),
            "algorithm": scheme.algorithm_label,
            "bits/element": s.bits_per_element,
            "MSE": m.mse,
            "max abs error": m.max_abs,
            "SQNR (dB)": m.sqnr_db,
            "cosine": m.cosine,
        }
        if out is not None:
            row["output MSE (held-out)"] = out.mse
            row["output SQNR (dB)"] = out.sqnr_db
        row["bytes"] = s.total_bytes
        rows.append(row)
    return pd.DataFrame(rows)
