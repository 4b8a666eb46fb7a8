"""A/B: two schemes on one tensor, element by element and block by block.

    ab = compare_ab(x, cfg_a, cfg_b)        # blocks: cfg's groups, else rows
    ab.totals                               # WinTotals(a=..., b=..., ties=...)
    ab.abs_error_difference()               # |e_a| - |e_b|: negative where A is closer

A tensor is compared as the explorer shows it: its 2-D view (``sources.values.to_2d_view``:
``[n]`` -> ``[1, n]``, ``[d0, d1, ...]`` -> ``[d0, d1 * ...]``), quantized as that matrix.
Errors are ``e = x - x_hat`` (original minus dequantized, as on the explorer) in float32,
kept as 2-D numpy matrices ready for heatmaps; see ``ab_figures``.
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
    error_metrics,
    layout_for,
    quantize,
    storage_cost,
)

from ..sources.values import to_2d_view

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
    """

    shape: tuple[int, ...]
    config_a: QuantConfig
    config_b: QuantConfig
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

    def abs_error_difference(self) -> np.ndarray:
        """``|e_a| - |e_b|`` (float32): negative where A is closer to ``x``."""
        return np.abs(self.error_a) - np.abs(self.error_b)

    @property
    def max_abs_error(self) -> float:
        """``max(|e_a|, |e_b|)`` over both maps: the half-width of a shared symmetric scale."""
        return float(max(np.abs(self.error_a).max(), np.abs(self.error_b).max()))


def _error(x: torch.Tensor, cfg: QuantConfig, which: str) -> tuple[torch.Tensor, ErrorMetrics]:
    try:
        qt = quantize(x, cfg)
    except ValueError as exc:
        raise ValueError(f"scheme {which} ({cfg.describe()}): {exc}") from exc
    x_hat = qt.dequantize()
    return x.to(torch.float32) - x_hat, error_metrics(x, x_hat)


def _block_mse(err: torch.Tensor, granularity: Granularity) -> np.ndarray:
    layout = layout_for(tuple(err.shape), granularity)
    mse = layout.to_blocks(err).to(torch.float64).square_().mean(dim=1)
    return mse.numpy().reshape(_grid_shape(layout.shape, granularity))


def compare_ab(
    x: torch.Tensor,
    cfg_a: QuantConfig,
    cfg_b: QuantConfig,
    block_granularity: Granularity | None = None,
) -> ABResult:
    """Quantize the 2-D view of ``x`` under both schemes and compare them.

    ``block_granularity`` sets the blocks whose MSEs decide a winner (default:
    ``default_block_granularity``). A block is won by the scheme with the strictly lower
    MSE; equal MSEs (e.g. both exact) tie. Raises ``ValueError`` naming the scheme when one
    does not fit ``x``, or when ``block_granularity`` does not.
    """
    check_float_tensor(x)
    shape = tuple(int(d) for d in x.shape)
    x = to_2d_view(x.detach().cpu()).matrix
    mshape = (int(x.shape[0]), int(x.shape[1]))
    if block_granularity is None:
        block_granularity = default_block_granularity(cfg_a, cfg_b)
    layout_for(mshape, block_granularity)  # raises naming the misfit before any work
    err_a, metrics_a = _error(x, cfg_a, "A")
    err_b, metrics_b = _error(x, cfg_b, "B")
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
        config_a=cfg_a,
        config_b=cfg_b,
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
    )


def metrics_table(ab: ABResult) -> pd.DataFrame:
    """One row per scheme (A, B): its name, errors and storage."""
    rows = []
    for name, cfg, m, s in (
        ("A", ab.config_a, ab.metrics_a, ab.storage_a),
        ("B", ab.config_b, ab.metrics_b, ab.storage_b),
    ):
        rows.append(
            {
                "": name,
                "scheme": cfg.describe(),
                "MSE": m.mse,
                "max abs error": m.max_abs,
                "SQNR (dB)": m.sqnr_db,
                "cosine": m.cosine,
                "bits/element": s.bits_per_element,
                "bytes": s.total_bytes,
            }
        )
    return pd.DataFrame(rows)
