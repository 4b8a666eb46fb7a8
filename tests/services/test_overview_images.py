"""The light overview maps of larger tensors: colour-mapped PNG images (the same colours
plotly would draw) with boundary lines, rings and an HTML colour bar; the original map
unchanged across schemes."""

from __future__ import annotations

import base64
import io
from bisect import bisect_left

import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from PIL import Image
from plotly.colors import find_intermediate_color, get_colorscale, hex_to_rgb, unlabel_rgb

from dashboard.services.display.image import LEVELS, NAN_INDEX, palette, rgba, to_png
from dashboard.services.display.reduce import Reduction, needs_reduction, reduce_2d
from dashboard.services.explorer.colour import ColourLimits, colourbar_payload
from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.heatmaps import (
    RICH_HOVER_MAX_CELLS,
    MapImage,
    ViewOptions,
    is_light,
    original_key,
    original_map,
    overview_figures,
)
from dashboard.services.explorer.overview import IMAGE_MAX_SIDE
from dashboard.services.explorer.zoom import zoom_view
from quant_core import Mode, PerChannel, PerGroup, PerTensor, QuantConfig

KB = 1_000


def decode(source: str) -> np.ndarray:
    """An image trace's ``data:image/png;base64,...`` as RGBA uint8 ``[rows, cols, 4]``."""
    head, data = source.split(",", 1)
    assert head == "data:image/png;base64"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGBA"))


def traces(fig, kind: str) -> list:
    return [t for t in fig.data if t.type == kind]


def randn(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))


# --- colour mapping and PNG ------------------------------------------------------------


def plotly_colour(scale: str, t: float) -> tuple[float, float, float]:
    """The scale's colour at ``t`` by plotly's own linear interpolation, unrounded."""
    stops = get_colorscale(scale)
    positions = [float(p) for p, _ in stops]
    rgb = [hex_to_rgb(c) if c.startswith("#") else unlabel_rgb(c) for _, c in stops]
    hi = min(max(bisect_left(positions, t), 1), len(stops) - 1)
    lo = hi - 1
    share = (t - positions[lo]) / (positions[hi] - positions[lo])
    return find_intermediate_color(rgb[lo], rgb[hi], share)


@pytest.mark.parametrize("scale", ["RdBu_r", "Viridis", "Cividis"])
def test_palette_is_plotlys_interpolation_of_the_scale(scale: str) -> None:
    table = palette(scale)
    assert table.shape == (LEVELS, 3)
    t = np.linspace(0, 1, LEVELS)
    want = np.array([plotly_colour(scale, float(v)) for v in t])
    # exact interpolation, rounded to the nearest integer
    assert np.abs(table - want).max() <= 0.5 + 1e-9


def test_diverging_palette_has_the_centre_colour_at_zero() -> None:
    table = palette("RdBu_r")
    assert tuple(table[0]) == (5, 48, 97) and tuple(table[-1]) == (103, 0, 31)
    assert tuple(table[LEVELS // 2]) == (247, 247, 247)  # RdBu's middle stop


def test_png_pixels_are_the_colour_map_of_the_values() -> None:
    rng = np.random.default_rng(0)
    v = rng.standard_normal((37, 53)).astype(np.float32)
    v[3, 4] = np.nan
    v[5, 6], v[7, 8] = 50.0, -50.0  # beyond the range: saturated
    png = to_png(v, "RdBu_r", -2.0, 2.0)
    decoded = np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))
    np.testing.assert_array_equal(decoded, rgba(v, "RdBu_r", -2.0, 2.0))
    assert decoded[3, 4, 3] == 0  # NaN is transparent: the plot's background shows
    assert (decoded[..., 3] == 255).sum() == v.size - 1
    table = palette("RdBu_r")
    np.testing.assert_array_equal(decoded[5, 6, :3], table[-1])
    np.testing.assert_array_equal(decoded[7, 8, :3], table[0])
    # level of each value: round((v - lo) / (hi - lo) * (LEVELS - 1))
    k = int(np.rint((v[0, 0] + 2) / 4 * (LEVELS - 1)))
    np.testing.assert_array_equal(decoded[0, 0, :3], table[k])
    assert NAN_INDEX >= LEVELS


def test_png_rejects_what_is_not_a_matrix() -> None:
    with pytest.raises(ValueError, match="2-D"):
        to_png(np.zeros(4), "RdBu_r", -1, 1)


# --- the overview maps -------------------------------------------------------------------


def pixels(m: MapImage) -> np.ndarray:
    """An image map's PNG as RGB uint8 ``[height, width, 3]``."""
    assert isinstance(m, MapImage), type(m)
    return np.asarray(Image.open(io.BytesIO(m.png)).convert("RGB"))


