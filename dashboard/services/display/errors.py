"""How an error (MSE, RMSE, mean or max absolute error) is written in a table: three
significant digits, so ``4.7e-05`` never reads as ``0.00005`` and ``3.1e-09`` never as
``0``.

A fixed number of decimals hides small errors: Streamlit's default (four decimals, more
only below ``1e-4``) shows an MSE of ``4.7e-05`` as ``0.00005`` while the text beside it
says ``4.7e-05``. Errors span many decades, so they are written by significant digits
(``%.3g``), in every table: a column format (``ERROR_FORMAT``, read by Streamlit's
``NumberColumn``) and the same digits in text (``error_text``).
"""

from __future__ import annotations

import math
import numbers

__all__ = ["ERROR_COLUMNS", "ERROR_DIGITS", "ERROR_FORMAT", "error_text"]

ERROR_DIGITS = 3
ERROR_FORMAT = f"%.{ERROR_DIGITS}g"
"""printf-style: ``4.7e-05`` is shown ``0.000047`` (the browser's sprintf writes ``%g``
through JavaScript's ``Number``), ``1.234e-07`` as ``1.23e-7``, ``0.01234`` as ``0.0123``."""

ERROR_COLUMNS: frozenset[str] = frozenset(
    {
        # sweep_table, layer_table and output_table
        "mse",
        "rmse",
        "mean_abs",
        "max_abs",
        "output_mse",
        "out_mse",
        # A/B's metrics_table
        "MSE",
        "max abs error",
        "output MSE (held-out)",
        # the quantized-file view's metrics_table and the whole-model file report
        "max |error|",
        "rtn_mse",
    }
)
"""The columns of the comparison pages' tables that hold an error magnitude (written with
``ERROR_FORMAT``). SQNR (dB) and cosine are not magnitudes: they keep their decimals."""


def error_text(value: float, digits: int = ERROR_DIGITS) -> str:
    """An error as text at ``digits`` significant digits: ``4.7e-05`` gives ``"4.7e-05"``,
    ``0.012345`` gives ``"0.0123"``; ``NaN`` and ``inf`` by name. ``TypeError`` for a
    non-number (a bool included)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"value must be a real number, got {value!r}")
    if not isinstance(digits, int) or isinstance(digits, bool) or digits < 1:
        raise ValueError(f"digits must be a positive int, got {digits!r}")
    v = float(value)
    if math.isnan(v):
        return "NaN"
    return f"{v + 0.0:.{digits}g}"
