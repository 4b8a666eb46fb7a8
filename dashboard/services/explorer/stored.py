"""What a shipped format stores, level by level: the numbers of one block (its scale as
stored, the super-block's scale, ...), the format's formula with them, where the bits go,
and a map of every block's stored scale (and min), for the explorer's "Stored scales"
section and teaching panel.

Used for two-level formats (``config.two_level``: E8M0, FP8-scaled, super-block and
double-quantized scales) and for llama.cpp's recipe (GGUF's types, whose scale search and
min convention are not the lab's formulas).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from quant_core import (
    DoubleQuantScales,
    FloatScales,
    Format,
    FP8Scales,
    PerBlock,
    PerChannel,
    PerGroup,
    PowerOfTwoScales,
    QuantConfig,
    Recipe,
    SuperBlockScales,
    codebook_for,
)

from ..display.bits import bits_text
from ..display.labels import FORMAT_LABELS, format_label
from ..display.reduce import Reduction, reduce_2d
from .colour import constant_range
from .explore import Exploration, block_cells, block_label, block_values
from .formulas import latex_number, latex_operand, latex_text

__all__ = [
    "ScaleMap",
    "StoredNumbers",
    "is_stored_format",
    "layout_text",
    "scale_map_figure",
    "scale_maps",
    "stored_formulas",
    "stored_heading",
    "stored_numbers",
    "stored_symbols",
    "stored_table",
]

_f, _p = latex_number, latex_operand


def is_stored_format(cfg: QuantConfig) -> bool:
    """Whether the panel explains ``cfg`` by what it stores (two levels, or llama.cpp's
    recipe) rather than by the lab's one-level formulas."""
    return cfg.two_level or cfg.recipe is Recipe.LLAMA_CPP


@dataclass(frozen=True)
class StoredNumbers:
    """The live numbers of one block: ``scale`` (``s``, the float32 it dequantizes with),
    ``offset`` (``m``, 0 when none), and what is stored for them: ``code`` (the block's
    stored integer: E8M0 exponent, E4M3 bits, super-block ``sc``, double-quant code),
    ``min_code`` (``m``'s integer), ``super_index`` and ``super_scale``/``super_min``
    (``d``/``dmin``, NVFP4's tensor scale, double quantization's run absmax and mean)."""

    block: int
    scale: float
    offset: float
    code: int | None = None
    min_code: int | None = None
    super_index: int | None = None
    super_scale: float | None = None
    super_min: float | None = None


def _super_index(exp: Exploration, block: int, sf: SuperBlockScales) -> int:
    layout = exp.qt.layout
    groups_per_row = layout.shape[-1] // layout.block_len
    row, g = divmod(block, groups_per_row)
    per_row = layout.shape[-1] // sf.super_block
    return row * per_row + g // (sf.super_block // layout.block_len)


def stored_numbers(exp: Exploration, block: int) -> StoredNumbers:
    qt = exp.qt
    scale = float(qt.scale.reshape(-1)[block])
    offset = 0.0 if qt.offset is None else float(qt.offset.reshape(-1)[block])
    st = qt.stored
    if st is None:
        return StoredNumbers(block, scale, offset)
    code = int(st.codes.reshape(-1)[block])
    min_code = None if st.min_codes is None else int(st.min_codes.reshape(-1)[block])
    sf = exp.config.scale_format
    sup = None
    super_scale = super_min = None
    if isinstance(sf, SuperBlockScales) and st.super_scale is not None:
        sup = _super_index(exp, block, sf)
        super_scale = float(st.super_scale.reshape(-1)[sup])
        if st.super_min is not None:
            super_min = float(st.super_min.reshape(-1)[sup])
    elif isinstance(sf, FP8Scales) and st.super_scale is not None:
        super_scale = float(st.super_scale)
    elif isinstance(sf, DoubleQuantScales) and st.super_scale is not None:
        sup = block // sf.block
        super_scale = float(st.super_scale.reshape(-1)[sup])
        super_min = None if st.super_min is None else float(st.super_min)
    return StoredNumbers(block, scale, offset, code, min_code, sup, super_scale, super_min)


