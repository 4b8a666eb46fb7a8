"""The explorer's services without Streamlit: explore, heatmaps, histogram, teaching panel,
exports, block arithmetic."""

from __future__ import annotations

import io
import json
import math
import re
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from safetensors.torch import load

from dashboard.services.display import reduce as reduce_module
from dashboard.services.display.reduce import Reduction, reduce_2d
from dashboard.services.explorer import block_values, exports, formulas, teaching
from dashboard.services.explorer.colour import error_limits
from dashboard.services.explorer.explore import block_label, block_of, explore
from dashboard.services.explorer.heatmaps import (
    RICH_HOVER_MAX_CELLS,
    MapImage,
    ViewOptions,
    overview_figures,
)
from dashboard.services.explorer.histogram import histogram_payload, histogram_view
from dashboard.services.explorer.overview import IMAGE_MAX_SIDE
from dashboard.services.explorer.zoom import zoom_payload, zoom_view
from dashboard.services.sources.examples import Example, example_tensor
from dashboard.services.sources.synthetic import SyntheticSpec, make_synthetic
from quant_core import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    ScaleDtype,
    ZeroPoint,
)

COURSE = example_tensor(Example.COURSE_3X3)
MB = 1_000_000


def payload(m) -> int:
    """Bytes a chart costs: a figure's JSON, an image map's PNG, a canvas chart's payload."""
    if isinstance(m, dict):
        return len(json.dumps(m))
    return len(m.png) if isinstance(m, MapImage) else len(m.to_json())


# --- explore -------------------------------------------------------------------------


def test_explore_reference_scales_on_course_tensor() -> None:
    exp = explore(COURSE, QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)))
    assert exp.qt.scale.tolist() == pytest.approx([5.7370, 2.3268, 5.3906], abs=1e-4)
    assert torch.equal(exp.error, COURSE - exp.dequantized)
    assert exp.storage.n_scales == 3


def test_explore_more_bits_lower_mse() -> None:
    x = make_synthetic(SyntheticSpec(rows=64, cols=64))
    mses = [
        explore(x, QuantConfig(b, Mode.ASYMMETRIC, PerGroup(16))).metrics.mse for b in (2, 4, 8)
    ]
    assert mses[0] > mses[1] > mses[2]


def test_explore_leaves_nonfinite_cells_out() -> None:
    x = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, float("inf")]])
    exp = explore(x, QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)))
    assert exp.finite is not None and int(exp.finite.sum()) == 4
    for t in (exp.original, exp.dequantized, exp.error):
        assert math.isnan(float(t[0, 1])) and math.isnan(float(t[1, 2]))
    # Stand-ins stay inside each row's finite range: row 1's scale is 5/127, not inf.
    assert exp.qt.scale.tolist() == pytest.approx([3 / 127, 5 / 127])
    finite = torch.isfinite(x)
    err = (x - exp.dequantized)[finite].double()
    assert exp.metrics.mse == pytest.approx(float(err.square().mean()))
    assert math.isfinite(exp.metrics.sqnr_db)


def test_block_of_matches_layout() -> None:
    x = torch.randn(4, 12)
    for cfg in (
        QuantConfig(4, granularity=PerTensor()),
        QuantConfig(4, granularity=PerChannel(0)),
        QuantConfig(4, granularity=PerChannel(1)),
        QuantConfig(4, granularity=PerGroup(4)),
    ):
        exp = explore(x, cfg)
        ids = exp.qt.layout.block_ids()
        for r in range(4):
            for c in range(12):
                assert block_of(exp, r, c) == int(ids[r, c])


@pytest.mark.parametrize(
    ("gran", "block", "label"),
    [
        (PerTensor(), 0, "Whole tensor"),
        (PerChannel(0), 3, "Row (channel) 3"),
        (PerChannel(1), 5, "Column (channel) 5"),
        (PerGroup(4), 7, "Group 7 (row 2, columns 4–7)"),
        (PerGroup(12), 2, "Group 2 (row 2, columns 0–11)"),
    ],
    ids=["tensor", "rows", "columns", "groups", "group_is_a_row"],
)
def test_block_label_names_the_cells_block_cells_reads(gran, block: int, label: str) -> None:
    exp = explore(torch.randn(4, 12), QuantConfig(4, granularity=gran))
    assert block_label(exp, block) == label
    assert histogram_view(exp, block).title.startswith(label + ":")


# --- figures -------------------------------------------------------------------------


