"""The explorer's maps: data in, ``go.Figure`` out, no Streamlit. One front over the
modules by concern:

- ``colour``: the diverging convention, robust colour limits, colour bars;
- ``cells``: what a cell's hover says (original, code, dequantized, error, scale);
- ``maps``: one overview map, a full heatmap (small tensors) or a light PNG image;
- ``overview``: the four overview maps of an exploration;
- ``zoom``: the full-resolution zoom window, every cell's hover exact.

Arrays reach plotly as float32 numpy (typed arrays in the JSON: float16 would fall back to
lists, float64 doubles the payload); images as 8-bit palette PNGs (``display.image``).
"""

from __future__ import annotations

from ..display.reduce import Reduced, Reduction, reduce_2d
from .cells import RICH_HOVER_MAX_CELLS
from .overview import (
    OriginalMap,
    OverviewFigures,
    ViewOptions,
    is_light,
    original_key,
    original_map,
    overview_figures,
)
from .zoom import zoom_figure

__all__ = [
    "RICH_HOVER_MAX_CELLS",
    "OriginalMap",
    "OverviewFigures",
    "Reduced",
    "Reduction",
    "ViewOptions",
    "is_light",
    "original_key",
    "original_map",
    "overview_figures",
    "reduce_2d",
    "zoom_figure",
]
