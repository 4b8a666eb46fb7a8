"""The teaching panel's formulas: each block's numbers (``block_numbers``) and the current
scheme's formulas written in LaTeX with them (``formulas``), with the helpers that write a
number or a name so that KaTeX renders it."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quant_core import (
    Format,
    Mode,
    RangeMethod,
    Rounding,
    ScaleDtype,
    ZeroPoint,
    codebook_for,
)

from .explore import Exploration, block_values

__all__ = [
    "BlockNumbers",
    "block_numbers",
    "dtype_clamped_scale",
    "format_name",
    "formulas",
    "latex_number",
    "latex_operand",
    "latex_text",
    "rule_scale",
    "scale_fits",
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
    offset: float = 0.0


def _stored_scale_line(s: float, exp: Exploration, nums: BlockNumbers) -> str:
    """``s = 0.0077820`` (stored), with what the min-max rule would have given."""
    rule = rule_scale(exp, nums)
    return (
        rf"s = {_f(s)}{latex_text(' (stored; the min-max rule gives ')}{_f(rule or 0.0)}"
        + latex_text(")")
    )


def block_numbers(exp: Exploration, block: int) -> BlockNumbers:
    """Scale, zero point (or float-min offset ``m``) and ranges of ``block`` (finite values
    only)."""
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
        offset=0.0 if exp.qt.offset is None else float(exp.qt.offset.reshape(-1)[block]),
    )


def rule_scale(exp: Exploration, nums: BlockNumbers) -> float | None:
    """The scale the min-max rule the formulas write gives this block's values: ``max|r| /
    qmax`` (symmetric), ``(r_max - r_min) / (qmax - qmin)`` (asymmetric; with 0 put in the
    range under the include-zero convention); ``None`` where the formulas derive none from
    the values (a codebook format, a clipping range)."""
    cfg = exp.config
    if cfg.format is not Format.INT or cfg.range_method is not RangeMethod.MINMAX:
        return None
    lo, hi = nums.data_min, nums.data_max
    if cfg.mode is Mode.SYMMETRIC:
        return max(abs(lo), abs(hi)) / nums.qmax
    if cfg.zero_point is ZeroPoint.INCLUDE_ZERO:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    return (hi - lo) / (nums.qmax - nums.qmin)


_STORED_SCALE_TOL = 2.0**-7
"""How far a stored scale may sit from the rule's and still be the rule's: bf16, the
coarsest scale dtype, keeps 8 significant bits (a relative step of at most 2^-8)."""


def scale_fits(exp: Exploration, nums: BlockNumbers) -> bool:
    """Whether the block's scale is the one ``rule_scale`` gives (up to its dtype's
    rounding). A quantized file's or an algorithm's own scale need not be (llm-compressor's
    symmetric int4 divides max|r| by (qmax - qmin) / 2 = 7.5, a GPTQ file's scales were
    fitted to weights GPTQ changed since): its formulas then show the scale as stored
    instead of deriving it."""
    rule = rule_scale(exp, nums)
    if rule is None or rule <= 0.0:  # nothing to derive: a block of zeros
        return True
    return abs(nums.scale - rule) <= _STORED_SCALE_TOL * rule


_HALF_DTYPES = {ScaleDtype.FP16: torch.float16, ScaleDtype.BF16: torch.bfloat16}


def dtype_clamped_scale(exp: Exploration, nums: BlockNumbers) -> tuple[float, str] | None:
    """Where ``rule_scale`` lies outside what the config's fp16 or bf16 scale dtype holds,
    the scale stored instead (the rule's clamped to the dtype's smallest positive value or
    its largest, then rounded to it) and which limit (``"smallest positive fp16"``,
    ``"largest fp16"``); ``None`` when the rule's scale fits the dtype (or there is none,
    or the scales are stored in fp32 or in two levels). Values near 1e-8 under fp16 scales
    get s = 2^-24 (5.96e-8), values near 3e7 s = 65504."""
    cfg = exp.config
    dtype = _HALF_DTYPES.get(cfg.scale_dtype)
    rule = rule_scale(exp, nums)
    if dtype is None or cfg.two_level or rule is None or rule <= 0.0:
        return None
    info = torch.finfo(dtype)
    smallest = info.tiny * info.eps  # the smallest subnormal
    if smallest <= rule <= info.max:
        return None
    name = cfg.scale_dtype.value
    limit = f"smallest positive {name}" if rule < smallest else f"largest {name}"
    stored = torch.tensor(rule).clamp(smallest, info.max).to(dtype).float()
    return float(stored), limit


def latex_number(v: float) -> str:
    """A number for LaTeX: 5 significant digits, an exponent written as times 10^k."""
    text = f"{v:.5g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = rf"{mant}\times 10^{{{int(exp)}}}"
    return text


def latex_operand(v: float) -> str:
    """``latex_number``, in parentheses when negative (a substituted operand)."""
    return f"({latex_number(v)})" if v < 0 else latex_number(v)


_f, _p = latex_number, latex_operand


_TEXT_SPECIAL = {c: "\\" + c for c in "_#%&{}$"}


def latex_text(text: str) -> str:
    """``\text{...}`` with LaTeX's special characters escaped (an unescaped ``_`` there is
    what made KaTeX show the FP4/FP8 lines as raw red source)."""
    return r"\text{" + "".join(_TEXT_SPECIAL.get(c, c) for c in text) + "}"


def format_name(cfg_format: Format) -> str:
    return cfg_format.value.upper().replace("_", " ")


def formulas(exp: Exploration, nums: BlockNumbers) -> tuple[str, ...]:
    """LaTeX lines for the current format, mode and zero-point convention, substituted with
    ``nums``. Every line is valid KaTeX: braces balance, ``\text{}`` holds no raw ``_``."""
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
        values = latex_text(f"the {len(cb.values)} {format_name(cfg.format)} values")
        return (
            rf"s = \frac{{{a}}}{{\max|v|}} = \frac{{{_f(s * vmax)}}}{{{_f(vmax)}}} = {_f(s)}",
            rf"q = \arg\min_k \left| \frac{{r}}{{{_f(s)}}} - v_k \right|\quad (v = {values})",
            rf"\hat r = s \cdot v_q = {_f(s)} \cdot v_q",
        )
    code_range = (
        rf"q_{{\min}} = -2^{{{cfg.bits - 1}}} = {qmin},\quad"
        rf" q_{{\max}} = 2^{{{cfg.bits - 1}}}-1 = {qmax}"
    )
    fits = scale_fits(exp, nums)
    if cfg.mode is Mode.SYMMETRIC:
        a = s * qmax
        head = r"a" if clipped else r"\max|r|"
        scale_line = (
            rf"s = \frac{{{head}}}{{q_{{\max}}}} = \frac{{{_f(a)}}}{{{qmax}}} = {_f(s)},"
            r"\quad z = 0"
            if fits
            else _stored_scale_line(s, exp, nums) + r",\quad z = 0"
        )
        return (
            code_range,
            scale_line,
            rf"q = \operatorname{{clamp}}\left({rounding}\left(\frac{{r}}{{{_f(s)}}}\right),"
            rf" {qmin}, {qmax}\right)",
            rf"\hat r = s\,q = {_f(s)}\,q",
        )
    lo, hi = (nums.chosen_lo, nums.chosen_hi) if clipped else (nums.data_min, nums.data_max)
    lo_name, hi_name = (r"\ell", "h") if clipped else (r"r_{\min}", r"r_{\max}")
    quantize_line = (
        rf"q = \operatorname{{clamp}}\left({rounding}\left(\frac{{r}}{{{_f(s)}}} + {_p(z)}\right),"
        rf" {qmin}, {qmax}\right)"
    )
    dequantize_line = rf"\hat r = s\,(q - z) = {_f(s)}\,(q - {_p(z)})"
    if not fits:  # the file's (or algorithm's) own scale and zero point (or min)
        stored = latex_text(" (stored)")
        offset_line = (
            rf"m = {_f(nums.offset)}{stored}"
            if cfg.zero_point is ZeroPoint.FLOAT_MIN
            else rf"z = {z}{stored}"
        )
        if cfg.zero_point is ZeroPoint.FLOAT_MIN:
            m = nums.offset
            return (
                code_range,
                _stored_scale_line(s, exp, nums),
                offset_line,
                rf"q = \operatorname{{clamp}}\left({rounding}\left(\frac{{r - {_p(m)}}}"
                rf"{{{_f(s)}}}\right), {qmin}, {qmax}\right)",
                rf"\hat r = s\,q + m = {_f(s)}\,q + {_p(m)}",
            )
        return (
            code_range,
            _stored_scale_line(s, exp, nums),
            offset_line,
            quantize_line,
            dequantize_line,
        )
    if cfg.zero_point is ZeroPoint.FLOAT_MIN:
        m = nums.offset
        return (
            code_range,
            rf"s = \frac{{{hi_name} - {lo_name}}}{{q_{{\max}} - q_{{\min}}}}"
            rf" = \frac{{{_f(hi)} - {_p(lo)}}}{{{qmax} - ({qmin})}} = {_f(s)}",
            rf"m = {lo_name} - s\,q_{{\min}} = {_f(lo)} - {_f(s)} \cdot ({qmin}) = {_f(m)}",
            rf"q = \operatorname{{clamp}}\left({rounding}\left(\frac{{r - {_p(m)}}}{{{_f(s)}}}"
            rf"\right), {qmin}, {qmax}\right)",
            rf"\hat r = s\,q + m = {_f(s)}\,q + {_p(m)}",
        )
    if cfg.zero_point is ZeroPoint.INCLUDE_ZERO:
        wlo, whi = min(lo, 0.0), max(hi, 0.0)
        return (
            code_range,
            rf"s = \frac{{\max({hi_name}, 0) - \min({lo_name}, 0)}}{{q_{{\max}} - q_{{\min}}}}"
            rf" = \frac{{{_f(whi)} - {_p(wlo)}}}{{{qmax} - ({qmin})}} = {_f(s)}",
            rf"z = q_{{\min}} - \operatorname{{round}}\left(\frac{{\min({lo_name}, 0)}}{{s}}"
            rf"\right) = {qmin} - \operatorname{{round}}({_f(wlo / s)}) = {z}",
            quantize_line,
            dequantize_line,
        )
    z_raw = qmin - lo / s
    return (
        code_range,
        rf"s = \frac{{{hi_name} - {lo_name}}}{{q_{{\max}} - q_{{\min}}}}"
        rf" = \frac{{{_f(hi)} - {_p(lo)}}}{{{qmax} - ({qmin})}} = {_f(s)}",
        # two lines: on one, it is ~45 px wider than a lesson's column at 150% zoom
        rf"\begin{{aligned}} z &= \operatorname{{clamp}}\left(\operatorname{{round}}\left("
        rf"q_{{\min}} - \frac{{{lo_name}}}{{s}}\right)\right) \\ &= \operatorname{{clamp}}"
        rf"(\operatorname{{round}}({_f(z_raw)})) = {z} \end{{aligned}}",
        quantize_line,
        dequantize_line,
    )