def test_reduce_2d_ignores_nan() -> None:
    # 2x3 into at most 3 cells: 2x2 blocks; the NaN is skipped, an all-NaN block stays NaN
    nan = float("nan")
    m = torch.tensor([[nan, 1.0, 4.0], [3.0, nan, nan]])
    mean = reduce_2d(m, 3, Reduction.MEAN)
    np.testing.assert_allclose(mean.values, [[2.0, 4.0]])
    mx = reduce_2d(torch.tensor([[nan, -5.0, nan], [3.0, 1.0, nan]]), 3, Reduction.MAX_ABS)
    np.testing.assert_allclose(mx.values[0, 0], -5.0)
    assert np.isnan(mx.values[0, 1])


def test_reduce_2d_mean_of_infinities() -> None:
    # 2x4 into 2 cells (2x2 blocks): +inf in one block and -inf in the other keep their
    # signs; +inf and -inf in one block have no mean (NaN), beside a finite block.
    inf = float("inf")
    apart = reduce_2d(
        torch.tensor([[inf, 1.0, 2.0, 3.0], [0.0, 1.0, -inf, 5.0]]), 2, Reduction.MEAN
    )
    np.testing.assert_array_equal(apart.values, [[inf, -inf]])
    met = reduce_2d(torch.tensor([[inf, 1.0, 2.0, 3.0], [-inf, 1.0, 4.0, 5.0]]), 2, Reduction.MEAN)
    assert np.isnan(met.values[0, 0]) and met.values[0, 1] == 3.5


# rows, columns, max_cells and the reduction, for the banded reduce_2d property tests
REDUCE_CASES = (
    st.integers(1, 70),
    st.integers(1, 40),
    st.integers(1, 200),
    st.sampled_from(list(Reduction)),
)


def _banded_equals_whole(
    matrix: torch.Tensor,
    whole: torch.Tensor,
    max_cells: int,
    how: Reduction,
    minus: torch.Tensor | None = None,
) -> None:
    """``reduce_2d(matrix, minus=)`` in bands of 12 cells (a band is one row of blocks, or
    more for narrow ones, so most matrices are many bands) is bit for bit
    ``reduce_2d(whole)``, float32."""
    with mock.patch.object(reduce_module, "_BAND_CELLS", 12):
        banded = reduce_2d(matrix, max_cells, how, minus=minus)
    full = reduce_2d(whole, max_cells, how)
    assert (banded.row_step, banded.col_step) == (full.row_step, full.col_step)
    assert banded.values.dtype == np.float32
    np.testing.assert_array_equal(banded.values, full.values)


@settings(max_examples=40, deadline=None)
@given(*REDUCE_CASES, st.sampled_from([torch.int8, torch.int16, torch.uint8]))
def test_reduce_2d_of_integers_in_bands_is_the_float_copys(
    rows: int, cols: int, max_cells: int, how: Reduction, dtype: torch.dtype
) -> None:
    """Integer codes are made float a band of block rows at a time (here bands of a few
    blocks, with a short last band): the result is bit for bit that of the float copy."""
    info = torch.iinfo(dtype)
    q = torch.randint(info.min, info.max + 1, (rows, cols), dtype=dtype)
    _banded_equals_whole(q, q.to(torch.float32), max_cells, how)


@settings(max_examples=40, deadline=None)
@given(*REDUCE_CASES, st.integers(0, 3))
def test_reduce_2d_of_a_difference_in_bands_is_the_differences(
    rows: int, cols: int, max_cells: int, how: Reduction, n_nan: int
) -> None:
    """``minus=b`` reduces ``a - b`` a band at a time (bands of a few blocks here, NaN cells
    included): bit for bit the reduction of the full difference."""
    gen = torch.Generator().manual_seed(rows * 1000 + cols)
    a = torch.randn(rows, cols, generator=gen)
    b = a + 0.1 * torch.randn(rows, cols, generator=gen)
    a.view(-1)[torch.randint(0, rows * cols, (n_nan,), generator=gen)] = float("nan")
    _banded_equals_whole(a, a - b, max_cells, how, minus=b)


