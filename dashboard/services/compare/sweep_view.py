"""The sweep's table as the page shows it, and its one-line conclusion.

    shown = shown_table(table, ErrorAxis.MSE)      # errors first, sorted, ids dropped
    text = conclusion(table, ErrorAxis.MSE)        # "Best at ≤ 4.5 bits per element: ..."

``shown_table`` keeps every column of ``sweep_table`` but ``scheme_id`` and ``tensor`` (and
the output columns of a weights-only sweep); the scheme's label comes first, then its
errors (the plot's axis first), then its cost, then the scheme's parts. Rows are sorted
by bits per element, then by the plot's error (best first): read down, the table walks
the plot from left to right, and among schemes of one cost the best comes first.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from ..display.bits import bits_text
from ..display.errors import error_text
from ..display.text import literal
from .frontier import ErrorAxis

__all__ = [
    "BUDGET_BITS",
    "ERROR_ORDER",
    "OUTPUT_COLUMNS",
    "conclusion",
    "has_output",
    "shown_table",
]

BUDGET_BITS = 4.5
"""The conclusion's bit budget: where 4-bit schemes with their scales sit (int4 g128 with
fp16 scales is 4.125 bits per element, g32 4.5); GGUF Q4_K is 4.5."""

ERROR_ORDER: tuple[str, ...] = (
    "mse",
    "sqnr_db",
    "output_mse",
    "output_sqnr_db",
    "cosine",
    "rmse",
    "mean_abs",
    "max_abs",
)
"""The error columns, in the order the table shows them (the plot's axis moved first)."""

OUTPUT_COLUMNS: tuple[str, ...] = ("output_mse", "output_sqnr_db", "on_output_frontier")
_HIDDEN = ("scheme_id", "tensor")


def has_output(table: pd.DataFrame) -> bool:
    """Whether every row has a held-out output error (a model layer's sweep)."""
    return bool(len(table)) and bool(table["output_mse"].notna().all())


def shown_table(table: pd.DataFrame, axis: ErrorAxis) -> pd.DataFrame:
    """``table`` (a ``sweep_table``) for the page: columns ``scheme``, the errors
    (``axis``'s first, then ``ERROR_ORDER``), ``bits_per_element``, then the rest in
    ``sweep_table`` order; without output errors their columns are left out. Rows sorted
    by ``bits_per_element``, then by ``axis`` (best first: ascending MSE, descending SQNR),
    ties in table order; the index (``scheme_id``) is kept, so a selected row maps back to
    its scheme. ``ValueError`` for an output axis on a table without output errors."""
    if not isinstance(axis, ErrorAxis):
        raise TypeError(f"axis must be an ErrorAxis, got {axis!r}")
    output = has_output(table)
    if axis.needs_layer and not output:
        raise ValueError(f"the table has no {axis.label} for every scheme")
    dropped = set(_HIDDEN) | (set() if output else set(OUTPUT_COLUMNS))
    errors = [axis.value, *(c for c in ERROR_ORDER if c != axis.value)]
    errors = [c for c in errors if c in table.columns and c not in dropped]
    first = ["scheme", *errors, "bits_per_element"]
    rest = [c for c in table.columns if c not in first and c not in dropped]
    err = table[axis.value].to_numpy(dtype=np.float64, na_value=np.nan)
    key = pd.DataFrame(
        {
            "bits": table["bits_per_element"].to_numpy(dtype=np.float64),
            "err": err if axis.minimize else -err,
            "pos": np.arange(len(table)),
        }
    )
    order = key.sort_values(["bits", "err", "pos"], kind="stable").index.to_numpy()
    return table.iloc[order][first + rest]


def _error_phrase(axis: ErrorAxis, value: float) -> str:
    if axis is ErrorAxis.SQNR_DB:
        return f"{axis.label.removesuffix(' (dB)')} {value:.2f} dB"
    return f"{axis.label} {error_text(value)}"


def _scheme_phrase(row: pd.Series, axis: ErrorAxis) -> str:
    bits = row["bits_per_element"]
    return (
        f"**{literal(row['scheme'])}** ({bits_text(float(bits))} bits, "
        f"{_error_phrase(axis, float(row[axis.value]))})"
    )


def conclusion(table: pd.DataFrame, axis: ErrorAxis, budget: float = BUDGET_BITS) -> str:
    """One Markdown line: the best scheme (``axis``) at ≤ ``budget`` bits per element, and
    the best overall when it costs more; the cheapest when none fits the budget. Scheme
    labels are escaped (``literal``). ``ValueError`` for an empty table or a non-positive
    budget."""
    if not isinstance(budget, numbers.Real) or isinstance(budget, bool) or not budget > 0:
        raise ValueError(f"budget must be a positive number of bits, got {budget!r}")
    if not len(table):
        raise ValueError("the sweep has no scheme to conclude on")
    shown = shown_table(table, axis)  # best first within each cost
    err = shown[axis.value].to_numpy(dtype=np.float64)
    score = err if axis.minimize else -err
    best_all = shown.iloc[int(np.argmin(score))]
    fits = (shown["bits_per_element"].to_numpy(dtype=np.float64) <= budget + 1e-12)
    if not fits.any():
        cheapest = shown.iloc[0]
        return (
            f"No scheme is at ≤ {budget:g} bits per element; the cheapest is "
            f"{_scheme_phrase(cheapest, axis)}."
        )
    best = shown.iloc[int(np.argmin(np.where(fits, score, np.inf)))]
    text = f"Best at ≤ {budget:g} bits per element: {_scheme_phrase(best, axis)}."
    if best_all.name != best.name:
        text += f" Best overall: {_scheme_phrase(best_all, axis)}."
    return text