def layout_text(exp: Exploration) -> str:
    """Markdown: the format's layout and where its bits per value go (from the storage
    report's parts)."""
    cfg, storage = exp.config, exp.storage
    lines = [f"**{format_label(cfg)}**: {bits_text(storage.bits_per_element)} bits per value ="]
    for part in storage.parts:
        per = bits_text(part.total_bits / storage.n_elements)
        bits = bits_text(part.bits)
        lines.append(f"- {part.count:,} {part.what} × {bits} bits: **{per}** per value")
    return "\n".join(lines)


def _int_values(cfg: QuantConfig) -> str:
    return rf"q \in \{{{cfg.qmin}, \ldots, {cfg.qmax}\}}"


def _levels_name(cfg: QuantConfig) -> str:
    """The element format as the pages name it (``"FP4 E2M1"``, ``"ternary (5 per
    byte)"``), not the enum's upper-cased value (``"TERNARY_PACKED"``)."""
    return FORMAT_LABELS[cfg.format].removesuffix(" levels")


def stored_formulas(exp: Exploration, nums: StoredNumbers) -> tuple[str, ...]:
    """LaTeX lines: how the block's scale (and min) come from what is stored, and the
    value of a code, with the live numbers."""
    cfg = exp.config
    sf = cfg.scale_format
    out: list[str] = []
    s, m = nums.scale, nums.offset
    if isinstance(sf, SuperBlockScales) and nums.super_scale is not None:
        d = nums.super_scale
        out.append(
            rf"d = {_f(d)}\ ({latex_text(cfg.scale_dtype.value)},\ \text{{super-block }}"
            rf"{nums.super_index}),\quad s = d \cdot sc = {_f(d)} \cdot {_p(nums.code or 0)}"
            rf" = {_f(s)}"
        )
        if nums.min_code is not None and nums.super_min is not None:
            out.append(
                rf"d_{{\min}} = {_f(nums.super_min)},\quad \min = -d_{{\min}} \cdot m = "
                rf"-{_f(nums.super_min)} \cdot {nums.min_code} = {_f(m)}"
            )
    elif isinstance(sf, PowerOfTwoScales) and nums.code is not None:
        e = nums.code
        extra = ""
        if cfg.format is Format.INT:
            extra = rf" \cdot 2^{{-{cfg.bits - 2}}}"
        values = block_values(exp, nums.block)
        if values.numel() and cfg.recipe is Recipe.LAB:
            amax = float(values.abs().max())
            emax = cfg.format.max_exponent
            out.append(
                rf"e = \lfloor \log_2 \max|x| \rfloor - e_{{\max}} + 127 = \lfloor \log_2"
                rf" {_f(amax)} \rfloor - {emax} + 127 = {e}"
            )
        out.append(rf"s = 2^{{e - 127}}{extra} = 2^{{{e - 127}}}{extra} = {_f(s)}")
    elif isinstance(sf, FP8Scales) and nums.code is not None and nums.super_scale is not None:
        t = nums.super_scale
        sc = s / t if t else 0.0
        out.append(
            rf"t = {_f(t)}\ (\text{{fp32 per tensor}}),\quad sc = \operatorname{{e4m3}}"
            rf"(\text{{0x{nums.code:02x}}}) = {_f(sc)},\quad s = t \cdot sc = {_f(s)}"
        )
    elif isinstance(sf, FP8Scales) and nums.code is not None and not sf.tensor_scale:
        # GGUF's NVFP4: the E4M3 byte is the scale, no tensor scale above it
        values = block_values(exp, nums.block)
        head = "s"
        if values.numel():
            amax = float(values.abs().max())
            vmax = _p(codebook_for(cfg.format).max_abs)
            head = (
                rf"s = \operatorname{{e4m3}}(\max|x| / {vmax}) = \operatorname{{e4m3}}"
                rf"({_f(amax)} / {vmax})"
            )
        out.append(
            rf"{head} = \operatorname{{e4m3}}(\text{{0x{nums.code:02x}}}) = {_f(s)}\ "
            r"(\text{unsigned E4M3, no tensor scale})"
        )
    elif isinstance(sf, DoubleQuantScales) and nums.code is not None:
        a2, off = nums.super_scale or 0.0, nums.super_min or 0.0
        out.append(
            rf"s = \text{{map}}[{nums.code}] \cdot a_2 + \bar{{s}} = \text{{map}}[{nums.code}]"
            rf" \cdot {_f(a2)} + {_p(off)} = {_f(s)}"
        )
    elif isinstance(sf, FloatScales) and cfg.recipe is Recipe.LLAMA_CPP and (
        cfg.format is Format.BINARY
    ):
        # llama.cpp's Q1_0: the block's mean magnitude, not its absmax
        values = block_values(exp, nums.block)
        head = r"s = \operatorname{fp16}(\operatorname{mean}|x|)"
        if values.numel():
            head += rf" = \operatorname{{fp16}}({_f(float(values.abs().mean()))})"
        out.append(
            rf"{head} = {_f(s)},\quad \hat{{x}} = s \text{{ where }} x \ge 0"
            r"\text{, else } -s"
        )
    elif isinstance(sf, FloatScales):
        out.append(rf"s = {_f(s)}\ ({latex_text(cfg.scale_dtype.value)})")
        if cfg.float_offset:
            out.append(rf"\min = {_f(m)}\ ({latex_text(cfg.scale_dtype.value)})")
    if cfg.format is Format.INT:
        if cfg.float_offset:
            # GGUF stores u = q - qmin, an unsigned code: x = d sc u - dmin m
            top = cfg.qmax - cfg.qmin
            head = (
                r"\hat{x} = d\,sc\,u - d_{\min}\,m"
                if isinstance(sf, SuperBlockScales)
                else r"\hat{x} = s\,u + \min"
            )
            out.append(
                rf"{head} = {_f(s)}\,u + {_p(m)},\quad u = q - ({cfg.qmin}) \in \{{0,"
                rf" \ldots, {top}\}}\ \text{{(stored)}}"
            )
        elif isinstance(sf, SuperBlockScales):
            out.append(rf"\hat{{x}} = d\,sc\,q = {_f(s)}\,q,\quad {_int_values(cfg)}")
        else:
            out.append(rf"\hat{{x}} = s\,q = {_f(s)}\,q,\quad {_int_values(cfg)}")
    else:
        name = latex_text(_levels_name(cfg))
        out.append(
            rf"\hat{{x}} = s \cdot v_q = {_f(s)} \cdot v_q,\quad v = {name}\ \text{{levels}}"
        )
    return tuple(out)