def test_reduce_2d_minus_that_does_not_fit_is_refused() -> None:
    with pytest.raises(TypeError, match=r"minus must be a float32 tensor, got torch\.float64"):
        reduce_2d(torch.ones(4, 4), 4, Reduction.MEAN, minus=torch.ones(4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"minus has shape \(4, 3\), the matrix \(4, 4\)"):
        reduce_2d(torch.ones(4, 4), 4, Reduction.MEAN, minus=torch.ones(4, 3))


def test_max_abs_error_map_needs_no_full_error_matrix() -> None:
    """Under max |value| the error map is reduced from original and dequantized band by
    band: the same values as from ``exp.error``, which is never made."""
    exp = explore(torch.randn(600, 640), QuantConfig(3, Mode.ASYMMETRIC, PerGroup(64)))
    opts = ViewOptions(reduction=Reduction.MAX_ABS)
    figs = overview_figures(exp, opts)
    assert "error" not in exp.__dict__  # the cached property was not computed
    expected = reduce_2d(exp.error, opts.max_cells, Reduction.MAX_ABS, IMAGE_MAX_SIDE)
    assert figs.error.limits == error_limits(expected.values)
    assert figs.error.subtitle == figs.codes.subtitle and "max |value|" in figs.error.subtitle


def test_small_tensor_has_rich_hover_everywhere() -> None:
    exp = explore(COURSE, QuantConfig(8, Mode.ASYMMETRIC))
    figs = overview_figures(exp, ViewOptions())
    for fig in figs.all():
        trace = json.loads(fig.to_json())["data"][0]
        assert "customdata" in trace and "scale" in trace["hovertemplate"]
    assert RICH_HOVER_MAX_CELLS >= 9


@pytest.mark.parametrize(
    "shape", [(1024, 1024), (4096, 4096), (30522, 384)], ids=lambda s: f"{s[0]}x{s[1]}"
)
def test_every_chart_payload_under_2mb(shape: tuple[int, int]) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    exp = explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128)))
    figs = overview_figures(exp, ViewOptions(reduction=Reduction.MAX_ABS))
    sizes = [payload(f) for f in figs.all()]
    sizes.append(payload(zoom_payload(zoom_view(exp, 100, 100, 64))))
    sizes.append(payload(histogram_payload(histogram_view(exp, 3))))
    assert max(sizes) < 2 * MB, sizes
    assert "overview" in figs.original.subtitle


def test_shared_colour_scale_and_centred_error() -> None:
    exp = explore(torch.randn(32, 32), QuantConfig(3, Mode.SYMMETRIC))
    figs = overview_figures(exp, ViewOptions())
    o, d, e = figs.original.data[0], figs.dequantized.data[0], figs.error.data[0]
    assert (o.zmin, o.zmax, o.colorscale) == (d.zmin, d.zmax, d.colorscale)
    assert e.zmin == -e.zmax


def test_group_boundaries_drawn() -> None:
    exp = explore(torch.randn(8, 64), QuantConfig(4, granularity=PerGroup(16)))
    fig = overview_figures(exp, ViewOptions(show_boundaries=True)).original
    lines = [t for t in fig.data if t.type == "scatter" and t.mode == "lines"]
    assert len(lines) == 1
    xs = [v for v in lines[0].x if v is not None]
    assert sorted(set(xs)) == [15.5, 31.5, 47.5]
    fig = overview_figures(exp, ViewOptions(show_boundaries=False)).original
    assert not [t for t in fig.data if t.type == "scatter" and t.mode == "lines"]


@pytest.mark.parametrize("zp", [ZeroPoint.FLOAT_MIN, ZeroPoint.COURSE_CLAMP], ids=lambda z: z.value)
def test_maps_hover_and_levels_follow_the_zero_point_convention(zp: ZeroPoint) -> None:
    # all-positive groups: the case where s(q - z) and s q + m differ
    x = 1.0 + 0.1 * torch.randn(6, 32, generator=torch.Generator().manual_seed(1))
    exp = explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(8), zero_point=zp))
    want = exp.qt.dequantize().numpy()
    figs = overview_figures(exp, ViewOptions())
    np.testing.assert_array_equal(np.asarray(figs.dequantized.data[0].z), want)
    custom = np.asarray(figs.codes.data[0].customdata)
    np.testing.assert_array_equal(custom[..., 0], x.numpy())
    np.testing.assert_array_equal(custom[..., 1], exp.qt.codes.numpy())
    np.testing.assert_array_equal(custom[..., 2], want)
    np.testing.assert_array_equal(custom[..., 3], x.numpy() - want)
    hover = figs.codes.data[0].hovertemplate
    for name in ("original", "code", "dequantized", "error"):
        assert name in hover
    if zp is ZeroPoint.FLOAT_MIN:
        assert "offset m" in hover and "zero point" not in hover
        np.testing.assert_array_equal(custom[0, :8, 5], float(exp.qt.offset.reshape(-1)[0]))
    else:
        assert "zero point" in hover
    zoom = zoom_view(exp, 0, 0, 16)
    np.testing.assert_array_equal(zoom.values(2), want[:6, :16])
    for block in (0, 5):
        levels = histogram_view(exp, block).levels
        np.testing.assert_array_equal(levels, exp.qt.levels(block).numpy())
        # every dequantized value of the block is one of its levels
        assert set(want.reshape(-1, 8)[block].tolist()) <= set(levels.tolist())


