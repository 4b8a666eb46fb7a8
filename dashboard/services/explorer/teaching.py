"""The teaching panel: the current scheme's formulas filled with live numbers, and a worked
table that answers "how did this value become that one" step by step."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import torch

from quant_core import Format, Mode, PerChannel, QuantConfig, RangeMethod, Rounding, ZeroPoint

from .block_values import BlockValues, extreme_indices
from .explore import Exploration, block_cells, block_label, block_values
from .formulas import (
    BlockNumbers,
    block_numbers,
    dtype_clamped_scale,
    format_name,
    formulas,
    rule_scale,
    scale_fits,
)
from .stored import (
    is_stored_format,
    layout_text,
    stored_formulas,
    stored_heading,
    stored_numbers,
    stored_symbols,
    stored_table,
)

__all__ = [
    "ALL_VALUES_MAX",
    "SCALES_TABLE_MAX",
    "TeachingPanel",
    "block_notes",
    "heading",
    "scales_table",
    "symbols",
    "teaching_panel",
    "worked_table",
]

# A block of at most this many values is listed whole in the worked table (the course's
# 3x3 and 10-value examples included); larger ones show their first values and extremes.
ALL_VALUES_MAX = 64
# Tensors with at most this many blocks get a table of every block's scale.
SCALES_TABLE_MAX = 64


def worked_table(
    exp: Exploration, block: int, n_values: int = 8, stats: BlockValues | None = None
) -> pd.DataFrame:
    """Step-by-step quantization of ``block``'s values: every value when the block has at
    most ``max(n_values, ALL_VALUES_MAX)``, else its first ``n_values - 2`` plus its minimum
    and maximum (so the ends of the range are always shown)."""
    cells = block_cells(exp, block)
    values = exp.original[cells].reshape(-1)
    codes = exp.qt.codes[cells].reshape(-1)
    deq = exp.dequantized[cells].reshape(-1)
    if exp.finite is None:
        # Every value is finite: no index list over a block that may be the whole tensor.
        n = values.numel()
        if n <= max(n_values, ALL_VALUES_MAX):
            pick = list(range(n))
        else:
            first = list(range(max(1, n_values - 2)))
            extremes = stats.extremes if stats is not None else None
            if extremes is None:
                extremes = extreme_indices(values)
            pick = first + [i for i in dict.fromkeys(extremes) if i not in first]
    else:
        candidates = torch.isfinite(values).nonzero().reshape(-1)
        if candidates.numel() == 0:
            return pd.DataFrame()
        if candidates.numel() <= max(n_values, ALL_VALUES_MAX):
            pick = candidates.tolist()
        else:
            first = candidates[: max(1, n_values - 2)].tolist()
            fv = values[candidates]
            extremes = (int(candidates[fv.argmin()]), int(candidates[fv.argmax()]))
            pick = first + [i for i in dict.fromkeys(extremes) if i not in first]
    nums = block_numbers(exp, block)
    cfg = exp.config
    stochastic = cfg.rounding is Rounding.STOCHASTIC
    rounded_label = "rounded (stochastic)" if stochastic else "rounded"
    value_label = "value v picked (stochastic)" if stochastic else "nearest value v"
    float_min = cfg.float_offset
    rows = []
    for i in pick:
        r = float(values[i])
        q = int(codes[i])
        r_hat = float(deq[i])
        if cfg.format is Format.INT:
            if float_min:
                shifted = (r - nums.offset) / nums.scale
            else:
                shifted = r / nums.scale + nums.zero_point
            if stochastic:
                # floor or ceil, drawn: the code itself says which (unless it was clamped)
                rounded = float(min(max(q, math.floor(shifted)), math.ceil(shifted)))
            else:
                rounded = float(torch.round(torch.tensor(shifted, dtype=torch.float32)))
            clamped = rounded < nums.qmin or rounded > nums.qmax
            row: dict[str, object] = {"index in block": i, "r": r}
            if float_min:
                row["(r − m) / s"] = shifted
            else:
                row["r / s"] = r / nums.scale
                row["+ z"] = shifted
            row.update(
                {
                    rounded_label: rounded,
                    "code q (clamped)": q,
                    "clamped?": "yes" if clamped else "",
                    ("r̂ = s·q + m" if float_min else "r̂ = s(q − z)"): r_hat,
                    "error r − r̂": r - r_hat,
                }
            )
            rows.append(row)
        else:
            rows.append(
                {
                    "index in block": i,
                    "r": r,
                    "r / s": r / nums.scale,
                    value_label: r_hat / nums.scale,
                    "code q": q,
                    "r̂ = s·v": r_hat,
                    "error r − r̂": r - r_hat,
                }
            )
    return pd.DataFrame(rows)


def scales_table(exp: Exploration) -> pd.DataFrame | None:
    """Every block's scale (and zero point or float offset) with its data range, for
    tensors of at most ``SCALES_TABLE_MAX`` blocks; ``None`` for one block or more blocks."""
    n = exp.n_blocks
    if n == 1 or n > SCALES_TABLE_MAX:
        return None
    cfg = exp.config
    rng = exp.qt.representable_range()
    rows = []
    for b in range(n):
        values = block_values(exp, b)
        row: dict[str, object] = {
            "block": block_label(exp, b),
            "s": float(exp.qt.scale.reshape(-1)[b]),
        }
        if cfg.float_offset and exp.qt.offset is not None:
            row["m"] = float(exp.qt.offset.reshape(-1)[b])
        elif cfg.has_zero_point:
            row["z"] = int(exp.qt.zero_point.reshape(-1)[b])
        if values.numel():
            row["min r"], row["max r"] = float(values.min()), float(values.max())
        row["lowest level"] = float(rng.lo.reshape(-1)[b])
        row["highest level"] = float(rng.hi.reshape(-1)[b])
        rows.append(row)
    return pd.DataFrame(rows)


_CONVENTION_TEXT = {
    ZeroPoint.INCLUDE_ZERO: "**include zero** (the default, as PyTorch and torchao): each "
    "block's range is widened to contain 0, so z is an integer in [q_min, q_max] that is "
    "never clamped and 0 is exact",
    ZeroPoint.FLOAT_MIN: "**float min** (as tinygemm and GGUF Q4_1): x̂ = s·q + m with a float "
    "offset m per block, stored in the scale dtype; the levels run from the block's min to "
    "its max, and 0 need not be a level",
    ZeroPoint.COURSE_CLAMP: "**course clamp** (the course's lessons): z = clamp(round(q_min − "
    "r_min/s)), without widening the range; a block whose values are all positive or all "
    "negative has its zero point clamped",
}


def heading(exp: Exploration, block: int) -> str:
    """Markdown: which block the panel shows and the zero-point convention in force."""
    cfg = exp.config
    n = exp.n_blocks
    what = block_label(exp, block)
    if n == 1:
        text = f"Showing the **whole tensor**: one scale for all {exp.original.numel():,} values."
    else:
        kind = "channel" if isinstance(cfg.granularity, PerChannel) else "group"
        text = (
            f"Showing **{what}**, one of {n:,} blocks, each with its own scale"
            + (" and zero point" if cfg.has_zero_point else "")
            + f": pick another {kind} with the number above."
        )
    if cfg.has_zero_point:
        text += f"\n\nZero point convention: {_CONVENTION_TEXT[cfg.zero_point]}."
    return text


def symbols(exp: Exploration) -> str:
    """Markdown: what every symbol of the formulas and the table means."""
    cfg = exp.config
    parts = [
        "*r*: an original value of the block",
        "*s*: the block's scale (stored in " + cfg.scale_dtype.value + ")",
        "*q*: the code stored for *r*",
        "*r̂*: the value *q* dequantizes to; error = *r* − *r̂*",
    ]
    if cfg.format is Format.INT:
        parts.append(
            f"*q*min, *q*max: the lowest and highest code of {cfg.bits} bits "
            f"({cfg.qmin} and {cfg.qmax})"
        )
        parts.append(
            "round: to the nearest integer, halves to even"
            if cfg.rounding is Rounding.NEAREST
            else "sround: stochastic rounding, up with probability equal to the fraction"
        )
        parts.append("clamp(x, a, b): x limited to [a, b]")
        if cfg.float_offset:
            parts.append("*m*: the block's float offset, the value of code 0")
        elif cfg.has_zero_point:
            parts.append("*z*: the block's integer zero point, the code of the value 0")
    else:
        parts.append(f"*v*ₖ: the {format_name(cfg.format)} values, *v*_q the one code *q* names")
        parts.append("max|v|: the largest of them")
    if cfg.range_method is not RangeMethod.MINMAX:
        parts.append(
            f"ℓ, h (or *a* when symmetric): the {cfg.range_method.value} clipping range the "
            "grid is fitted to"
        )
    elif cfg.format is Format.INT and cfg.mode is Mode.ASYMMETRIC:
        parts.append("*r*min, *r*max: the block's smallest and largest value")
    else:
        parts.append("max|r|: the block's largest magnitude")
    return "Symbols: " + "; ".join(parts) + "."


def _who_chose(cfg: QuantConfig, nums: BlockNumbers) -> str:
    """Which quantizers store a scale other than the min-max rule's, for ``cfg``'s mode.
    compressed-tensors' ``calculate_qparams`` (llm-compressor's observers) divides a
    symmetric block's max|r| by ``(qmax - qmin) / 2``, 7.5 at int4, not the lab's qmax;
    its asymmetric rule is the include-zero one, ``(max(h, 0) - min(l, 0)) / (qmax - qmin)``
    with z rounded, so an asymmetric file's other scale was chosen by a search or a fit.
    Markdown: ``*r*min`` as the symbols' legend writes it."""
    if cfg.has_zero_point:
        return (
            "llm-compressor's asymmetric rule widens the range to contain 0, s = "
            f"(max(*r*max, 0) − min(*r*min, 0)) / {nums.qmax - nums.qmin}, and rounds z; GPTQ "
            "and HQQ fit their scales and zero points to the error, AWQ searches a narrower "
            "range"
        )
    return (
        "llm-compressor's symmetric int4 divides max|r| by (qmax − qmin)/2 = 7.5; GPTQ and "
        "HQQ fit their scales to the error"
    )


