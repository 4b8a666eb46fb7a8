"""The Layer outputs page's metrics as a table to download (CSV): one row per evaluation
(the scheme as picked, and SmoothQuant's when it is on), every number the page shows."""

from __future__ import annotations

import pandas as pd

from quant_core import ErrorMetrics, LinearEval

from ..display.labels import scheme_text
from .layer import LayerSettings

__all__ = ["METRIC_COLUMNS", "layer_metrics_csv", "layer_metrics_table"]

METRIC_COLUMNS = (
    "layer",
    "evaluation",
    "scheme",
    "ranges",
    "split",
    "alpha",
    "output_mse",
    "output_sqnr_db",
    "output_cosine",
    "inputs_clipped",
    "weight_only_mse",
    "weight_only_sqnr_db",
    "activation_only_mse",
    "activation_only_sqnr_db",
)


def _side(m: ErrorMetrics | None) -> tuple[float | None, float | None]:
    return (None, None) if m is None else (m.mse, m.sqnr_db)


def _row(settings: LayerSettings, name: str, ev: LinearEval, alpha: float | None) -> dict:
    w_mse, w_db = _side(ev.weight_only)
    a_mse, a_db = _side(ev.activation_only)
    return {
        "layer": settings.layer,
        "evaluation": name,
        "scheme": scheme_text(settings.scheme),
        "ranges": settings.ranges.value,
        "split": settings.split.value,
        "alpha": alpha,
        "output_mse": ev.metrics.mse,
        "output_sqnr_db": ev.metrics.sqnr_db,
        "output_cosine": ev.metrics.cosine,
        "inputs_clipped": None if ev.activation_clip is None else ev.activation_clip.n_clipped,
        "weight_only_mse": w_mse,
        "weight_only_sqnr_db": w_db,
        "activation_only_mse": a_mse,
        "activation_only_sqnr_db": a_db,
    }


def layer_metrics_table(
    settings: LayerSettings, base: LinearEval, smoothed: LinearEval | None = None
) -> pd.DataFrame:
    """``METRIC_COLUMNS``, one row ``"scheme"`` for ``base`` and, with ``smoothed``, one
    row ``"smoothquant"`` (its ``alpha`` is ``settings.alpha``); empty cells (``None``)
    where a side stays float or nothing clipped could be counted."""
    if not isinstance(settings, LayerSettings):
        raise TypeError(f"settings must be LayerSettings, got {type(settings).__name__}")
    rows = [_row(settings, "scheme", base, None)]
    if smoothed is not None:
        rows.append(_row(settings, "smoothquant", smoothed, settings.alpha))
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))


def layer_metrics_csv(table: pd.DataFrame) -> bytes:
    """``table`` as UTF-8 CSV (``inf`` written as ``inf``: an exact output)."""
    return table.to_csv(index=False).encode("utf-8")
