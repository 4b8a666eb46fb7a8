"""A small table for the browser to show as it is (``dashboard.components.charts``): the
teaching panel's worked values. Numbers are written here, so every row reads the same in
the page, a test and a screenshot."""

from __future__ import annotations

import math
import numbers

import pandas as pd

__all__ = ["SIGNIFICANT_DIGITS", "cell_text", "table_payload"]

SIGNIFICANT_DIGITS = 6
"""Floats in a table: ``%.6g`` (``0.0123457``, ``-184``, ``1.5e+30``), as the hovers."""


def cell_text(value: object, digits: int = SIGNIFICANT_DIGITS) -> str:
    """One cell as text: integers whole, floats at ``digits`` significant digits
    (``NaN``, ``inf`` and ``-inf`` by name, ``-0.0`` as ``0``), anything else ``str``."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isnan(v):
            return "NaN"
        # -0.0 (torch.round(-0.3)) reads as a sign error to a student: it is 0.
        return f"{v + 0.0:.{digits}g}"
    return str(value)


def table_payload(frame: pd.DataFrame, digits: int = SIGNIFICANT_DIGITS) -> dict:
    """``frame`` as JSON: ``columns`` (names), ``rows`` (each cell's ``cell_text``) and
    ``numeric`` (per column: right-aligned numbers). The index is left out."""
    numeric = [
        pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in frame.dtypes
    ]
    rows = [[cell_text(v, digits) for v in row] for row in frame.itertuples(index=False)]
    return {"columns": [str(c) for c in frame.columns], "rows": rows, "numeric": numeric}
