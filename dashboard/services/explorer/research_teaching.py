"""The teaching panel of a research format: normalise, ``q_k`` and rescale with the live
numbers, a worked table of the shown values, why tanh normalisation is not clipping, and
the transfer curve ``x -> x_hat`` of min-max levels and DoReFa on this tensor."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from quant_core import QkVariant
from quant_core.research import DoReFaResult, LevelQuantResult

from ..state.research import ResearchFormat, ResearchScheme
from .formulas import block_numbers, latex_number, latex_operand
from .research import ResearchExploration, research_result
from .teaching import ALL_VALUES_MAX, TeachingPanel

__all__ = [
    "research_formulas",
    "research_notes",
    "research_panel",
    "research_table",
    "transfer_figure",
]

_f, _p = latex_number, latex_operand
CURVE_POINTS = 801


def _qk_line(bits: int, variant: QkVariant, var: str) -> str:
    """``c`` and ``q_k`` for ``variant`` at ``bits``, symbolic then with the numbers."""
    n_codes = 1 << bits
    top = n_codes - 1
    if variant is QkVariant.ORIGINAL:
        return (
            rf"c = \operatorname{{round}}\left((2^{{{var}}}-1)\,u\right)"
            rf" = \operatorname{{round}}({top}\,u),\quad q_k(u) = \frac{{c}}{{{top}}}"
        )
    floor = (
        rf"c = \min\left(\left\lfloor 2^{{{var}}} u \right\rfloor, 2^{{{var}}}-1\right)"
        rf" = \min(\lfloor {n_codes}\,u \rfloor, {top})"
    )
    if variant is QkVariant.MODIFIED:
        return floor + rf",\quad q_k(u) = \frac{{c}}{{{n_codes}}}"
    return floor + rf",\quad q_k(u) = \frac{{c + 1/2}}{{{n_codes}}}"


def research_formulas(rexp: ResearchExploration) -> tuple[str, ...]:
    """LaTeX lines: normalise, ``q_k``, rescale, then the stored form ``x_hat = s q + m``,
    each with this tensor's numbers. Valid KaTeX (no ``\\text``, braces balanced)."""
    scheme, result, qt = rexp.scheme, rexp.result, rexp.exploration.qt
    half = 1 << (scheme.bits - 1)
    s, m = float(qt.scale), float(qt.offset) if qt.offset is not None else 0.0
    out = r"\hat x" if isinstance(result, LevelQuantResult) else "w_q"
    stored = (
        rf"{out} = s\,q + m,\quad q = c - 2^{{{scheme.bits - 1}}} = c - {half},"
        rf"\quad s = {_f(s)},\ m = {_f(m)}"
    )
    if isinstance(result, LevelQuantResult):
        lo, hi = result.x_min, result.x_max
        span = hi - lo
        return (
            rf"u = \frac{{x - \min x}}{{\max x - \min x}} = \frac{{x - {_p(lo)}}}{{{_f(span)}}}",
            _qk_line(scheme.bits, scheme.variant, "n"),
            rf"\hat x = \min x + q_k(u)\,(\max x - \min x) = {_f(lo)} + {_f(span)}\,q_k(u)",
            stored,
        )
    rescale = (
        rf"w_q = \left(2\,q_k(u) - 1\right)\max|w| = \left(2\,q_k(u) - 1\right) \cdot "
        rf"{_f(result.scale)}"
        if scheme.rescale
        else r"w_q = 2\,q_k(u) - 1"
    )
    return (
        rf"u = \frac{{\tanh(w)}}{{2\max|\tanh(w)|}} + \frac{{1}}{{2}}"
        rf" = \frac{{\tanh(w)}}{{{_f(2 * result.tanh_max)}}} + \frac{{1}}{{2}}",
        _qk_line(scheme.bits, scheme.variant, "k"),
        rescale,
        stored,
    )


def _picks(n: int, x: torch.Tensor, n_values: int = 8) -> list[int]:
    """Every index when ``n <= ALL_VALUES_MAX``, else the first ``n_values - 2`` and the
    indices of the minimum and maximum."""
    if n <= max(n_values, ALL_VALUES_MAX):
        return list(range(n))
    first = list(range(n_values - 2))
    ends = (int(x.argmin()), int(x.argmax()))
    return first + [i for i in dict.fromkeys(ends) if i not in first]