def _stored_code(cfg: QuantConfig, q: int) -> int:
    """The code a GGUF block stores for the lab's code ``q``: the narrower integer types
    store unsigned ``q - qmin`` (Q4_0's nibble 0..15 for -8..7); Q8_0 stores its int8 ``q``
    as it is (it showed ``q + 128``, a byte llama.cpp never writes)."""
    if cfg.recipe is Recipe.LLAMA_CPP and cfg.format is Format.INT and cfg.bits < 8:
        return q - cfg.qmin
    return q


def stored_table(exp: Exploration, block: int, n_values: int = 16) -> pd.DataFrame:
    """The block's first values: original, the code as the format stores it, the level it
    dequantizes to, and the error."""
    cells = block_cells(exp, block)
    values = exp.original[cells].reshape(-1)[:n_values]
    codes = exp.qt.codes[cells].reshape(-1)[:n_values]
    deq = exp.dequantized[cells].reshape(-1)[:n_values]
    cfg = exp.config
    rows = []
    for i in range(values.numel()):
        r, q, r_hat = float(values[i]), int(codes[i]), float(deq[i])
        row: dict[str, object] = {"index in block": i, "x": r}
        stored = _stored_code(cfg, q)
        row["code stored"] = stored
        if stored != q:
            row["lab code q"] = q
        row["x̂"] = r_hat
        row["error x − x̂"] = r - r_hat
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True, eq=False)
class ScaleMap:
    """One map of per-block (or per-super-block) numbers: ``name`` (a key), ``title``,
    ``values`` (2-D float32, rows x blocks along a row), ``label`` for the hover, and
    ``note`` (what one cell is)."""

    name: str
    title: str
    values: np.ndarray
    label: str
    note: str


