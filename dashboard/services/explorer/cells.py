"""What a map's hover says about one cell: original, code, dequantized, error and the
block's scale (with zero point or float-min offset), as plotly ``customdata``."""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import torch

from quant_core import Format, Mode, ZeroPoint

from .explore import Exploration, block_ids

__all__ = [
    "RICH_HOVER_MAX_CELLS",
    "HoverField",
    "NumberStyle",
    "block_param",
    "display_codes",
    "hover_fields",
    "rich_customdata",
    "rich_hover",
]

RICH_HOVER_MAX_CELLS = 32_768
"""Full-resolution hover (code, dequantized, error, scale, zero point per cell) costs up to
6 float32 per cell: 32k cells keep a chart near 1 MB. Larger tensors show it in the zoom."""


def display_codes(exp: Exploration, rows: slice, cols: slice) -> torch.Tensor:
    """Codes of the window as float32, NaN where the original is not finite (a stand-in's
    code is no real code)."""
    codes = exp.qt.codes[rows, cols].to(torch.float32)
    if exp.finite is not None:
        codes = torch.where(exp.finite[rows, cols], codes, float("nan"))
    return codes


def block_param(exp: Exploration) -> str | None:
    """The per-block number besides the scale the hover shows: ``"zero point"`` (integer
    ``z`` of ``r_hat = s (q - z)``), ``"offset"`` (``m`` of ``r_hat = s q + m``, float min)
    or ``None`` (symmetric, codebooks: ``r_hat = s q`` or ``s value[q]``)."""
    cfg = exp.config
    if cfg.format is not Format.INT or cfg.mode is Mode.SYMMETRIC:
        return None
    return "offset" if cfg.zero_point is ZeroPoint.FLOAT_MIN else "zero point"


def rich_customdata(exp: Exploration, rows: slice, cols: slice) -> np.ndarray:
    """``[r, c, k]`` float32: original, code, dequantized (``qt.dequantize()``), error,
    scale and (asymmetric int only) zero point ``z`` or float-min offset ``m`` per cell."""
    ids = block_ids(exp, rows, cols).to(exp.qt.scale.device)
    parts = [
        exp.original[rows, cols],
        display_codes(exp, rows, cols),
        exp.dequantized[rows, cols],
        exp.error_window(rows, cols),
        exp.qt.scale.reshape(-1)[ids],
    ]
    param = block_param(exp)
    if param == "offset":
        parts.append(exp.qt.offset.reshape(-1)[ids].to(torch.float32))
    elif param == "zero point":
        parts.append(exp.qt.zero_point.reshape(-1)[ids].to(torch.float32))
    return torch.stack(parts, dim=-1).numpy(force=True).astype(np.float32)


class NumberStyle(enum.Enum):
    """How a hover writes a number: ``SIGNIFICANT`` digits (d3's and JavaScript's
    ``toPrecision``: ``0.0123400``, ``1.23400e-7``) or ``DECIMALS`` after the point."""

    SIGNIFICANT = "g"
    DECIMALS = "f"


@dataclass(frozen=True)
class HoverField:
    """One number of a cell's hover: ``label``, then the value in ``style`` with
    ``digits`` (``original 0.0123400`` at 6 significant digits, ``code 7`` at 0 decimals)."""

    label: str
    digits: int
    style: NumberStyle

    def plotly(self, k: int) -> str:
        """This field as a plotly hovertemplate part reading ``customdata[k]``."""
        return f"{self.label} %{{customdata[{k}]:.{self.digits}{self.style.value}}}"


def hover_fields(exp: Exploration) -> tuple[HoverField, ...]:
    """What ``rich_customdata``'s columns are, in order: original, code, dequantized, error,
    the block's scale, and (asymmetric int only) its zero point or float-min offset."""
    g, f = NumberStyle.SIGNIFICANT, NumberStyle.DECIMALS
    fields = [
        HoverField("original", 6, g),
        HoverField("code", 0, f),
        HoverField("dequantized", 6, g),
        HoverField("error (original − dequantized)", 4, g),
        HoverField("scale", 6, g),
    ]
    param = block_param(exp)
    if param == "offset":
        fields.append(HoverField("offset m", 6, g))
    elif param == "zero point":
        fields.append(HoverField("zero point", 0, f))
    return tuple(fields)


def rich_hover(exp: Exploration) -> str:
    """Every cell's plotly hover: row and column, then ``hover_fields`` one to a line."""
    parts = [field.plotly(k) for k, field in enumerate(hover_fields(exp))]
    return "row %{y:.0f}, col %{x:.0f}<br>" + "<br>".join(parts) + "<extra></extra>"