def cells(m: MapImage) -> np.ndarray:
    """One pixel per reduced cell: the top-left pixel of each repeated block."""
    fy, fx = m.scale
    return pixels(m)[::fy, ::fx]


BLACK = np.array([0, 0, 0], dtype=np.uint8)


def test_small_tensors_keep_full_heatmaps_larger_ones_are_images() -> None:
    assert not is_light((128, 256)) and RICH_HOVER_MAX_CELLS == 128 * 256
    small = overview_figures(explore(randn(128, 256), QuantConfig(4)), ViewOptions())
    for fig in small.all():
        assert isinstance(fig, go.Figure)
        assert traces(fig, "heatmap")[0].customdata is not None
    big = overview_figures(explore(randn(129, 256), QuantConfig(4)), ViewOptions())
    for m in big.all():
        assert isinstance(m, MapImage) and m.png.startswith(b"\x89PNG")
        assert "red = positive" in m.colourbar["note"][0] or "code" in m.colourbar["note"][0]


@pytest.mark.parametrize("reduction", list(Reduction), ids=lambda r: r.value)
def test_image_pixels_are_the_maps_values_in_their_colour_scale(reduction: Reduction) -> None:
    x = randn(300, 200, seed=1)
    x[10, 20] = 40.0  # one outlier: saturated, ringed
    exp = explore(x, QuantConfig(3, Mode.ASYMMETRIC, PerGroup(50)))
    opts = ViewOptions(reduction=reduction, max_cells=100 * 100, show_boundaries=False)
    figs = overview_figures(exp, opts)
    shown = {
        "original": exp.original,
        "dequantized": exp.dequantized,
        "error": exp.original - exp.dequantized,
    }
    for name, m in (("original", figs.original), ("dequantized", figs.dequantized)):
        values = reduce_2d(shown[name], opts.max_cells, reduction, IMAGE_MAX_SIDE).values
        if name == "original" or reduction is Reduction.MAX_ABS:
            want = rgba(values, "RdBu_r", m.limits.lo, m.limits.hi)[..., :3]
            got = cells(m)
            free = ~np.all(got == BLACK, axis=-1)  # not under a ring
            assert free.mean() > 0.95
            np.testing.assert_array_equal(got[free], want[free])
    err = reduce_2d(shown["error"], opts.max_cells, reduction, IMAGE_MAX_SIDE).values
    lim = figs.error.limits
    got = cells(figs.error)
    # the mean error is mean(x) - mean(x_hat), equal to the mean of x - x_hat up to rounding
    same = np.mean(np.all(got == rgba(err, "RdBu_r", lim.lo, lim.hi)[..., :3], axis=-1))
    assert same > 0.95
    assert lim.lo == -lim.hi


def test_original_and_dequantized_share_one_colour_scale_error_diverges() -> None:
    exp = explore(randn(256, 256, seed=2), QuantConfig(3, Mode.SYMMETRIC, PerChannel(0)))
    figs = overview_figures(exp, ViewOptions())
    o, d, e = (m.limits for m in (figs.original, figs.dequantized, figs.error))
    assert (o.lo, o.hi, o.colorscale) == (d.lo, d.hi, d.colorscale)
    assert e.lo == -e.hi and e.colorscale == o.colorscale
    for m in (figs.original, figs.dequantized, figs.error):
        assert m.colourbar["note"][0] == "red = positive, blue = negative"
    assert (figs.codes.limits.lo, figs.codes.limits.hi) == (-4, 3)


def test_colour_bar_is_the_palette_with_ticks_and_the_note() -> None:
    lim = ColourLimits("RdBu_r", -2.0, 2.0, "red = positive, blue = negative<br>±2 (x < y)")
    bar = colourbar_payload(lim, 5)
    assert bar["palette"] == palette("RdBu_r").reshape(-1).tolist()
    assert bar["ticks"] == ["-2", "-1", "0", "1", "2"]
    # text, not HTML: the browser writes it as text ("<" stays "<")
    assert bar["note"] == ["red = positive, blue = negative", "±2 (x < y)"]
    beyond = ColourLimits("Viridis", 0.0, 1.0, "0 to 1 (99.5th pct; 3 values beyond, saturated)")
    assert colourbar_payload(beyond, 2)["note"] == [
        "0 to 1 (99.5th pct)",
        "(3 values beyond, saturated)",
    ]