def test_every_diverging_map_red_positive_said_in_colour_bar() -> None:
    x = torch.randn(300, 300, generator=torch.Generator().manual_seed(2))
    exp = explore(x, QuantConfig(3, Mode.SYMMETRIC))
    figs = overview_figures(exp, ViewOptions())
    for m in (figs.original, figs.dequantized, figs.error):  # images: their colour bars
        assert m.limits.colorscale == "RdBu_r"
        bar = m.colourbar
        assert bar["palette"][:3] == [5, 48, 97] and bar["palette"][-3:] == [103, 0, 31]
        assert bar["note"][0] == "red = positive, blue = negative"
    small = overview_figures(explore(x[:100, :100], QuantConfig(3)), ViewOptions())
    for trace in (small.original.data[0], small.error.data[0]):
        spec = json.loads(go_json(trace))
        assert spec["colorscale"][-1][1] == "rgb(103,0,31)"  # dark red at the top: +
        assert spec["colorscale"][0][1] == "rgb(5,48,97)"  # dark blue at the bottom: -
        assert "red = positive, blue = negative" in spec["colorbar"]["title"]["text"]
    zoom = zoom_payload(zoom_view(exp, 0, 0, 32))
    for panel in (zoom["panels"][0], *zoom["panels"][2:]):  # original, dequantized, error
        assert panel["palette"][-3:] == [103, 0, 31] and panel["palette"][:3] == [5, 48, 97]
        assert panel["note"][0] == "red = positive, blue = negative"
        assert panel["lo"] == -panel["hi"]


def test_colour_limit_is_the_percentile_not_one_outlier() -> None:
    # 40,000 values of about ±1 and one of 1000: the max would wash the map out
    x = torch.randn(200, 200, generator=torch.Generator().manual_seed(3))
    x[7, 9] = 1000.0
    exp = explore(x, QuantConfig(8, Mode.SYMMETRIC))
    m = overview_figures(exp, ViewOptions()).original
    want = float(np.percentile(np.abs(x.numpy()), 99.5, method="higher"))
    assert m.limits.hi == want and m.limits.lo == -want and want < 4
    beyond = int((x.abs() > want).sum())
    note = m.colourbar["note"]
    assert note[1:] == [
        f"±{want:.3g} (99.5th pct of |x|)",
        f"({beyond:,} values beyond, saturated)",
    ]
    # every saturated cell a candidate (fewer than MAX_MARKED), one ring a neighbourhood
    assert m.n_candidates == beyond and 0 < m.n_marked <= beyond
    img = np.asarray(Image.open(io.BytesIO(m.png)).convert("RGB"))
    fy, fx = m.scale
    around = img[7 * fy - 4 : 7 * fy + 6, 9 * fx - 4 : 9 * fx + 6]
    assert np.all(around == 0, axis=-1).any()  # a black ring round cell (7, 9)
    # a teaching-sized tensor keeps its maximum as the limit: nothing saturated
    small = overview_figures(explore(COURSE, QuantConfig(8)), ViewOptions()).original.data[0]
    assert small.zmax == float(COURSE.abs().max())


def go_json(trace) -> str:
    return json.dumps(trace.to_plotly_json(), default=lambda o: o.tolist())


def test_histogram_levels_and_counts() -> None:
    x = torch.linspace(-1, 1, 1000).reshape(10, 100)
    exp = explore(x, QuantConfig(3, Mode.SYMMETRIC, PerChannel(0)))
    view = histogram_view(exp, 0)
    assert int(np.sum(view.counts)) == 100
    assert view.levels_label == "8 quantization levels" and len(view.levels) == 8
    assert "of 8 codes used" in view.title