def research_table(rexp: ResearchExploration, n_values: int = 8) -> pd.DataFrame:
    """Value by value: ``x`` (DoReFa: ``tanh w`` too), ``u``, code ``c``, ``q_k(u)``,
    ``x_hat`` and the error, for every value of a small tensor, else the first few plus
    the minimum and maximum."""
    result, exp = rexp.result, rexp.exploration
    x = exp.original.reshape(-1)
    u = result.normalized.reshape(-1) if result.normalized is not None else None
    unit = result.unit.reshape(-1) if result.unit is not None else None
    codes = result.codes.reshape(-1)
    deq = exp.dequantized.reshape(-1)
    tanh = (
        result.tanh.reshape(-1)
        if isinstance(result, DoReFaResult) and result.tanh is not None
        else None
    )
    name = "w" if isinstance(result, DoReFaResult) else "x"
    rows = []
    for i in _picks(x.numel(), x, n_values):
        row: dict[str, object] = {"index": i, name: float(x[i])}
        if tanh is not None:
            row["tanh w"] = float(tanh[i])
        row["u (normalised)"] = float(u[i]) if u is not None else math.nan
        row["code c"] = int(codes[i])
        row["q_k(u)"] = float(unit[i]) if unit is not None else math.nan
        row[f"{name}̂"] = float(deq[i])
        row["error"] = float(x[i]) - float(deq[i])
        rows.append(row)
    return pd.DataFrame(rows)


_VARIANT_NOTES = {
    QkVariant.ORIGINAL: "q_k original, round((2^k − 1)·u)/(2^k − 1): levels at both ends of "
    "[0, 1]; the two end codes get half-width bins, so they are used about half as often "
    "as the others (error at most half a step).",
    QkVariant.MODIFIED: "q_k modified (AdaBits), min(floor(2^k·u), 2^k − 1)/2^k: [0, 1] is "
    "cut into 2^k equal bins, one per code, each mapped to its lower edge, so the levels "
    "stop at 1 − 2^−k (u = 1 lands there too) and a value can land up to a whole bin "
    "below itself (error up to 1/2^k, not half a step).",
    QkVariant.CENTERED: "q_k centered, (floor(2^k·u) + ½)/2^k: the same equal bins, each "
    "mapped to its own centre; error at most half a bin, and no level at either end (for "
    "DoReFa, none at 0 either).",
}


def research_notes(rexp: ResearchExploration) -> tuple[str, ...]:
    """The variant's rule, what is stored, and why tanh normalisation is not clipping, with
    this tensor's numbers."""
    scheme, result, exp = rexp.scheme, rexp.result, rexp.exploration
    params = ", ".join(f"{k} = {v:.6g}" for k, v in rexp.parameters.items()) or "none"
    notes = [
        _VARIANT_NOTES[scheme.variant],
        f"Stored: {exp.storage.n_elements:,} codes of {scheme.bits} bits, plus {params}: "
        f"{exp.storage_note}. The stored signed code is q = c − {1 << (scheme.bits - 1)}, "
        "as the maps show it.",
    ]
    a = max(abs(exp.value_min), abs(exp.value_max))
    if isinstance(result, LevelQuantResult):
        step = (result.x_max - result.x_min) / ((1 << scheme.bits) - 1)
        notes.append(
            f"Min-max normalisation is linear and clips nothing: the grid spans exactly "
            f"[{result.x_min:.4g}, {result.x_max:.4g}], so one extreme value stretches every "
            f"step (here {step:.4g}). Clipping would instead shrink the range and flatten the "
            "values beyond it onto the end levels; DoReFa's tanh does neither (see the curve)."
        )
        return tuple(notes)
    t_max = result.tanh_max
    if a > 0 and t_max > 0:
        u_half = math.tanh(a / 2) / (2 * t_max) + 0.5
        out = (2 * u_half - 1) * (a if scheme.rescale else 1.0)
        notes.append(
            f"tanh is not clipping. Clipping keeps x̂ ≈ x inside a range and flattens every "
            f"value beyond it onto the end level. tanh(w) / max|tanh w| bends the whole "
            f"range instead: nothing is clipped, but the grid is uniform in tanh(w), so in w "
            f"its steps widen toward the tails, and mid-range weights move outward. Here "
            f"max|w| = {a:.4g} and tanh(max|w|) = {t_max:.4g}: w = {a / 2:.4g} (half of "
            f"max|w|) normalises to u = {u_half:.4f}, where a linear w / (2 max|w|) + ½ gives "
            f"0.75, and comes out near {out:.4g}"
            + (" instead of itself." if scheme.rescale else " (plain DoReFa is in [−1, 1]).")
            + " For weights much smaller than 1, tanh(w) ≈ w and DoReFa is nearly a uniform "
            "symmetric grid."
        )
    if not scheme.rescale:
        notes.append(
            "Plain DoReFa outputs w_q in [−1, 1] whatever the weights' scale (in training a "
            "later layer absorbs it), so the errors above include that scale mismatch; "
            "rescale by max|w| to compare with the weights themselves."
        )
    return tuple(notes)


