"""The Whole-model page's tables: one row per layer of an ``output_report`` (``output_table``)
and its most sensitive layers (``most_sensitive``)."""

from __future__ import annotations

import pandas as pd

from quant_core import ErrorMetrics

from .outputs import ModelOutputs

__all__ = ["OUTPUT_COLUMNS", "UNUSED_BY_EMBEDDING", "most_sensitive", "output_table"]


OUTPUT_COLUMNS: tuple[str, ...] = (
    "name",
    "shape",
    "tokens",
    "mse",
    "sqnr_db",
    "cosine",
    "out_mse",
    "out_sqnr_db",
    "out_cosine",
    "weight_only_sqnr_db",
    "activation_only_sqnr_db",
    "clipped_pct",
    "held_out_sqnr_db",
    "rtn_held_out_sqnr_db",
    "gain_vs_rtn_db",
    "stored_as",
    "bits_per_element",
    "quantized_bytes",
)


def _get(m: ErrorMetrics | None, field: str) -> float | None:
    return None if m is None else float(getattr(m, field))


def output_table(outputs: ModelOutputs) -> pd.DataFrame:
    """One row per quantized layer, most sensitive first: ascending output SQNR, ties in
    module order. Columns ``OUTPUT_COLUMNS``: the weight's own error (``mse``,
    ``sqnr_db``, ``cosine``, as ``layer_table``), the output's (``out_*``), each side
    alone, the clipped percentage, and on held-out sentences the weight-only output SQNR
    of the algorithm, of RTN and the gain (empty without a held-out capture), and the
    scheme each weight is stored in (``stored_as``: a GGUF type's fallback where its
    blocks do not divide the rows)."""
    rows = []
    for r in outputs.layers:
        held, rtn = _get(r.held_out, "sqnr_db"), _get(r.held_out_rtn, "sqnr_db")
        rows.append(
            {
                "name": r.name,
                "shape": f"{r.shape[0]}×{r.shape[1]}",
                "tokens": r.n_tokens,
                "mse": r.weight.mse,
                "sqnr_db": r.weight.sqnr_db,
                "cosine": r.weight.cosine,
                "out_mse": r.output.mse,
                "out_sqnr_db": r.output.sqnr_db,
                "out_cosine": r.output.cosine,
                "weight_only_sqnr_db": r.weight_only.sqnr_db,
                "activation_only_sqnr_db": _get(r.activation_only, "sqnr_db"),
                "clipped_pct": None if r.clipped_fraction is None else 100 * r.clipped_fraction,
                "held_out_sqnr_db": held,
                "rtn_held_out_sqnr_db": rtn,
                "gain_vs_rtn_db": None if held is None or rtn is None else held - rtn,
                "stored_as": r.stored_as,
                "bits_per_element": r.bits_per_element,
                "quantized_bytes": r.quantized_bytes,
            }
        )
    frame = pd.DataFrame(rows, columns=list(OUTPUT_COLUMNS))
    return frame.sort_values("out_sqnr_db", kind="stable", ignore_index=True)


# all-MiniLM-L6-v2's sentence embedding is the mean of the last layer's token states: the
# BERT pooler (``pooler.dense`` on the [CLS] token) is computed but never reaches it.
UNUSED_BY_EMBEDDING: frozenset[str] = frozenset({"pooler.dense"})


def most_sensitive(table: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """The ``n`` layers of an ``output_table`` with the largest output MSE, with their rank
    by weight SQNR alone (1 = lowest SQNR) and whether the sentence embedding uses them.
    Columns: ``name``, ``rank by weight SQNR``, ``out_mse``, ``out_sqnr_db``, ``sqnr_db``,
    ``in embedding``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    missing = {"name", "out_mse", "out_sqnr_db", "sqnr_db"} - set(table.columns)
    if missing:
        raise ValueError(f"not an output table: no column(s) {sorted(missing)}")
    weight_rank = {
        name: i + 1 for i, name in enumerate(table.sort_values("sqnr_db", kind="stable")["name"])
    }
    top = table.sort_values("out_mse", ascending=False, kind="stable").head(n)
    top = top[["name", "out_mse", "out_sqnr_db", "sqnr_db"]].reset_index(drop=True)
    top.insert(1, "rank by weight SQNR", [weight_rank[name] for name in top["name"]])
    top["in embedding"] = [name not in UNUSED_BY_EMBEDDING for name in top["name"]]
    return top