def test_histogram_shades_clipped_region() -> None:
    x = torch.cat([torch.randn(999), torch.tensor([40.0])]).reshape(1, -1)
    cfg = QuantConfig(4, Mode.SYMMETRIC, range_method="percentile", percentile=99.0)
    exp = explore(x, cfg)
    assert exp.clip.n_clipped >= 1
    view = histogram_view(exp, 0)
    assert len(view.clipped) >= 1
    # the clipped range starts where the representable range ends and runs to the maximum
    (lo, _), *_ = [c for c in view.clipped if c[1] == 40.0]
    assert 2.0 < lo < 40.0


def test_codebook_format_figures() -> None:
    exp = explore(torch.randn(16, 32), QuantConfig(format=Format.NF4, granularity=PerGroup(16)))
    figs = overview_figures(exp, ViewOptions())
    assert figs.codes.data[0].zmax == 15
    assert histogram_view(exp, 1).levels_label == "16 quantization levels"


# --- teaching ------------------------------------------------------------------------


def test_formulas_show_live_numbers_asymmetric() -> None:
    exp = explore(COURSE, QuantConfig(8, Mode.ASYMMETRIC))
    lines = formulas.formulas(exp, formulas.block_numbers(exp, 0))
    text = "\n".join(lines)
    assert "3.5788" in text and "-77" in text and "728.6" in text


def test_worked_table_reproduces_codes() -> None:
    exp = explore(COURSE, QuantConfig(8, Mode.ASYMMETRIC))
    table = teaching.worked_table(exp, 0, n_values=9)
    s, z = float(exp.qt.scale), int(exp.qt.zero_point)
    for _, row in table.iterrows():
        expected = max(-128, min(127, round(row["r"] / s + z)))
        assert row["code q (clamped)"] == expected
        assert row["r̂ = s(q − z)"] == pytest.approx(s * (expected - z), rel=1e-6)
    # the block's extremes are always listed
    assert table["r"].min() == pytest.approx(-184.0) and table["r"].max() == pytest.approx(728.6)


@pytest.mark.parametrize("n", [100, 16 * 4096, 16 * 4096 + 17, 300 * 4096 + 5])
def test_worked_table_extremes_are_the_first_argmin_and_argmax(n: int) -> None:
    """The row-wise search for a long block's extremes returns what argmin/argmax do,
    ties (many equal integers) going to the first occurrence, in the tail too."""
    g = torch.Generator().manual_seed(n)
    for v in (torch.randint(-5, 6, (n,), generator=g).float(), torch.randn(n, generator=g)):
        assert block_values.extreme_indices(v) == (int(v.argmin()), int(v.argmax()))
    v = torch.zeros(n)
    v[-1], v[-2] = -1.0, 1.0  # extremes in the tail only
    assert block_values.extreme_indices(v) == (n - 1, n - 2)


def test_worked_table_of_a_large_block_lists_its_extremes() -> None:
    x = torch.randn(512, 512, generator=torch.Generator().manual_seed(3))
    x[300, 7], x[5, 400] = -9.0, 9.0
    table = teaching.worked_table(explore(x, QuantConfig(4, Mode.SYMMETRIC)), 0, n_values=8)
    assert list(table["index in block"]) == [0, 1, 2, 3, 4, 5, 300 * 512 + 7, 5 * 512 + 400]


def test_block_values_are_the_same_for_every_scheme_and_reused_exactly() -> None:
    """What a block's values alone decide (range, extremes, histogram counts) comes out the
    same under every scheme of a granularity, and a histogram or teaching panel built from
    it (as the page does, cached on the source) equals one built from scratch."""
    x = torch.randn(96, 64, generator=torch.Generator().manual_seed(5))
    x[40, 3], x[7, 60] = -6.0, 7.0
    for gran, block in ((PerTensor(), 0), (PerChannel(0), 40), (PerGroup(16), 4 * 7 + 3)):
        exps = [explore(x, QuantConfig(b, m, gran)) for b in (3, 8) for m in Mode]
        stats = block_values.block_value_stats(exps[0], block)
        assert stats is not None
        values = x.reshape(-1) if gran == PerTensor() else None
        if values is not None:
            assert (stats.lo, stats.hi) == (-6.0, 7.0)
            assert stats.extremes == (40 * 64 + 3, 7 * 64 + 60)
            want = np.histogram(values.numpy(), bins=len(stats.counts), range=(-6.0, 7.0))[0]
            assert int(np.abs(stats.counts - want).sum()) <= 2  # float32 edges may differ
            assert stats.counts.sum() == x.numel()
        for exp in exps:
            other = block_values.block_value_stats(exp, block)
            assert other is not None and other.extremes == stats.extremes
            assert np.array_equal(other.counts, stats.counts)
            assert histogram_payload(histogram_view(exp, block, stats)) == histogram_payload(
                histogram_view(exp, block)
            )
            assert teaching.teaching_panel(exp, block, stats).table.equals(
                teaching.teaching_panel(exp, block).table
            )


