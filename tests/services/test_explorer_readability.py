"""The explorer's figures say what they count and stay legible (issue 29): whole-number
ticks on code colour bars, cell labels that fit their cells, level counts in the same
units as the title."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dashboard.services.explorer.colour import (
    DIVERGING,
    ColourLimits,
    code_limits,
    colourbar_payload,
    tick_values,
    value_limits,
)
from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.heatmaps import ViewOptions, overview_figures
from dashboard.services.explorer.histogram import histogram_payload, histogram_view
from dashboard.services.explorer.map_image import marked_note, spread_out
from dashboard.services.explorer.maps import LABEL_CHARS_PER_ROW, cell_labels
from quant_core import Format, Mode, PerChannel, PerTensor, QuantConfig

TEN = torch.tensor([[0.1, -0.25, 0.33, 1.5, -2.75, 0.01, 0.002, -0.6, 3.14, -1.1]])
"""The 10-value vector of the issue, as the explorer shows it ([1, 10])."""


def codes(lo: int, hi: int) -> ColourLimits:
    return ColourLimits("Cividis", float(lo), float(hi), "", integer=True)


@pytest.mark.parametrize(
    ("lo", "hi", "n", "ticks"),
    [
        (-8, 7, 5, [-8, -5, -2, 1, 4, 7]),  # was -8, -4.25, -0.5, 3.25, 7
        (-8, 7, 4, [-8, -3, 2, 7]),
        (0, 255, 5, [0, 51, 102, 153, 204, 255]),
        (-128, 127, 5, [-128, -77, -26, 25, 76, 127]),
        (0, 3, 5, [0, 1, 2, 3]),
        (-4, 3, 5, [-4, -3, -2, -1, 0, 1, 2, 3]),
        (-4, 3, 4, [-4, -3, -2, -1, 0, 1, 2, 3]),  # the zoom's bars: every 3-bit code
        (0, 15, 6, [0, 3, 6, 9, 12, 15]),
    ],
)
def test_code_colour_bars_tick_whole_codes(lo: int, hi: int, n: int, ticks: list[int]) -> None:
    assert tick_values(codes(lo, hi), n) == [float(t) for t in ticks]
    assert colourbar_payload(codes(lo, hi), n)["ticks"] == [str(t) for t in ticks]


def test_value_colour_bars_keep_even_ticks() -> None:
    limits = ColourLimits("RdBu_r", -1.0, 1.0, "")
    assert tick_values(limits, 5) == [-1.0, -0.5, 0.0, 0.5, 1.0]


def test_code_maps_of_every_size_tick_whole_codes() -> None:
    small = explore(TEN, QuantConfig(4, Mode.SYMMETRIC, PerTensor()))
    assert code_limits(small).integer
    figs = overview_figures(small, ViewOptions()).named()
    bar = figs["codes"].data[0].colorbar
    assert bar.tickmode == "array"
    assert all(float(v).is_integer() for v in bar.tickvals)
    assert list(bar.ticktext) == [f"{v:.0f}" for v in bar.tickvals]
    # a value map keeps plotly's own ticks
    assert figs["original"].data[0].colorbar.tickvals is None


def test_the_ten_value_vector_labels_fit_their_cells() -> None:
    exp = explore(TEN, QuantConfig(4, Mode.ASYMMETRIC, PerTensor()))
    figs = overview_figures(exp, ViewOptions()).named()
    original = figs["original"].data[0]
    # 3 significant digits, no trailing zeros ("0.1000", "0.002000" ran into each other)
    assert original.text.tolist() == [
        ["0.1", "-0.25", "0.33", "1.5", "-2.75", "0.01", "0.002", "-0.6", "3.14", "-1.1"]
    ]
    assert original.texttemplate == "%{text}"
    for name, fig in figs.items():
        heat = fig.data[0]
        if heat.text is None:
            assert heat.texttemplate is None, name
            continue
        widest = max(len(t) for t in np.asarray(heat.text).reshape(-1))
        assert 10 * (widest + 1) <= LABEL_CHARS_PER_ROW, (name, heat.text)


def test_cell_labels_rules() -> None:
    assert cell_labels(np.array([[1.0, -8.0, 7.0]]), "code").tolist() == [["1", "-8", "7"]]
    # exact cells: an error of -0.0 reads 0
    assert cell_labels(np.array([[-0.0, 0.5]]), "error").tolist() == [["0", "0.5"]]
    # non-finite cells are left blank (the background marks them)
    assert cell_labels(np.array([[np.nan, 1.0]]), "original").tolist() == [["", "1"]]
    # 3 digits would not fit 10 cells, 2 do
    wide = np.array([[0.0123, -0.0456, 0.0312, -0.0789, 0.05, 0.01, 0.02, 0.03, 0.04, 0.06]])
    assert cell_labels(wide, "error") is None or all(
        len(t) <= 5 for t in cell_labels(wide, "error").reshape(-1)
    )
    # too many columns for any label, and too many cells
    assert cell_labels(np.linspace(-1, 1, 40).reshape(1, 40), "original") is None
    assert cell_labels(np.zeros((17, 16)), "code") is None


def test_fp8_histogram_counts_codes_and_levels_in_their_own_units() -> None:
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    x[0] = 0.0  # a block of zeros: one code used
    exp = explore(x, QuantConfig(8, format=Format.FP8_E4M3, granularity=PerChannel(axis=0)))
    view = histogram_view(exp, 0)
    assert "1 of 256 codes used" in view.title
    assert view.n_levels == 253 and view.n_codes == 256
    assert histogram_payload(view)["levels_label"] == (
        "253 quantization levels (the distinct finite values of the 256 codes)"
    )
    # an integer format's levels are its codes: nothing to explain
    int4 = histogram_view(explore(x, QuantConfig(4)), 0)
    assert int4.levels_label == "16 quantization levels" and "of 16 codes used" in int4.title


def test_rings_are_spread_out_one_a_neighbourhood() -> None:
    # three points piled within 2 px and one far away; gap 6 px: the most extreme of the
    # pile and the far one
    ys = np.array([10.0, 11.0, 12.0, 100.0])
    xs = np.array([10.0, 10.0, 11.0, 100.0])
    far = np.array([1.0, 3.0, 2.0, 0.5])
    assert spread_out(ys, xs, far, 6.0).tolist() == [1, 3]
    # apart by exactly the gap: both kept (rings touch, never overlap)
    assert spread_out(np.array([0.0, 6.0]), np.zeros(2), np.ones(2), 6.0).tolist() == [0, 1]
    assert spread_out(np.zeros(0), np.zeros(0), np.zeros(0), 6.0).tolist() == []


def test_an_outlier_channel_gets_a_few_rings_not_a_blob() -> None:
    # 600 x 600 (drawn as images, 2x2 cells a pixel) of 0.01 but for one column's first 60
    # rows at -0.5: the 30 overview cells holding them are the only ones beyond the colour
    # range (0.01), side by side
    x = torch.full((600, 600), 0.01)
    x[:60, 17] = -0.5
    exp = explore(x, QuantConfig(8, Mode.SYMMETRIC, PerChannel(axis=0)))
    original = overview_figures(exp, ViewOptions()).original
    assert original.n_candidates == 30
    assert 1 <= original.n_marked <= 30 // 4
    assert marked_note(original.n_marked, original.n_candidates).endswith(
        f"({original.n_marked} rings for {original.n_candidates} cells, one a neighbourhood)"
    )


def test_rings_on_a_labelled_map_sit_off_the_labels() -> None:
    exp = explore(TEN, QuantConfig(4, Mode.ASYMMETRIC, PerTensor()))
    figs = overview_figures(exp, ViewOptions()).named()
    ringed = 0
    for fig in figs.values():
        heat, *rest = fig.data
        for trace in rest:
            if trace.mode != "markers":
                continue
            ringed += 1
            assert heat.text is not None
            # the top right corner of the cell (row 0 on top), not its centre
            assert np.allclose(np.asarray(trace.x) % 1, 0.35)
            assert np.allclose(np.asarray(trace.y) % 1, 0.65)
    assert ringed >= 1  # 3.14 comes back as 3.1413, beyond the shared limit ±3.14: ringed


@pytest.mark.parametrize(
    ("value", "lo", "hi"),
    [(1.0, 0.5, 1.5), (-2.0, -3.0, -1.0), (0.0, -1.0, 1.0), (1e-6, 5e-7, 1.5e-6)],
)
def test_a_constant_tensors_maps_centre_on_its_value(value: float, lo: float, hi: float) -> None:
    """All-ones drew 1 to 2 (``lo + 1``): the colour bar named a 2 the data is nowhere near.
    Now the range is centred on the value (±1 around 0, on the diverging scale)."""
    from dashboard.services.explorer.stored import scale_map_figure, scale_maps

    x = torch.full((8, 64), value)
    exp = explore(x, QuantConfig(8, Mode.SYMMETRIC, PerChannel(axis=0)))
    figs = overview_figures(exp, ViewOptions()).named()
    for name in ("original", "dequantized"):
        heat = figs[name].data[0]
        assert (heat.zmin, heat.zmax) == pytest.approx((lo, hi)), name
        assert heat.colorscale == figs["original"].data[0].colorscale
    limits = value_limits(exp, x.numpy())
    assert (limits.lo, limits.hi) == pytest.approx((lo, hi))
    assert ("±1" if value == 0 else f"every value is {value:.4g}") in limits.note
    assert "0 values beyond" in limits.note
    assert (limits.colorscale == DIVERGING) is (value == 0)
    for m in scale_maps(exp):  # every row's scale is the same too
        heat = scale_map_figure(m).data[0]
        s = float(np.asarray(m.values).reshape(-1)[0])
        assert heat.zmin < s < heat.zmax
        assert (heat.zmin + heat.zmax) / 2 == pytest.approx(s) or s == 0


def test_nearly_constant_values_span_their_ends() -> None:
    """One value in 1000 apart: the percentiles meet, so the range is the data's ends."""
    x = torch.ones(10, 100)
    x[3, 7] = 5.0
    limits = value_limits(explore(x, QuantConfig(8)), x.numpy())
    assert (limits.lo, limits.hi) == (1.0, 5.0)
