"""The explorer's four overview maps: original, codes, dequantized and error.

Large matrices are drawn as a reduced overview (at most ``max_cells`` cells, and at most
``IMAGE_MAX_SIDE`` along a side, each the mean or the max-|value| of a block of cells, said
in the title) plus a full-resolution zoom window. Tensors of up to ``RICH_HOVER_MAX_CELLS``
cells are full plotly heatmaps whose every cell's hover names original, code, dequantized,
error and scale; larger ones are images (``map_image``): colours only, exact values in the
zoom.

The original map of a larger tensor depends on the tensor and the view options alone (and
on the granularity, when boundaries are drawn): a new bit width or mode gives the very same
image, which the browser then does not load again.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import plotly.graph_objects as go
import torch

from ..display.reduce import DEFAULT_MAX_CELLS, Reduced, Reduction, reduce_2d
from .cells import RICH_HOVER_MAX_CELLS, display_codes, rich_customdata, rich_hover
from .colour import ColourLimits, code_limits, error_limits, value_limits, with_count
from .explore import Exploration
from .map_image import MapImage, map_image
from .maps import MapSpec, boundary_lines, boundary_trace, map_figure

__all__ = [
    "IMAGE_MAX_SIDE",
    "MapView",
    "OriginalMap",
    "OverviewFigures",
    "ViewOptions",
    "is_light",
    "original_key",
    "original_map",
    "overview_figures",
]


IMAGE_MAX_SIDE = 512
"""An image map has at most this many reduced cells along a side: a 30522 x 384 embedding
becomes 509 x 55 cells of 60 x 7 values, not a 4361-pixel-tall sliver."""

MapView = go.Figure | MapImage
"""One overview map: a plotly heatmap (small tensors) or an image (larger ones)."""


@dataclass(frozen=True)
class ViewOptions:
    reduction: Reduction = Reduction.MEAN
    max_cells: int = DEFAULT_MAX_CELLS
    show_boundaries: bool = True


@dataclass(frozen=True, eq=False)
class OverviewFigures:
    """The four maps, each a figure (small tensors) or an image (``is_light``)."""

    original: MapView
    codes: MapView
    dequantized: MapView
    error: MapView

    def all(self) -> tuple[MapView, MapView, MapView, MapView]:
        return (self.original, self.codes, self.dequantized, self.error)

    def named(self) -> dict[str, MapView]:
        """The four maps by name (``"original"``, ``"codes"``, ...), in page order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def is_light(shape: tuple[int, int]) -> bool:
    """Whether a matrix of ``shape`` is drawn as images (more than ``RICH_HOVER_MAX_CELLS``
    cells) rather than as heatmaps with every cell's values."""
    rows, cols = shape
    return rows * cols > RICH_HOVER_MAX_CELLS


def _suffix(first: Reduced, opts: ViewOptions) -> str:
    if not first.is_reduced:
        return ""
    (rows, cols), (rr, cc) = first.source_shape, first.values.shape
    return (
        f"<br><sup>{rr}×{cc} overview of {rows}×{cols}: {opts.reduction.label} of "
        f"{first.row_step}×{first.col_step} blocks</sup>"
    )


def _boundary(exp: Exploration, opts: ViewOptions) -> dict | None:
    if not opts.show_boundaries:
        return None
    return boundary_trace(exp.config, tuple(exp.original.shape))


Cells = tuple[np.ndarray, str] | None
"""Every cell's hover data and template (a small tensor's heatmaps), ``None`` for images."""


def _cells(exp: Exploration) -> Cells:
    if is_light(tuple(exp.original.shape)):
        return None
    full = slice(None)
    return rich_customdata(exp, full, full), rich_hover(exp)


@dataclass(frozen=True, eq=False)
class OriginalMap:
    """The original's map and what the other maps take from it: its reduced values (the
    mean error is their difference with the dequantized ones) and its colour range (the
    dequantized map's too)."""

    reduced: Reduced
    limits: ColourLimits
    figure: MapView


