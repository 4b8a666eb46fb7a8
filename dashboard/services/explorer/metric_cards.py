"""The explorer's metrics as cards (label, value, help) for the browser to show
(``dashboard.components.charts.metric_cards``): the error, storage and clipping of an
exploration, and an algorithm's run beside round-to-nearest.

Values are written compactly (at most about 7 characters: ``5.39e-5``, ``1.31 MB``,
``12.3k``) so six cards fit a row at laptop widths (1280 px with the sidebar open). Each
card's help defines the metric with its formula (``display.metric_help``), then gives the
exact number.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from quant_core import code_total

from ..display.bits import bits_text
from ..display.metric_help import Metric, metric_help, size_ratio
from ..display.scale_limits import scale_limit_text
from ..display.sizes import compact_bytes, compact_count
from .algorithm import AlgorithmExploration
from .explore import Exploration

__all__ = [
    "MetricCard",
    "algorithm_cards",
    "compact",
    "exploration_cards",
    "metrics_payload",
    "scale_limit_note",
]


@dataclass(frozen=True)
class MetricCard:
    """One metric: its ``label``, the ``value`` as shown, and ``help`` (the exact number and
    what it counts; empty for none)."""

    label: str
    value: str
    help: str = ""


def compact(v: float) -> str:
    """``v`` in at most 7 characters (``-`` adds one): 3 significant digits below 1, 4 from 1
    to 10,000 (``0.0123``, ``1235``), ``5.39e-5`` style outside; ``∞``/``-∞``/``nan``."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e4:
        text = f"{v:.3g}" if abs(v) < 1 else f"{v:.4g}"
        if "e" not in text:  # 9999.9 rounds up to 1e+04: written as below
            return text
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{float(mantissa):.3g}e{int(exponent)}"


def _db(v: float) -> str:
    if math.isinf(v):
        return "∞ (exact)" if v > 0 else "-∞ dB"
    return f"{v:.1f} dB"


def scale_limit_note(exp: Exploration) -> str:
    """Why the errors are what they are when the stored scales hit their dtype's limits
    (``display.scale_limits.scale_limit_text``); empty when they do not."""
    return scale_limit_text(exp.qt, exp.clip.n_clipped, float(exp.metrics.sqnr_db))


def exploration_cards(
    exp: Exploration, limit: str | None = None
) -> tuple[tuple[MetricCard, ...], tuple[MetricCard, ...]]:
    """Two rows of six: the errors, then storage and clipping. ``limit`` is
    ``scale_limit_note(exp)`` when the caller has it already (it reads every block scale),
    else it is computed here."""
    m, s, c = exp.metrics, exp.storage, exp.clip
    if limit is None:
        limit = scale_limit_note(exp)
    sqnr_help = metric_help(Metric.SQNR, f"{m.sqnr_db!r} dB")
    errors = (
        MetricCard("MSE", compact(m.mse), metric_help(Metric.MSE, repr(m.mse))),
        MetricCard("RMSE", compact(m.rmse), metric_help(Metric.RMSE, repr(m.rmse))),
        MetricCard(
            "Max abs error", compact(m.max_abs), metric_help(Metric.MAX_ABS, repr(m.max_abs))
        ),
        MetricCard("SQNR", _db(m.sqnr_db), f"{limit} {sqnr_help}" if limit else sqnr_help),
        MetricCard(
            "Cosine similarity", f"{m.cosine:.5f}", metric_help(Metric.COSINE, repr(m.cosine))
        ),
        MetricCard(
            "Mean abs error", compact(m.mean_abs), metric_help(Metric.MEAN_ABS, repr(m.mean_abs))
        ),
    )
    if exp.storage_note:
        stored = f"{s.code_bits}-bit codes + {exp.storage_note}"
    elif exp.config.two_level:
        stored = s.breakdown()  # every level of the format, with its bits per value
    else:
        stored = f"{s.code_bits}-bit codes + {s.n_scales:,} scales x {s.scale_bits} bits" + (
            f" + {s.n_zero_points:,} zero points x {s.zero_point_bits} bits"
            if s.n_zero_points
            else ""
        )
    storage = (
        MetricCard(
            "Bits per element",
            bits_text(s.bits_per_element),
            metric_help(Metric.BITS_PER_ELEMENT, f"{stored}, over {s.n_elements:,} elements"),
        ),
        MetricCard(
            "Bytes",
            compact_bytes(s.total_bytes),
            metric_help(Metric.BYTES, f"{s.total_bytes:,} bytes (fp32: {s.fp32_bytes:,} bytes)"),
        ),
        MetricCard(*size_ratio("fp32", s.ratio_vs_fp32), metric_help(Metric.SIZE_RATIO)),
        MetricCard(*size_ratio("fp16", s.ratio_vs_fp16), metric_help(Metric.SIZE_RATIO)),
        MetricCard(
            "Clipped",
            compact_count(c.n_clipped),
            metric_help(
                Metric.CLIPPED,
                f"{c.n_clipped:,} values, {c.n_clipped_low:,} below and {c.n_clipped_high:,} above",
            ),
        ),
        MetricCard(
            "Saturated codes",
            compact_count(c.n_saturated),
            metric_help(
                Metric.SATURATED,
                f"{c.n_saturated:,} elements; {exp.levels_used} of the format's "
                f"{code_total(exp.config)} codes used",
            ),
        ),
    )
    return errors, storage


