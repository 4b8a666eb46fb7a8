"""The light overview maps of larger tensors: colour-mapped PNG images with a real colour
bar, the same colours plotly would draw, the original map unchanged across schemes."""

from __future__ import annotations

import base64
import io
import json
from bisect import bisect_left

import numpy as np
import plotly.io as pio
import pytest
import torch
from PIL import Image
from plotly.colors import find_intermediate_color, get_colorscale, hex_to_rgb, unlabel_rgb

from dashboard.services.display.image import LEVELS, NAN_INDEX, palette, rgba, to_png
from dashboard.services.display.reduce import Reduction, needs_reduction, reduce_2d
from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.heatmaps import (
    RICH_HOVER_MAX_CELLS,
    ViewOptions,
    is_light,
    original_key,
    original_map,
    overview_figures,
    zoom_figure,
)
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


def test_small_tensors_keep_full_heatmaps_larger_ones_are_images() -> None:
    assert not is_light((128, 256)) and RICH_HOVER_MAX_CELLS == 128 * 256
    small = overview_figures(explore(randn(128, 256), QuantConfig(4)), ViewOptions())
    for fig in small.all():
        assert not traces(fig, "image") and traces(fig, "heatmap")[0].customdata is not None
    big = overview_figures(explore(randn(129, 256), QuantConfig(4)), ViewOptions())
    for fig in big.all():
        (image,) = traces(fig, "image")
        (bar,) = traces(fig, "heatmap")
        # the heatmap only carries the colour bar: one transparent cell, no hover
        assert np.asarray(bar.z).shape == (1, 1) and bar.opacity == 0 and bar.hoverinfo == "skip"
        assert "zoom below" in image.hovertemplate and "customdata" not in image.hovertemplate


@pytest.mark.parametrize("reduction", list(Reduction), ids=lambda r: r.value)
def test_image_pixels_are_the_maps_values_in_their_colour_scale(reduction: Reduction) -> None:
    x = randn(300, 200, seed=1)
    x[10, 20] = 40.0  # one outlier: saturated, ringed
    exp = explore(x, QuantConfig(3, Mode.ASYMMETRIC, PerGroup(50)))
    opts = ViewOptions(reduction=reduction, max_cells=100 * 100)
    figs = overview_figures(exp, opts)
    shown = {
        "original": exp.original,
        "dequantized": exp.dequantized,
        "error": exp.original - exp.dequantized,
    }
    for name, fig in (("original", figs.original), ("dequantized", figs.dequantized)):
        values = reduce_2d(shown[name], opts.max_cells, reduction).values
        if name == "original" or reduction is Reduction.MAX_ABS:
            bar = traces(fig, "heatmap")[0]
            want = rgba(values, "RdBu_r", bar.zmin, bar.zmax)
            np.testing.assert_array_equal(decode(traces(fig, "image")[0].source), want)
    err = reduce_2d(shown["error"], opts.max_cells, reduction).values
    bar = traces(figs.error, "heatmap")[0]
    got = decode(traces(figs.error, "image")[0].source)
    # the mean error is mean(x) - mean(x_hat), equal to the mean of x - x_hat up to rounding
    same = np.mean(np.all(got == rgba(err, "RdBu_r", bar.zmin, bar.zmax), axis=-1))
    assert same > 0.99
    assert bar.zmin == -bar.zmax


def test_original_and_dequantized_share_one_colour_scale_error_diverges() -> None:
    exp = explore(randn(256, 256, seed=2), QuantConfig(3, Mode.SYMMETRIC, PerChannel(0)))
    figs = overview_figures(exp, ViewOptions())
    o, d, e = (traces(f, "heatmap")[0] for f in (figs.original, figs.dequantized, figs.error))
    assert (o.zmin, o.zmax, o.colorscale) == (d.zmin, d.zmax, d.colorscale)
    assert e.zmin == -e.zmax and e.colorscale == o.colorscale
    for bar in (o, d, e):
        assert "red = positive, blue = negative" in bar.colorbar.title.text
    codes = traces(figs.codes, "heatmap")[0]
    assert (codes.zmin, codes.zmax) == (-4, 3)


def test_image_axes_are_in_tensor_coordinates() -> None:
    exp = explore(randn(1024, 512, seed=3), QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128)))
    figs = overview_figures(exp, ViewOptions(max_cells=128 * 64))
    for fig in figs.all():
        (image,) = traces(fig, "image")
        # 8x8 blocks: the first pixel's centre is 3.5, one pixel spans 8 rows or columns
        assert (image.x0, image.dx, image.y0, image.dy) == (3.5, 8, 3.5, 8)
        assert list(fig.layout.xaxis.range) == [-0.5, 511.5]
        assert list(fig.layout.yaxis.range) == [1023.5, -0.5]  # row 0 on top
        assert fig.layout.yaxis.scaleanchor is False  # fills the chart, not square pixels
        assert decode(image.source).shape == (128, 64, 4)
        assert "8×8 blocks" in fig.layout.title.text
        assert "rows %{y:.0f}±4" in image.hovertemplate