def original_key(exp: Exploration, opts: ViewOptions) -> str | None:
    """What the original map depends on besides the tensor, as a cache key: the view
    options and, when boundary lines are drawn, the granularity. ``None`` for a small
    tensor, whose every cell's hover names its code (its map changes with every scheme)."""
    if not is_light(tuple(exp.original.shape)):
        return None
    lines = _boundary(exp, opts) is not None
    return f"{opts!r}|{exp.config.granularity!r}" if lines else f"{opts!r}|no boundary lines"


def original_map(exp: Exploration, opts: ViewOptions) -> OriginalMap:
    """The original's map alone: of a larger tensor, the same figure for every scheme of
    one granularity (``original_key``), which ``overview_figures`` can reuse."""
    return _original(exp, opts, _cells(exp))


def _reduce(
    exp: Exploration, opts: ViewOptions, matrix: torch.Tensor, minus: torch.Tensor | None = None
) -> Reduced:
    side = IMAGE_MAX_SIDE if is_light(tuple(exp.original.shape)) else None
    return reduce_2d(matrix, opts.max_cells, opts.reduction, side, minus=minus)


def _original(exp: Exploration, opts: ViewOptions, cells: Cells) -> OriginalMap:
    first = _reduce(exp, opts, exp.original)
    limits = value_limits(exp, first.values)
    spec = MapSpec("Original" + _suffix(first, opts), first, limits, "original", True)
    return OriginalMap(first, limits, _figure(exp, opts, spec, cells))


def _figure(exp: Exploration, opts: ViewOptions, spec: MapSpec, cells: Cells) -> MapView:
    nonfinite = exp.finite is not None
    if cells is None:
        shape = tuple(exp.original.shape)
        lines = boundary_lines(exp.config, shape) if opts.show_boundaries else None
        return map_image(spec, lines, nonfinite)
    return map_figure(spec, _boundary(exp, opts), nonfinite, *cells)


def overview_figures(
    exp: Exploration, opts: ViewOptions, original: OriginalMap | None = None
) -> OverviewFigures:
    """The four overview maps: original, codes, dequantized (one shared colour scale with
    original) and error, the diverging ones red = positive, blue = negative, each limited
    at the 99.5th percentile of ``|x|`` of its shown values (``colour.robust_limit``) with
    the saturated cells beyond it ringed. ``original``: ``original_map(exp, opts)`` built
    before (for another scheme of the same ``original_key``), else built here."""
    cells = _cells(exp)
    if original is None:
        original = _original(exp, opts, cells)
    first, values = original.reduced, original.limits
    full = slice(None)
    # All finite: the integer codes themselves, which reduce_2d makes float a band at a time.
    code_cells = exp.qt.codes if exp.finite is None else display_codes(exp, full, full)
    codes = _reduce(exp, opts, code_cells)
    deq = _reduce(exp, opts, exp.dequantized)
    if opts.reduction is Reduction.MEAN and first.is_reduced:
        # The mean is linear: mean(x - x_hat) = mean(x) - mean(x_hat), no extra pass.
        error = replace(first, values=first.values - deq.values)
    else:
        # original - dequantized a band at a time: exp.error would be a full-size matrix,
        # made for this map and kept with the cached exploration.
        error = _reduce(exp, opts, exp.original, minus=exp.dequantized)
    suffix = _suffix(first, opts)
    specs = (
        MapSpec("Quantized codes" + suffix, codes, code_limits(exp), "code", False),
        MapSpec(
            "Dequantized (same scale as original)" + suffix,
            deq,
            with_count(values, deq.values),
            "dequantized",
            True,
        ),
        MapSpec(
            "Error = original − dequantized" + suffix,
            error,
            error_limits(error.values),
            "error",
            True,
        ),
    )
    maps = [_figure(exp, opts, s, cells) for s in specs]
    return OverviewFigures(original.figure, *maps)
