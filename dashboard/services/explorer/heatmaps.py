"""The explorer's maps: data in, ``go.Figure`` out, no Streamlit. One front over the
modules by concern:

- ``colour``: the diverging convention, robust colour limits, colour bars;
- ``cells``: what a cell's hover says (original, code, dequantized, error, scale);
- ``maps``: one overview map as a full heatmap (small tensors);
- ``map_image``: one overview map of a larger tensor as an image, its colour bar in HTML;
- ``overview``: the four overview maps of an exploration;
- ``zoom``: the full-resolution zoom window, every cell's hover exact (drawn by the browser).

Arrays reach plotly as float32 numpy (typed arrays in the JSON: float16 would fall back to
lists, float64 doubles the payload); image maps are 8-bit palette PNGs (``display.image``).
"""

from __future__ import annotations

from ..display.reduce import Reduced, Reduction, reduce_2d
from .cells import RICH_HOVER_MAX_CELLS
from .map_image import MapImage
from .overview import (
    MapView,
    OriginalMap,
    OverviewFigures,
    ViewOptions,
    is_light,
    original_key,
    original_map,
    overview_figures,
)

__all__ = [
    "RICH_HOVER_MAX_CELLS",
    "MapImage",
    "MapView",
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
]