def _curve(x: torch.Tensor, scheme: ResearchScheme) -> np.ndarray:
    return research_result(x, scheme).dequantized.numpy(force=True).astype(np.float32)


def transfer_figure(rexp: ResearchExploration) -> go.Figure:
    """``x -> x_hat`` on this tensor: min-max levels over ``[min, max]`` and DoReFa over
    ``[-max|x|, max|x|]`` (rescaled unless the shown scheme is plain DoReFa), at the shown
    bits and variant, with the identity for reference. Each curve is the quantizer applied
    to evenly spaced points that include the ends, so its parameters (min and max, or
    ``max|tanh|`` and ``max|w|``) are this tensor's."""
    scheme, exp = rexp.scheme, rexp.exploration
    lo, hi = exp.value_min, exp.value_max
    a = max(abs(lo), abs(hi))
    xs_mm = torch.linspace(lo, hi, CURVE_POINTS)
    xs_mm[0], xs_mm[-1] = lo, hi
    xs_d = torch.linspace(-a, a, CURVE_POINTS)
    xs_d[0], xs_d[-1] = -a, a
    rescale = scheme.rescale if scheme.format is ResearchFormat.DOREFA else True
    mm = ResearchScheme(ResearchFormat.MINMAX_LEVELS, scheme.bits, scheme.variant)
    dr = ResearchScheme(ResearchFormat.DOREFA, scheme.bits, scheme.variant, rescale)
    shown = scheme.format
    traces = [
        go.Scatter(
            x=np.array([-a, a], dtype=np.float32),
            y=np.array([-a, a], dtype=np.float32),
            mode="lines",
            line={"color": "#999", "dash": "dot", "width": 1},
            name="x̂ = x",
        ),
        go.Scatter(
            x=xs_mm.numpy().astype(np.float32),
            y=_curve(xs_mm, mm),
            mode="lines",
            line={"color": "#4c78a8", "width": 3 if shown is ResearchFormat.MINMAX_LEVELS else 1.5},
            name="min-max levels",
        ),
        go.Scatter(
            x=xs_d.numpy().astype(np.float32),
            y=_curve(xs_d, dr),
            mode="lines",
            line={"color": "#e45756", "width": 3 if shown is ResearchFormat.DOREFA else 1.5},
            name="DoReFa tanh" + (" ×max|w|" if rescale else " (plain, in [−1, 1])"),
        ),
    ]
    return go.Figure(
        data=traces,
        layout={
            "title": {
                "text": f"What each value becomes on this tensor ({scheme.bits} bits, "
                f"q_k {scheme.variant.value}): min-max levels are uniform in x, DoReFa's "
                "thresholds uniform in tanh(x)",
                "font": {"size": 13},
            },
            "xaxis": {"title": {"text": "x (original)"}},
            "yaxis": {"title": {"text": "x̂ (dequantized)"}},
            "height": 360,
            "margin": {"l": 10, "r": 10, "t": 50, "b": 10},
            "legend": {"orientation": "h", "y": -0.2},
        },
    )


def research_panel(rexp: ResearchExploration) -> TeachingPanel:
    """The teaching panel of a research format (one block: the whole tensor)."""
    scheme, exp = rexp.scheme, rexp.exploration
    n = exp.original.numel()
    heading = (
        f"Showing the **whole tensor**: {scheme.format.label.removesuffix(' (research)')} "
        f"normalises all {n:,} values at once, quantizes them with q_k at {scheme.bits} bits "
        f"({scheme.variant.value}) and maps them back."
    )
    var = "x" if scheme.format is ResearchFormat.MINMAX_LEVELS else "w"
    symbols = (
        f"Symbols: *{var}*: an original value; *u*: {var} normalised into [0, 1]; *c*: its "
        f"code, 0 to {(1 << scheme.bits) - 1}; *q*k(*u*): the level in [0, 1] code *c* "
        f"names; *{var}̂*: what *c* dequantizes to; round: to nearest, halves to even; "
        "⌊ ⌋: floor; *q*, *s*, *m*: the stored signed code and the levels' spacing and "
        "offset (x̂ = s·q + m), as the maps' hover shows them."
    )
    return TeachingPanel(
        block_numbers(exp, 0),
        heading,
        symbols,
        research_formulas(rexp),
        research_notes(rexp),
        research_table(rexp),
        None,
        transfer_figure(rexp),
    )