def test_worked_table_marks_clamping() -> None:
    vec = example_tensor(Example.VECTOR_10).reshape(1, -1)
    exp = explore(vec, QuantConfig(8, Mode.ASYMMETRIC, zero_point=ZeroPoint.COURSE_CLAMP))
    table = teaching.worked_table(exp, 0, n_values=12)
    assert (table["clamped?"] == "yes").sum() == exp.clip.n_clipped_high >= 1


# --- exports -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        QuantConfig(3, Mode.ASYMMETRIC, PerGroup(5)),
        QuantConfig(4, Mode.ASYMMETRIC, PerGroup(5), zero_point=ZeroPoint.FLOAT_MIN),
        QuantConfig(4, Mode.ASYMMETRIC, PerChannel(1), scale_dtype=ScaleDtype.FP16),
        QuantConfig(5, Mode.SYMMETRIC, PerChannel(0), scale_dtype=ScaleDtype.BF16),
        QuantConfig(8, Mode.ASYMMETRIC, PerTensor(), zero_point=ZeroPoint.COURSE_CLAMP),
        QuantConfig(format=Format.NF4, granularity=PerGroup(5)),
        QuantConfig(format=Format.FP8_E4M3, granularity=PerChannel(0)),
    ],
    ids=lambda c: c.describe(),
)
def test_exports_round_trip(cfg: QuantConfig) -> None:
    x = torch.randn(6, 10, generator=torch.Generator().manual_seed(1)) + 0.5
    exp = explore(x, cfg)
    data = exports.quantized_safetensors(exp)
    back = exports.read_quantized_safetensors(data)
    assert torch.equal(back.codes.to(torch.int32), exp.qt.codes.to(torch.int32))
    assert torch.equal(back.scale, exp.qt.scale)
    assert torch.equal(back.dequantize(), exp.qt.dequantize())
    # The tensors are what the page's "Bytes" counts: packed codes, scales in their dtype,
    # zero points at the code width or offsets in the scale dtype (one byte of padding
    # at most per packed tensor); the rest of the file is its JSON header.
    tensors = load(data)
    stored = sum(t.numel() * t.element_size() for t in tensors.values())
    assert exp.storage.total_bytes <= stored <= exp.storage.total_bytes + 2
    header = int.from_bytes(data[:8], "little")
    assert len(data) == 8 + header + stored
    assert ("offset" in tensors) == cfg.float_offset
    assert ("zero_point" in tensors) == (cfg.has_zero_point and not cfg.float_offset)
    packed = exports.packed_codes(exp)
    assert len(packed) == math.ceil(60 * cfg.bits / 8)


def test_exports_reject_other_files() -> None:
    from safetensors.torch import save

    with pytest.raises(ValueError, match="not a Quantization Lab export"):
        exports.read_quantized_safetensors(save({"w": torch.zeros(2)}))


def test_metrics_csv_names_the_figures() -> None:
    exp = explore(torch.randn(6, 10), QuantConfig(3, Mode.ASYMMETRIC, PerGroup(5)))
    csv = exports.metrics_csv(exp)
    assert csv.startswith("metric,value") and "mse" in csv and "storage_bits_per_element" in csv
    files = exports.download_files(exp)
    assert files.metrics_csv.decode() == csv and files.packed_codes == exports.packed_codes(exp)


def test_block_notes_follow_the_zero_point_convention() -> None:
    vec = example_tensor(Example.VECTOR_10).reshape(1, -1)  # all positive
    course = explore(vec, QuantConfig(8, Mode.ASYMMETRIC, zero_point=ZeroPoint.COURSE_CLAMP))
    (note,) = teaching.block_notes(course, formulas.block_numbers(course, 0))
    assert "clamped to -128" in note and "positive" in note
    widened = explore(vec, QuantConfig(8, Mode.ASYMMETRIC))
    (note,) = teaching.block_notes(widened, formulas.block_numbers(widened, 0))
    assert "widened to [0," in note and "not clamped" in note
    fmin = explore(vec, QuantConfig(8, Mode.ASYMMETRIC, zero_point=ZeroPoint.FLOAT_MIN))
    nums = formulas.block_numbers(fmin, 0)
    (note,) = teaching.block_notes(fmin, nums)
    assert f"m = {nums.offset:.6g}" in note
    # the symmetric grid of an all-positive block needs no note about its lowest code
    sym = explore(vec, QuantConfig(8, Mode.SYMMETRIC))
    assert teaching.block_notes(sym, formulas.block_numbers(sym, 0)) == ()