def algorithm_cards(run: AlgorithmExploration) -> tuple[MetricCard, ...]:
    """Five cards for GPTQ/AWQ/HQQ: the layer's held-out output MSE against RTN's (model
    layers only; else the weight error of what the layer computes), the codes that differ
    from RTN's and the time."""
    out, label = run.output, run.choice.algorithm.label
    if out is not None:
        errors = (
            MetricCard(
                f"Output MSE, {label}",
                compact(out.mse),
                metric_help(Metric.OUTPUT_MSE, f"{out.describe()}; exact {out.mse!r}"),
            ),
            MetricCard(
                "Output MSE, RTN",
                compact(out.rtn_mse),
                metric_help(Metric.OUTPUT_MSE, repr(out.rtn_mse)),
            ),
            MetricCard(
                "Output vs RTN",
                f"{out.ratio:.2f}×",
                metric_help(Metric.OUTPUT_RATIO, "on the held-out sentences"),
            ),
        )
    else:
        errors = (
            MetricCard(
                f"Weight MSE, {label}",
                compact(run.effective.mse),
                metric_help(Metric.MSE, repr(run.effective.mse)),
            ),
            MetricCard(
                "Weight MSE, RTN",
                compact(run.rtn_effective.mse),
                metric_help(Metric.MSE, repr(run.rtn_effective.mse)),
            ),
            MetricCard(
                "Output vs RTN",
                "n/a",
                metric_help(
                    Metric.OUTPUT_RATIO,
                    "not measured: it needs a linear layer of the bundled model, whose "
                    "inputs the page can capture",
                ),
            ),
        )
    n = run.exploration.original.numel()
    return (
        *errors,
        MetricCard(
            "Codes ≠ RTN",
            f"{run.codes_changed / n:.1%}",
            metric_help(Metric.CODES_CHANGED, f"{run.codes_changed:,} of {n:,} codes"),
        ),
        MetricCard(
            "Time", f"{run.result.seconds:.2f} s", metric_help(Metric.TIME, "the algorithm's run")
        ),
    )


def metrics_payload(rows: tuple[tuple[MetricCard, ...], ...], of: str) -> dict:
    """What the browser's metrics component gets (JSON): ``rows``, each a list of cards
    ``{"label", "value", "help"}``, shown as one row of equal columns; ``of``, what they
    measure (``Exploration.describe()``: ``"int4 asym g128"``), kept on the
    element (``data-of``) for tools that wait for a scheme's numbers."""
    return {"rows": [[asdict(card) for card in row] for row in rows], "of": of}