def block_notes(exp: Exploration, nums: BlockNumbers) -> tuple[str, ...]:
    """Plain-language notes on what is special about this block's numbers."""
    cfg = exp.config
    notes: list[str] = []
    if not scale_fits(exp, nums):
        # a file's (or an algorithm's) own scale: the notes below explain the min-max rule
        # and would say things of this block that are not so (CT's symmetric int4 puts
        # -max|r| on code -8: "lands on code -8, not on the lowest code -8")
        rule = rule_scale(exp, nums)
        clamped = dtype_clamped_scale(exp, nums)
        if clamped is not None and math.isclose(clamped[0], nums.scale, rel_tol=2.0**-7):
            # the lab's own rounding, not a file's or an algorithm's choice
            stored, limit = clamped
            dtype = cfg.scale_dtype.value
            effect = (
                "values below s / 2 in magnitude round to 0"
                if stored > (rule or 0.0)
                else "values beyond s × qmax are clipped"
            )
            return (
                f"This block's scale s = {stored:.4g} is the {limit} value: the min-max "
                f"rule's {rule:.4g} for its values [{nums.data_min:.4g}, "
                f"{nums.data_max:.4g}] does not fit in {dtype}, the dtype the scales are "
                f"stored in, so {effect}. fp32 scales keep the rule's scale.",
            )
        return (
            f"This block's scale s = {nums.scale:.4g} is the one stored, not the min-max "
            f"rule's {rule:.4g} for its values [{nums.data_min:.4g}, {nums.data_max:.4g}]: "
            f"the file's quantizer or the algorithm chose it ({_who_chose(cfg, nums)}).",
        )
    clipped = cfg.range_method is not RangeMethod.MINMAX
    lo = nums.chosen_lo if clipped else nums.data_min
    hi = nums.chosen_hi if clipped else nums.data_max
    if cfg.has_zero_point and (lo > 0 or hi < 0):
        side = "positive" if lo > 0 else "negative"
        if cfg.zero_point is ZeroPoint.COURSE_CLAMP:
            z_raw = nums.qmin - lo / nums.scale
            notes.append(
                f"The zero point wanted {z_raw:.4g} but is clamped to {nums.zero_point}: every "
                f"value of this block is {side}, so its range excludes 0. With the clamp the "
                f"grid covers [{nums.range_lo:.4g}, {nums.range_hi:.4g}] and values beyond it "
                "are clipped. Symmetric mode, or the include-zero or float-min convention, "
                "avoids this."
            )
        elif cfg.zero_point is ZeroPoint.INCLUDE_ZERO:
            notes.append(
                f"Every value of this block is {side}, so its range [{lo:.4g}, {hi:.4g}] is "
                f"widened to [{min(lo, 0.0):.4g}, {max(hi, 0.0):.4g}] to contain 0: z = "
                f"{nums.zero_point} is a code, not clamped, and 0 is exact, at the price of "
                "levels spent between 0 and the data."
            )
        else:
            notes.append(
                f"Every value of this block is {side}: the float offset m = {nums.offset:.6g} "
                f"puts code {nums.qmin} on the block's minimum and {nums.qmax} on its maximum, "
                "so no level is spent outside the data (0 is not a level here)."
            )
    if cfg.format is Format.INT and cfg.mode is Mode.SYMMETRIC and nums.data_min < 0:
        low_code = round(nums.data_min / nums.scale)
        notes.append(
            f"Symmetric: one scale s = max|r| / {nums.qmax} for both signs, so ±max|r| land on "
            f"codes ±{nums.qmax}. The block's minimum {nums.data_min:.4g} lands on code "
            f"round({nums.data_min:.4g} / {nums.scale:.4g}) = {low_code}, not on the lowest "
            f"code {nums.qmin}: its magnitude is smaller than max|r| = "
            f"{max(abs(nums.data_min), abs(nums.data_max)):.4g}"
            + (
                ""
                if low_code > nums.qmin
                else f", and code {nums.qmin} is only reached by values below −max|r|"
            )
            + f". Code {nums.qmin} = {nums.qmin * nums.scale:.4g} exists because "
            f"{cfg.bits} bits hold {1 << cfg.bits} codes and 0 takes one, so the negative side "
            "has one more; the codes below it go unused."
        )
    outside = nums.data_max > nums.chosen_hi or nums.data_min < nums.chosen_lo
    if outside and clipped:
        notes.append(
            f"The {cfg.range_method.value} range [{nums.chosen_lo:.4g}, {nums.chosen_hi:.4g}] "
            f"is narrower than the data [{nums.data_min:.4g}, {nums.data_max:.4g}]: values "
            "outside it are clipped, in exchange for a finer step inside."
        )
    return tuple(notes)