def _grid(t: torch.Tensor, cfg: QuantConfig) -> np.ndarray:
    """Per-block numbers as a 2-D grid: ``[rows, blocks per row]`` for groups and tiles, a
    row or column for channels."""
    a = t.detach().to(torch.float32).cpu().numpy()
    if a.ndim == 2:
        return a
    if isinstance(cfg.granularity, PerChannel):
        return a.reshape(-1, 1) if cfg.granularity.axis % 2 == 0 else a.reshape(1, -1)
    return a.reshape(1, -1) if a.ndim <= 1 else a.reshape(-1, a.shape[-1])


def scale_maps(exp: Exploration) -> tuple[ScaleMap, ...]:
    """The maps of what the format stores per block and super-block (empty for one scale
    per tensor): the block scales as stored (the integers of a two-level format, the
    floats of a one-level one), the mins, and the super-block scales."""
    qt, cfg = exp.qt, exp.config
    if qt.n_blocks == 1:
        return ()
    gran = cfg.granularity
    if isinstance(gran, PerGroup):
        cell = f"one block of {gran.group_size} values of a row"
    elif isinstance(gran, PerBlock):
        cell = f"one {gran.rows}×{gran.cols} tile"
    else:
        cell = "one channel"
    sf, st = cfg.scale_format, qt.stored
    maps: list[ScaleMap] = []
    if st is not None and isinstance(sf, SuperBlockScales):
        maps.append(
            ScaleMap("sc", f"Block scales as stored: {sf.bits}-bit sc", _grid(st.codes, cfg),
                     "sc", cell)
        )
        if st.min_codes is not None:
            maps.append(
                ScaleMap("m", f"Block mins as stored: {sf.bits}-bit m", _grid(st.min_codes, cfg),
                         "m", cell)
            )
        if st.super_scale is not None:
            sup = f"one super-block of {sf.super_block} values"
            maps.append(
                ScaleMap("d", f"Super-block scale d ({cfg.scale_dtype.value})",
                         _grid(st.super_scale, cfg), "d", sup)
            )
            if st.super_min is not None:
                maps.append(
                    ScaleMap("dmin", f"Super-block min dmin ({cfg.scale_dtype.value})",
                             _grid(st.super_min, cfg), "dmin", sup)
                )
    elif st is not None and isinstance(sf, PowerOfTwoScales):
        maps.append(
            ScaleMap("e", "Block exponents as stored: E8M0 e (scale 2^(e−127))",
                     _grid(st.codes, cfg), "e", cell)
        )
    elif st is not None and isinstance(sf, FP8Scales) and not sf.tensor_scale:
        maps.append(
            ScaleMap("sc", "Block scales as stored: E4M3 values (no tensor scale)",
                     _grid(qt.scale, cfg), "E4M3 scale", cell)
        )
    elif st is not None and isinstance(sf, FP8Scales):
        t = float(st.super_scale) if st.super_scale is not None else 1.0
        maps.append(
            ScaleMap("sc", f"Block scales as stored: FP8 E4M3 values (× tensor scale {t:.4g})",
                     _grid(qt.scale / t, cfg), "E4M3 scale", cell)
        )
    elif st is not None and isinstance(sf, DoubleQuantScales):
        maps.append(
            ScaleMap("code", "Block scales as stored: 8-bit double-quantized codes",
                     _grid(st.codes, cfg), "code", cell)
        )
    else:
        maps.append(
            ScaleMap("s", f"Block scales s ({cfg.scale_dtype.value})", _grid(qt.scale, cfg),
                     "s", cell)
        )
        if qt.offset is not None:
            maps.append(
                ScaleMap("m", f"Block mins ({cfg.scale_dtype.value})", _grid(qt.offset, cfg),
                         "min", cell)
            )
        elif cfg.has_zero_point:
            maps.append(
                ScaleMap("z", "Zero points z", _grid(qt.zero_point, cfg), "z", cell)
            )
    if st is not None and not isinstance(sf, PowerOfTwoScales):
        maps.append(
            ScaleMap("s", "Block scales s as dequantized (float32)", _grid(qt.scale, cfg),
                     "s", cell)
        )
    return tuple(maps)