def test_symmetric_note_explains_the_unused_lowest_code() -> None:
    exp = explore(COURSE, QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)))
    nums = formulas.block_numbers(exp, 0)  # row 0: [-184, ..., 728.6]
    (note,) = teaching.block_notes(exp, nums)
    assert f") = {round(nums.data_min / nums.scale)}, not on the lowest code -128" in note


def test_float_min_formulas_show_the_offset() -> None:
    vec = example_tensor(Example.VECTOR_10).reshape(1, -1)
    exp = explore(vec, QuantConfig(4, Mode.ASYMMETRIC, zero_point=ZeroPoint.FLOAT_MIN))
    nums = formulas.block_numbers(exp, 0)
    assert nums.offset == pytest.approx(float(exp.qt.offset))
    text = " ".join(formulas.formulas(exp, nums))
    assert r"\hat r = s\,q + m" in text and f"{nums.offset:.5g}" in text
    panel = teaching.teaching_panel(exp, 0)
    assert "float min" in panel.heading and "*m*" in panel.symbols
    # the table's dequantized column is s q + m, the codes are those quantize gave
    for _, row in panel.table.iterrows():
        q = row["code q (clamped)"]
        assert row["r̂ = s·q + m"] == pytest.approx(nums.scale * q + nums.offset, rel=1e-6)


def _text_args(line: str) -> list[str]:
    """The arguments of every ``\\text{...}`` of a LaTeX line (braces nest)."""
    out, i = [], 0
    while (i := line.find(r"\text{", i)) >= 0:
        depth, j = 1, i + len(r"\text{")
        while depth:
            depth += {"{": 1, "}": -1}.get(line[j], 0) if line[j - 1] != "\\" else 0
            j += 1
        out.append(line[i + len(r"\text{") : j - 1])
        i = j
    return out


def _balanced(line: str) -> bool:
    depth = 0
    for k, c in enumerate(line):
        if k and line[k - 1] == "\\":
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


ALL_SCHEMES = [
    QuantConfig(format=f, granularity=PerChannel(0)) for f in Format if f is not Format.INT
] + [
    QuantConfig(4, mode, PerChannel(0), range_method=rm, zero_point=zp, rounding=rnd)
    for mode in Mode
    for zp in ZeroPoint
    for rm in ("minmax", "percentile")
    for rnd in ("nearest", "stochastic")
    if mode is Mode.ASYMMETRIC or zp is ZeroPoint.INCLUDE_ZERO
]


@pytest.mark.parametrize(
    "cfg", ALL_SCHEMES, ids=lambda c: f"{c.describe()} {c.range_method.value} {c.rounding.value}"
)
def test_every_formula_is_valid_latex(cfg: QuantConfig) -> None:
    exp = explore(COURSE + 200.0, cfg)  # all positive: every convention's branch
    for block in range(exp.n_blocks):
        for line in formulas.formulas(exp, formulas.block_numbers(exp, block)):
            assert _balanced(line), line
            for arg in _text_args(line):
                assert all(c not in arg.replace("\\_", "") for c in "_^"), line


def test_latex_text_escapes() -> None:
    assert formulas.latex_text("FP8_E4M3 & 50%") == r"\text{FP8\_E4M3 \& 50\%}"


def test_small_tensors_list_every_value_and_every_scale() -> None:
    exp = explore(COURSE, QuantConfig(8, Mode.ASYMMETRIC, PerTensor()))
    table = teaching.worked_table(exp, 0)
    assert len(table) == 9 and sorted(table["r"]) == sorted(COURSE.reshape(-1).tolist())
    vec = explore(example_tensor(Example.VECTOR_10).reshape(1, -1), QuantConfig(8))
    assert len(teaching.worked_table(vec, 0)) == 10
    per_row = explore(COURSE, QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)))
    scales = teaching.scales_table(per_row)
    assert scales is not None and len(scales) == 3
    assert scales["s"].tolist() == pytest.approx(per_row.qt.scale.reshape(-1).tolist())
    assert teaching.scales_table(exp) is None  # one block: the formulas show its scale
    big = explore(torch.randn(4, 300), QuantConfig(4, granularity=PerChannel(1)))
    assert teaching.scales_table(big) is None  # 300 blocks: too many to list
    assert len(teaching.worked_table(big, 0, n_values=8)) == 4  # a column of 4 values