def test_image_geometry_and_reduction_said_in_the_subtitle() -> None:
    exp = explore(randn(1024, 512, seed=3), QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128)))
    figs = overview_figures(exp, ViewOptions(max_cells=128 * 64, show_boundaries=False))
    for m in figs.all():
        # 128 x 64 cells of 8 x 8 values; stretched towards 3:4 and at least 256 pixels
        assert m.subtitle == "128×64 overview of 1024×512: mean of 8×8 blocks"
        assert m.scale == (2, 6) and pixels(m).shape == (256, 384, 3)
    # a long thin tensor: capped at 512 cells a side, stretched across
    words = explore(randn(30522, 384, seed=3), QuantConfig(4))
    m = overview_figures(words, ViewOptions()).codes
    assert m.subtitle == "509×55 overview of 30522×384: mean of 60×7 blocks"
    assert pixels(m).shape == (509, 660, 3)


def test_boundaries_and_rings_on_the_images() -> None:
    x = randn(200, 512, seed=4)
    x[50, 300] = 30.0
    exp = explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128)))
    figs = overview_figures(exp, ViewOptions())
    line = np.array([60, 60, 60], dtype=np.uint8)
    for m in figs.all():
        assert m.scale == (2, 1)  # 200 x 512 cells, no reduction: rows doubled
        img = pixels(m)
        on_line = np.all(img == line, axis=-1).mean(axis=0)  # share of each pixel column
        # between columns 127|128, 255|256, 383|384 (a ring may cross a line)
        assert np.flatnonzero(on_line > 0.95).tolist() == [128, 256, 384]
    img = pixels(figs.original)
    box = img[101 - 5 : 101 + 6, 300 - 5 : 300 + 6]  # around cell (50, 300) at 2x rows
    assert np.all(box == BLACK, axis=-1).any() and figs.original.n_marked >= 1
    off = overview_figures(exp, ViewOptions(show_boundaries=False))
    assert not np.all(pixels(off.codes) == line, axis=-1).any()


def test_nonfinite_cells_are_magenta() -> None:
    x = randn(200, 200, seed=5)
    x[7, 9] = float("nan")
    x[8, 9] = float("inf")
    exp = explore(x, QuantConfig(4, Mode.SYMMETRIC))
    for m in overview_figures(exp, ViewOptions(show_boundaries=False)).all():
        got = cells(m)
        magenta = np.all(got == np.array([255, 0, 255], dtype=np.uint8), axis=-1)
        assert magenta[7, 9] and magenta[8, 9] and magenta.sum() == 2


def test_original_map_is_the_same_bytes_for_every_bit_width_and_mode() -> None:
    x = randn(384, 384, seed=6)
    opts = ViewOptions()
    cfgs = [QuantConfig(b, m, PerGroup(128)) for b in (4, 5, 8) for m in Mode]
    exps = [explore(x, c) for c in cfgs]
    originals = {overview_figures(e, opts).original.png for e in exps}
    assert len(originals) == 1
    assert len({original_key(e, opts) for e in exps}) == 1
    # another group size moves the boundary lines: another key, another map
    other = explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(64)))
    assert original_key(other, opts) != original_key(exps[0], opts)
    assert overview_figures(other, opts).original.png not in originals
    # without lines, per-tensor, per-channel and every group size share one map
    plain = ViewOptions(show_boundaries=False)
    flat = [explore(x, QuantConfig(4, granularity=g)) for g in (PerTensor(), PerChannel(0))]
    assert len({original_key(e, plain) for e in [*flat, other, *exps]}) == 1
    # a map built for one scheme, reused for another: the same four images as fresh ones
    base = original_map(exps[0], opts)
    reused = overview_figures(exps[3], opts, base)
    fresh = overview_figures(exps[3], opts)
    assert [m.png for m in reused.all()] == [m.png for m in fresh.all()]


def test_small_tensor_original_follows_the_scheme() -> None:
    # every cell's hover names its code: the original's map is rebuilt for each scheme
    exp = explore(randn(16, 16), QuantConfig(4))
    assert original_key(exp, ViewOptions()) is None


def test_overview_of_4096_squared_is_light() -> None:
    # 512x512 cells of noise at 127 levels: about 6.6 bits a cell, a PNG of about 220 kB
    # (the float32 heatmap was 1.47 MB of JSON)
    x = randn(4096, 4096, seed=7)
    exp = explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128)))
    for reduction in Reduction:
        figs = overview_figures(exp, ViewOptions(reduction=reduction))
        sizes = [len(m.png) for m in figs.all()]
        assert max(sizes) < 300 * KB, sizes
        assert pixels(figs.original).shape == (512, 512, 3)
    zoom = zoom_view(exp, 100, 100, 32)  # exact values and hover, drawn by the browser
    assert zoom.cells.shape == (32, 32, 6) and zoom.cells.dtype == np.float32


def test_needs_reduction_matches_reduce_2d() -> None:
    for shape in ((512, 512), (513, 512), (30522, 384)):
        r = reduce_2d(torch.zeros(shape), 512 * 512, Reduction.MEAN)
        assert needs_reduction(shape) == r.is_reduced
