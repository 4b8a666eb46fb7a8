"""The teaching panel: the current scheme's formulas filled with live numbers, and a worked
table that answers "how did this value become that one" step by step."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch

from quant_core import Format, Mode, RangeMethod, Rounding, codebook_for

from .explore import Exploration, block_cells, block_values

__all__ = [
    "BlockNumbers",
    "TeachingPanel",
    "block_notes",
    "block_numbers",
    "formulas",
    "teaching_panel",
    "worked_table",
]


@dataclass(frozen=True)
class BlockNumbers:
    """The live numbers of one block: its scale, zero point, code range, data range, the
    representable range ``[range_lo, range_hi]`` and the range the grid was fitted to
    (``chosen_lo``/``chosen_hi``: the clipping range under percentile/MSE)."""

    block: int
    scale: float
    zero_point: int
    qmin: int
    qmax: int
    data_min: float
    data_max: float
    range_lo: float
    range_hi: float
    chosen_lo: float
    chosen_hi: float


def block_numbers(exp: Exploration, block: int) -> BlockNumbers:
    """Scale, zero point and ranges of ``block`` (finite values only)."""
    values = block_values(exp, block)
    lo, hi = torch.aminmax(values) if values.numel() else (torch.tensor(0.0), torch.tensor(0.0))
    rng = exp.qt.representable_range()
    chosen = exp.qt.chosen_range or rng
    cfg = exp.config
    return BlockNumbers(
        block=block,
        scale=float(exp.qt.scale.reshape(-1)[block]),
        zero_point=int(exp.qt.zero_point.reshape(-1)[block]),
        qmin=cfg.qmin,
        qmax=cfg.qmax,
        # A block of non-finite cells only was quantized as stand-in zeros.
        data_min=float(lo),
        data_max=float(hi),
        range_lo=float(rng.lo.reshape(-1)[block]),
        range_hi=float(rng.hi.reshape(-1)[block]),
        chosen_lo=float(chosen.lo.reshape(-1)[block]),
        chosen_hi=float(chosen.hi.reshape(-1)[block]),
    )


def _f(v: float) -> str:
    """A number for LaTeX: 5 significant digits, negatives in parentheses when substituted."""
    text = f"{v:.5g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = rf"{mant}\times 10^{{{int(exp)}}}"
    return text


def _p(v: float) -> str:
    return f"({_f(v)})" if v < 0 else _f(v)


def formulas(exp: Exploration, nums: BlockNumbers) -> tuple[str, ...]:
    """LaTeX lines for the current format and mode, substituted with ``nums``."""
    cfg = exp.config
    s, z, qmin, qmax = nums.scale, nums.zero_point, nums.qmin, nums.qmax
    rounding = (
        r"\operatorname{round}" if cfg.rounding is Rounding.NEAREST else r"\operatorname{sround}"
    )
    clipped = cfg.range_method is not RangeMethod.MINMAX
    if cfg.format is not Format.INT:
        cb = codebook_for(cfg.format)
        vmax = cb.max_abs
        a = "a" if clipped else r"\max|r|"
        return (
            rf"s = \frac{{{a}}}{{\max|v|}} = \frac{{{_f(s * vmax)}}}{{{_f(vmax)}}} = {_f(s)}",
            rf"q = \arg\min_k \left| \frac{{r}}{{{_f(s)}}} - v_k \right|"
            rf"\quad (v = \text{{the {len(cb.values)} {cfg.format.value.upper()} values}})",
            rf"\hat r = s \cdot v_q = {_f(s)} \cdot v_q",
        )
    if cfg.mode is Mode.SYMMETRIC:
        a = s * qmax
        head = r"a" if clipped else r"\max|r|"
        return (
            rf"q_{{\min}} = -2^{{{cfg.bits - 1}}} = {qmin},\quad"
            rf" q_{{\max}} = 2^{{{cfg.bits - 1}}}-1 = {qmax}",
            rf"s = \frac{{{head}}}{{q_{{\max}}}} = \frac{{{_f(a)}}}{{{qmax}}} = {_f(s)},"
            r"\quad z = 0",
            rf"q = \operatorname{{clamp}}\left({rounding}\left(\frac{{r}}{{{_f(s)}}}\right),"
            rf" {qmin}, {qmax}\right)",
            rf"\hat r = s\,q = {_f(s)}\,q",
        )
    lo, hi = (nums.chosen_lo, nums.chosen_hi) if clipped else (nums.data_min, nums.data_max)
    lo_name, hi_name = (r"\ell", "h") if clipped else (r"r_{\min}", r"r_{\max}")
    z_raw = qmin - lo / s
    return (
        rf"q_{{\min}} = {qmin},\quad q_{{\max}} = {qmax}",
        rf"s = \frac{{{hi_name} - {lo_name}}}{{q_{{\max}} - q_{{\min}}}}"
        rf" = \frac{{{_f(hi)} - {_p(lo)}}}{{{qmax} - ({qmin})}} = {_f(s)}",
        rf"z = \operatorname{{clamp}}\left(\operatorname{{round}}\left(q_{{\min}} -"
        rf" \frac{{{lo_name}}}{{s}}\right)\right) = \operatorname{{clamp}}"
        rf"(\operatorname{{round}}({_f(z_raw)})) = {z}",
        rf"q = \operatorname{{clamp}}\left({rounding}\left(\frac{{r}}{{{_f(s)}}} + {_p(z)}\right),"
        rf" {qmin}, {qmax}\right)",
        rf"\hat r = s\,(q - z) = {_f(s)}\,(q - {_p(z)})",
    )


def worked_table(exp: Exploration, block: int, n_values: int = 8) -> pd.DataFrame:
    """Step-by-step quantization of up to ``n_values`` values of ``block``: its first values
    plus its minimum and maximum (so the ends of the range are always shown)."""
    cells = block_cells(exp, block)
    values = exp.original[cells].reshape(-1)
    codes = exp.qt.codes[cells].reshape(-1)
    deq = exp.dequantized[cells].reshape(-1)
    if exp.finite is None:
        first = list(range(min(values.numel(), max(1, n_values - 2))))
        extremes = (int(values.argmin()), int(values.argmax()))
    else:
        finite = torch.isfinite(values).nonzero().reshape(-1)
        if finite.numel() == 0:
            return pd.DataFrame()
        first = finite[: max(1, n_values - 2)].tolist()
        fv = values[finite]
        extremes = (int(finite[fv.argmin()]), int(finite[fv.argmax()]))
    pick = first + [i for i in dict.fromkeys(extremes) if i not in first]
    nums = block_numbers(exp, block)
    cfg = exp.config
    stochastic = cfg.rounding is Rounding.STOCHASTIC
    rounded_label = "rounded (stochastic)" if stochastic else "rounded"
    value_label = "value v picked (stochastic)" if stochastic else "nearest value v"
    rows = []
    for i in pick:
        r = float(values[i])
        q = int(codes[i])
        r_hat = float(deq[i])
        if cfg.format is Format.INT:
            v = r / nums.scale
            shifted = v + nums.zero_point
            if stochastic:
                # floor or ceil, drawn: the code itself says which (unless it was clamped)
                rounded = float(min(max(q, math.floor(shifted)), math.ceil(shifted)))
            else:
                rounded = float(torch.round(torch.tensor(shifted, dtype=torch.float32)))
            clamped = rounded < nums.qmin or rounded > nums.qmax
            rows.append(
                {
                    "index in block": i,
                    "r": r,
                    "r / s": v,
                    "+ z": shifted,
                    rounded_label: rounded,
                    "code q (clamped)": q,
                    "clamped?": "yes" if clamped else "",
                    "r̂ = s(q − z)": r_hat,
                    "error r − r̂": r - r_hat,
                }
            )
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


def block_notes(exp: Exploration, nums: BlockNumbers) -> tuple[str, ...]:
    """Plain-language notes on what is special about this block's numbers."""
    cfg = exp.config
    notes: list[str] = []
    if cfg.has_zero_point:
        z_raw = (
            nums.qmin
            - (nums.data_min if cfg.range_method is RangeMethod.MINMAX else nums.chosen_lo)
            / nums.scale
        )
        if round(z_raw) < nums.qmin or round(z_raw) > nums.qmax:
            side = "positive" if nums.chosen_lo > 0 else "negative"
            notes.append(
                f"The zero point wanted {z_raw:.4g} but is clamped to {nums.zero_point}: every "
                f"value of this block is {side}, so its range excludes 0. With the clamp the "
                f"grid covers [{nums.range_lo:.4g}, {nums.range_hi:.4g}] and values beyond it "
                "are clipped. Symmetric mode, or a range that includes 0, avoids this."
            )
    outside = nums.data_max > nums.chosen_hi or nums.data_min < nums.chosen_lo
    if outside and cfg.range_method is not RangeMethod.MINMAX:
        notes.append(
            f"The {cfg.range_method.value} range [{nums.chosen_lo:.4g}, {nums.chosen_hi:.4g}] "
            f"is narrower than the data [{nums.data_min:.4g}, {nums.data_max:.4g}]: values "
            "outside it are clipped, in exchange for a finer step inside."
        )
    return tuple(notes)


@dataclass(frozen=True, eq=False)
class TeachingPanel:
    """Everything the teaching panel shows for one block."""

    numbers: BlockNumbers
    formulas: tuple[str, ...]
    notes: tuple[str, ...]
    table: pd.DataFrame


def teaching_panel(exp: Exploration, block: int) -> TeachingPanel:
    nums = block_numbers(exp, block)
    return TeachingPanel(
        nums, formulas(exp, nums), block_notes(exp, nums), worked_table(exp, block)
    )