def test_boundaries_and_rings_on_the_images() -> None:
    x = randn(200, 512, seed=4)
    x[50, 300] = 30.0
    exp = explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128)))
    figs = overview_figures(exp, ViewOptions())
    for fig in figs.all():
        (lines,) = [t for t in traces(fig, "scatter") if t.mode == "lines"]
        assert sorted({v for v in lines.x if v is not None}) == [127.5, 255.5, 383.5]
    rings = [t for t in traces(figs.original, "scatter") if t.mode == "markers"]
    assert (300.0, 50.0) in set(zip(rings[0].x.tolist(), rings[0].y.tolist(), strict=True))
    off = overview_figures(exp, ViewOptions(show_boundaries=False))
    assert not [t for t in traces(off.original, "scatter") if t.mode == "lines"]


def test_nonfinite_cells_are_transparent_on_magenta() -> None:
    x = randn(200, 200, seed=5)
    x[7, 9] = float("nan")
    x[8, 9] = float("inf")
    exp = explore(x, QuantConfig(4, Mode.SYMMETRIC))
    for fig in overview_figures(exp, ViewOptions()).all():
        assert fig.layout.plot_bgcolor == "#ff00ff"
        alpha = decode(traces(fig, "image")[0].source)[..., 3]
        assert alpha[7, 9] == 0 and alpha[8, 9] == 0 and (alpha == 0).sum() == 2


def spec(fig) -> str:
    return pio.to_json(fig, validate=False)


def test_original_map_is_the_same_bytes_for_every_bit_width_and_mode() -> None:
    x = randn(384, 384, seed=6)
    opts = ViewOptions()
    cfgs = [QuantConfig(b, m, PerGroup(128)) for b in (4, 5, 8) for m in Mode]
    exps = [explore(x, c) for c in cfgs]
    originals = {spec(overview_figures(e, opts).original) for e in exps}
    assert len(originals) == 1
    assert len({original_key(e, opts) for e in exps}) == 1
    # another group size moves the boundary lines: another key, another map
    other = explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(64)))
    assert original_key(other, opts) != original_key(exps[0], opts)
    assert spec(overview_figures(other, opts).original) not in originals
    # without lines, per-tensor, per-channel and every group size share one map
    plain = ViewOptions(show_boundaries=False)
    flat = [explore(x, QuantConfig(4, granularity=g)) for g in (PerTensor(), PerChannel(0))]
    assert len({original_key(e, plain) for e in [*flat, other, *exps]}) == 1
    # a map built for one scheme, reused for another: the same four figures as fresh ones
    base = original_map(exps[0], opts)
    reused = overview_figures(exps[3], opts, base)
    fresh = overview_figures(exps[3], opts)
    assert [spec(f) for f in reused.all()] == [spec(f) for f in fresh.all()]


def test_small_tensor_original_follows_the_scheme() -> None:
    # every cell's hover names its code: the original's map is rebuilt for each scheme
    exp = explore(randn(16, 16), QuantConfig(4))
    assert original_key(exp, ViewOptions()) is None


def test_overview_of_4096_squared_is_light() -> None:
    # 512x512 cells of noise at 127 levels: about 6.6 bits a cell, a 220 kB PNG, 290 kB as
    # base64, 315 kB in plotly's JSON (which writes "/" as "\\u002f"), plus the colour bar,
    # boundaries, rings and template: under 350 kB. The float32 heatmap was 1.47 MB.
    x = randn(4096, 4096, seed=7)
    exp = explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128)))
    for reduction in Reduction:
        figs = overview_figures(exp, ViewOptions(reduction=reduction))
        sizes = [len(spec(f)) for f in figs.all()]
        assert max(sizes) < 350 * KB, sizes
        assert decode(traces(figs.original, "image")[0].source).shape == (512, 512, 4)
    zoom = json.loads(spec(zoom_figure(exp, 100, 100, 32)))
    assert [t["type"] for t in zoom["data"]] == ["heatmap"] * 4  # exact values and hover


def test_needs_reduction_matches_reduce_2d() -> None:
    for shape in ((512, 512), (513, 512), (30522, 384)):
        r = reduce_2d(torch.zeros(shape), 512 * 512, Reduction.MEAN)
        assert needs_reduction(shape) == r.is_reduced