def stored_heading(exp: Exploration, block: int) -> str:
    """Markdown: which block, and its super-block where there is one."""
    nums = stored_numbers(exp, block)
    where = block_label(exp, block)
    text = f"Showing **{where}** of {exp.n_blocks:,} blocks"
    if nums.super_index is not None and isinstance(exp.config.scale_format, SuperBlockScales):
        text += f", in super-block {nums.super_index}"
    if exp.config.recipe is Recipe.LLAMA_CPP:
        text += (
            ". Its scale and codes come from llama.cpp's own quantizer for this type (as "
            "`llama-quantize` without an importance matrix writes them)"
        )
    return text + "."


MAP_MAX_CELLS = 128 * 1024
"""A scale map with more cells is drawn as the mean of blocks of cells (``reduce_2d``)."""


def scale_map_figure(m: ScaleMap) -> go.Figure:
    """``m`` as a heatmap (Viridis; the mean of blocks of cells when it has more than
    ``MAP_MAX_CELLS``), one cell per block, hover naming the block's row and index."""
    reduced = reduce_2d(m.values, MAP_MAX_CELLS, Reduction.MEAN)
    rows, cols = m.values.shape
    finite = reduced.values[np.isfinite(reduced.values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    if hi <= lo:  # every block's scale the same (a constant tensor): centred on it
        lo, hi = constant_range(lo)
    note = f"each cell: {m.note}"
    if reduced.is_reduced:
        note += f"; mean of {reduced.row_step}×{reduced.col_step} cells"
    hover = (
        f"row %{{y:.0f}}, block %{{x:.0f}}<br>{m.label} %{{z:.6g}}<extra></extra>"
        if not reduced.is_reduced
        else f"rows ≈%{{y:.0f}}, blocks ≈%{{x:.0f}}<br>mean {m.label} %{{z:.6g}}<extra></extra>"
    )
    small = reduced.values.size <= 256
    return go.Figure(
        data=[
            {
                "type": "heatmap",
                "z": reduced.values.astype(np.float32),
                "x": reduced.col_centres(),
                "y": reduced.row_centres(),
                "colorscale": "Viridis",
                "zmin": lo,
                "zmax": hi,
                "hovertemplate": hover,
                "texttemplate": "%{z:.4g}" if small else None,
                "colorbar": {"title": {"text": m.label, "side": "right"}, "thickness": 12},
            }
        ],
        layout={
            "title": {"text": f"{m.title}<br><sup>{note}</sup>", "font": {"size": 13}},
            "height": 300,
            "margin": {"l": 10, "r": 10, "t": 60, "b": 30},
            "yaxis": {"range": [rows - 0.5, -0.5], "title": {"text": "row"}},
            "xaxis": {"range": [-0.5, cols - 0.5], "title": {"text": "block along the row"}},
        },
    )


def stored_symbols(exp: Exploration) -> str:
    """Markdown: what the symbols of ``stored_formulas`` mean for this format."""
    cfg = exp.config
    sf = cfg.scale_format
    parts = ["*x*: an original value", "*q*: its code", "*x̂*: the value the code stands for"]
    if isinstance(sf, SuperBlockScales):
        parts += [
            f"*sc*: the block's {sf.bits}-bit scale integer"
            + (" (signed)" if sf.signed else ""),
            f"*d*: one {cfg.scale_dtype.value} scale per super-block of {sf.super_block} values",
        ]
        if cfg.float_offset:
            parts += [
                f"*m*: the block's {sf.bits}-bit min integer",
                "*d*min: the super-block's min scale",
            ]
    elif isinstance(sf, PowerOfTwoScales):
        parts.append("*e*: the block's 8-bit E8M0 exponent (a power of two, no mantissa)")
    elif isinstance(sf, FP8Scales) and not sf.tensor_scale:
        parts.append("*s*: the block's E4M3 scale byte's value (unsigned; no tensor scale)")
    elif isinstance(sf, FP8Scales):
        parts += ["*sc*: the block's FP8 E4M3 scale", "*t*: one fp32 scale for the tensor"]
    elif isinstance(sf, DoubleQuantScales):
        parts += [
            "map: bitsandbytes' 256-value dynamic map",
            f"*a*₂: the absmax of each run of {sf.block} scales (fp32)",
            "s̄: the mean of all scales (fp32), subtracted before quantizing them",
        ]
    if cfg.format is not Format.INT:
        parts.append(f"*v*: the {_levels_name(cfg)} levels")
    return "Symbols: " + "; ".join(parts) + "."