@dataclass(frozen=True, eq=False)
class TeachingPanel:
    """Everything the teaching panel shows for one block: ``heading`` (which block, which
    convention) and ``symbols`` (markdown), the LaTeX ``formulas``, ``notes``, the worked
    ``table`` and, for small tensors, every block's ``scales`` (else ``None``); ``figure``: a
    plot beside them (the research formats' transfer curve), else ``None``."""

    numbers: BlockNumbers
    heading: str
    symbols: str
    formulas: tuple[str, ...]
    notes: tuple[str, ...]
    table: pd.DataFrame
    scales: pd.DataFrame | None
    figure: go.Figure | None = None

    @property
    def markdown(self) -> str:
        """The heading, then each formula as a display-math block (``$$`` on lines of their
        own, as ``st.latex`` writes one): the page shows them as one element, not one per
        formula (each element the browser re-renders costs it a few ms a rerun)."""
        return "\n\n".join((self.heading, *(f"$$\n{f}\n$$" for f in self.formulas)))


def teaching_panel(
    exp: Exploration, block: int, stats: BlockValues | None = None
) -> TeachingPanel:
    """``stats``: ``block_value_stats(exp, block)`` computed before (for another scheme of
    the same tensor), so the worked table finds the block's extremes without a pass."""
    nums = block_numbers(exp, block)
    if is_stored_format(exp.config):
        # a shipped format: explained by what it stores, level by level
        stored = stored_numbers(exp, block)
        return TeachingPanel(
            nums,
            stored_heading(exp, block) + "\n\n" + layout_text(exp),
            stored_symbols(exp),
            stored_formulas(exp, stored),
            (),
            stored_table(exp, block),
            None,
        )
    return TeachingPanel(
        nums,
        heading(exp, block),
        symbols(exp),
        formulas(exp, nums),
        block_notes(exp, nums),
        worked_table(exp, block, stats=stats),
        scales_table(exp),
    )
