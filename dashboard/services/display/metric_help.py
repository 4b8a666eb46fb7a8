"""What each metric the pages show means: one table of definitions (name, formula, how to
read it), used as the help text ("?") of every metric card and metric column, so that a
card explains its number instead of repeating it.

``x`` is the original tensor, ``x̂`` its dequantized reconstruction, ``n`` the number of
(finite) elements; sums and means run over every element. The formulas are those of
``quant_core.metrics.ErrorMetrics`` and ``quant_core.storage.StorageReport``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping

__all__ = ["TABLE_COLUMNS", "Metric", "metric_help", "size_ratio", "with_help"]


class Metric(enum.Enum):
    """A metric shown on the pages; ``value`` is its one-line definition with the formula."""

    MSE = "Mean squared error: mean((x − x̂)²) over every element; 0 is exact."
    RMSE = "Root mean squared error: √MSE = √mean((x − x̂)²), in the tensor's own units; 0 is exact."
    MAX_ABS = "Largest absolute error: max |x − x̂| over every element (the worst value)."
    MEAN_ABS = "Mean absolute error: mean |x − x̂| over every element."
    SQNR = (
        "Signal-to-quantization-noise ratio: 10·log10(Σx² / Σ(x − x̂)²) in dB; higher is "
        "better, each 6 dB is about one more bit, ∞ when exact."
    )
    COSINE = (
        "Cosine similarity: Σ x·x̂ / (‖x‖·‖x̂‖) over the flattened tensors; 1 is the same "
        "direction, 0 unrelated."
    )
    RELATIVE = "Relative error: ‖x − x̂‖ / ‖x‖ (Euclidean norms); 0 is exact."
    BITS_PER_ELEMENT = (
        "Bits per element: everything stored (codes, scales, zero points) in bits ÷ the "
        "number of elements; fp32 is 32, fp16 16."
    )
    BYTES = "Bytes stored: the codes packed at their bit width plus scales and zero points."
    SIZE_RATIO = (
        "Size ratio: the reference's bytes ÷ the bytes stored (fp32: 4 bytes an element, "
        "fp16: 2); above 1 the scheme is smaller."
    )
    CLIPPED = (
        "Clipped values: inputs beyond the representable range [lo, hi] of their block by "
        "more than half a step, so they were cut to the range's end."
    )
    SATURATED = (
        "Saturated codes: elements stored as the lowest or highest code (qmin or qmax), "
        "whether clipped or landing there by rounding."
    )
    OUTPUT_MSE = (
        "Output MSE: mean((y − ŷ)²) of the layer's outputs, y = x Wᵀ + b in float against "
        "ŷ computed with the quantized weights (and inputs)."
    )
    OUTPUT_SQNR = "Output SQNR: 10·log10(Σy² / Σ(y − ŷ)²) in dB of the layer's outputs y."
    OUTPUT_COSINE = "Output cosine similarity: Σ y·ŷ / (‖y‖·‖ŷ‖) of the layer's outputs."
    OUTPUT_RATIO = (
        "Output MSE ratio: the algorithm's output MSE ÷ round-to-nearest's on the same "
        "scheme; below 1 the algorithm's layer output is closer to the float layer's."
    )
    CODES_CHANGED = "Codes changed: the share of stored codes that differ from round-to-nearest's."
    TIME = "Time: wall-clock seconds on the server that computed it (its machine and load)."
    EMBEDDING_COSINE = (
        "Embedding cosine: each sentence's embedding, fp32 against quantized model, as "
        "Σ e·ê / (‖e‖·‖ê‖); 1 is the same direction."
    )
    INPUTS_CLIPPED = (
        "Inputs clipped: activation values beyond their static (calibrated) range, cut to "
        "its end when quantized."
    )

    @property
    def definition(self) -> str:
        return self.value


def metric_help(metric: Metric, exact: object = None) -> str:
    """``metric``'s definition, then, when given, ``exact`` (the number unrounded or what
    it counts): ``"Mean squared error: mean((x − x̂)²) ... This tensor: 0.00123."``."""
    if not isinstance(metric, Metric):
        raise TypeError(f"metric must be a Metric, got {metric!r}")
    if exact is None or exact == "":
        return metric.definition
    return f"{metric.definition} This tensor: {exact}."


TABLE_COLUMNS: dict[str, Metric] = {
    "bits/element": Metric.BITS_PER_ELEMENT,
    "MSE": Metric.MSE,
    "max abs error": Metric.MAX_ABS,
    "SQNR (dB)": Metric.SQNR,
    "cosine": Metric.COSINE,
    "output MSE (held-out)": Metric.OUTPUT_MSE,
    "output SQNR (dB)": Metric.OUTPUT_SQNR,
    "bytes": Metric.BYTES,
}
"""The metric columns of the comparison tables (A/B's ``metrics_table``) by name."""


def with_help(
    config: Mapping[str, object],
    columns: Iterable[str],
    known: Mapping[str, Metric] = TABLE_COLUMNS,
) -> dict[str, object]:
    """``st.dataframe``'s ``column_config`` with each of ``columns`` that ``known`` names
    given its metric's definition as help (the "?" by its heading). ``config``'s entries
    are kept: a column setting (a dict, as ``st.column_config.*`` makes) gets ``help``
    added, a plain label becomes ``{"label": label, "help": ...}``."""
    out: dict[str, object] = dict(config)
    for name in columns:
        metric = known.get(name)
        if metric is None:
            continue
        entry = out.get(name)
        if isinstance(entry, Mapping):
            out[name] = {**entry, "help": metric.definition}
        elif isinstance(entry, str):
            out[name] = {"label": entry, "help": metric.definition}
        else:
            out[name] = {"help": metric.definition}
    return out


def size_ratio(reference: str, ratio: float) -> tuple[str, str]:
    """A card's label and value for ``ratio = reference bytes / stored bytes``: ``("Smaller
    than fp16", "3.56×")`` at or above 1; below 1 the ratio the other way round under
    "Larger than" (``0.57`` -> ``("Larger than fp16", "1.75×")``), so the words and the
    number never disagree. ``nan``/``0`` give ``"n/a"``."""
    if not (math.isfinite(ratio) and ratio > 0):
        return f"Size vs {reference}", "n/a"
    if ratio >= 1:
        return f"Smaller than {reference}", f"{ratio:.2f}×"
    return f"Larger than {reference}", f"{1 / ratio:.2f}×"