def test_heading_names_the_block_and_the_convention() -> None:
    exp = explore(COURSE, QuantConfig(8, Mode.ASYMMETRIC, PerChannel(0)))
    text = teaching.heading(exp, 2)
    assert "Row (channel) 2" in text and "one of 3 blocks" in text and "include zero" in text
    assert "zero point" in teaching.symbols(exp) and "q*min" in teaching.symbols(exp)


def test_block_ids_window_matches_layout() -> None:
    from dashboard.services.explorer.explore import block_ids

    x = torch.randn(6, 12)
    for gran in (PerTensor(), PerChannel(0), PerChannel(1), PerGroup(4), PerGroup(12)):
        exp = explore(x, QuantConfig(4, granularity=gran))
        full = exp.qt.layout.block_ids()
        window = block_ids(exp, slice(1, 5), slice(3, 11))
        assert torch.equal(window, full[1:5, 3:11])


def test_teaching_uses_the_chosen_clipping_range() -> None:
    # All-positive rows under a percentile range: the formula shows the range the grid was
    # fitted to (about [5, 6]), not the representable range after the zero-point clamp.
    x = torch.rand(4, 200, generator=torch.Generator().manual_seed(0)) + 5
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerChannel(0), range_method="percentile", percentile=95.0)
    exp = explore(x, cfg)
    nums = formulas.block_numbers(exp, 0)
    row = x[0].sort().values
    assert nums.chosen_hi == pytest.approx(float(row[189]))  # rank ceil(0.95 * 200) = 190
    assert nums.chosen_lo == pytest.approx(float(row[9]))  # rank ceil(0.05 * 200) = 10
    text = " ".join(formulas.formulas(exp, nums))
    assert f"{nums.chosen_hi:.5g}" in text
    notes = teaching.block_notes(exp, nums)
    assert any("widened to [0," in n for n in notes)  # include zero, the default
    assert any("percentile range" in n and "narrower" in n for n in notes)


def test_teaching_markdown_is_the_heading_then_each_formula_as_display_math() -> None:
    panel = teaching.teaching_panel(explore(COURSE, QuantConfig(8, Mode.SYMMETRIC)), 0)
    parts = panel.markdown.split("\n\n")
    assert parts[0] == panel.heading.split("\n\n")[0]
    blocks = re.findall(r"^\$\$\n(.*?)\n\$\$$", panel.markdown, flags=re.S | re.M)
    assert blocks == list(panel.formulas) and len(blocks) >= 3


def test_mxint8_counts_its_255_codes_everywhere() -> None:
    # OCP's MXINT8 codes are -127..127: 255 of 8 bits' 256 (quant_core.code_total)
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(5))
    exp = explore(x, QuantConfig.from_name("MXINT8"))
    view = histogram_view(exp, 0)
    assert re.search(r"\d+ of 255 codes used", view.title), view.title
    frame = exports.metrics_frame(exp)
    assert frame.set_index("metric").loc["levels_total", "value"] == "255"
    int4 = explore(x, QuantConfig(4))
    assert "of 16 codes used" in histogram_view(int4, 0).title


@pytest.mark.parametrize(
    ("name", "levels"),
    [("TQ1_0", "ternary (5 per byte)"), ("NVFP4", "FP4 E2M1"), ("NF4_DQ", "NF4")],
)
def test_stored_symbols_name_the_levels_as_the_pages_do(name: str, levels: str) -> None:
    """The symbols said "the TERNARY_PACKED levels", the enum's name upper-cased."""
    from dashboard.services.explorer.stored import stored_formulas, stored_numbers, stored_symbols
    from quant_core import QuantConfig

    x = torch.randn(16, 256, generator=torch.Generator().manual_seed(0))
    exp = explore(x, QuantConfig.from_name(name))
    assert f"*v*: the {levels} levels" in stored_symbols(exp)
    assert "_" not in stored_symbols(exp).split("*v*:")[1]
    formulas_text = " ".join(stored_formulas(exp, stored_numbers(exp, 0)))
    assert f"v = \\text{{{levels}}}" in formulas_text, formulas_text
