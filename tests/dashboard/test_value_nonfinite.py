"""NaN and Inf: counted and located, left out of every metric and count, drawn magenta,
and never allowed to move a scale."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest
import torch
from value_helpers import (
    CASES,
    configs_for,
    decode,
    fig_json,
    first_row_nan,
    heatmaps,
    load_one,
    nonfinite_grid,
    npy_bytes,
    pt_bytes,
    safetensors_bytes,
)

from dashboard.services.explorer import teaching
from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.heatmaps import ViewOptions, overview_figures
from dashboard.services.explorer.histogram import histogram_view
from dashboard.services.explorer.zoom import zoom_payload, zoom_view
from dashboard.services.io import load_tensor
from dashboard.services.sources.choice import UploadSource
from dashboard.services.sources.prepared import prepare
from quant_core import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    clip_bounds,
    quantize,
)

NAN, INF = float("nan"), float("inf")
MAGENTA = "#ff00ff"

# --- NaN and Inf ---------------------------------------------------------------------


def test_nonfinite_counts_and_first_positions() -> None:
    item = load_one("bad.npy", npy_bytes(nonfinite_grid()))
    nf = item.source.nonfinite
    assert nf is not None
    assert (nf.n_nan, nf.n_inf, nf.n_total, nf.n_finite) == (2, 2, 40, 36)
    assert nf.first_positions == ((0, 3), (1, 0), (2, 5), (4, 7))
    expected = torch.zeros(5, 8, dtype=torch.bool)
    expected[0, 3] = expected[1, 0] = expected[2, 5] = expected[4, 7] = True
    assert torch.equal(nf.mask, expected)
    text = nf.describe()
    assert "2 NaN and 2 Inf among 40 values" in text
    assert "(0, 3), (1, 0), (2, 5), (4, 7)" in text


def test_nonfinite_positions_of_a_conv_weight_are_matrix_positions() -> None:
    w = torch.randn(4, 2, 2, 2)
    w[2, 1, 0, 1] = INF  # row 2, column 1*4 + 0*2 + 1 = 5 of the [4, 8] view
    item = load_one("conv.pt", pt_bytes({"w": w}))
    assert item.source.nonfinite is not None
    assert item.source.nonfinite.first_positions == ((2, 5),)
    assert item.source.nonfinite.n_inf == 1


def test_more_than_ten_nonfinite_cells_lists_ten_then_an_ellipsis() -> None:
    a = np.zeros((3, 10), np.float32)
    a[1, :] = np.nan
    a[2, ::3] = np.inf
    item = load_one("many.npy", npy_bytes(a))
    nf = item.source.nonfinite
    assert nf is not None and (nf.n_nan, nf.n_inf) == (10, 4)
    assert nf.first_positions == tuple((1, c) for c in range(10))
    assert nf.describe().endswith(", …")


def hand_metrics(x: np.ndarray, x_hat: np.ndarray) -> dict[str, float]:
    """The metrics' definitions, in float64 numpy."""
    d = x - x_hat
    sq = float(np.sum(d * d))
    signal = float(np.sum(x * x))
    mse = sq / x.size
    na, nb = math.sqrt(signal), math.sqrt(float(np.sum(x_hat * x_hat)))
    return {
        "mse": mse,
        "rmse": math.sqrt(mse),
        "mean_abs": float(np.mean(np.abs(d))),
        "max_abs": float(np.max(np.abs(d))),
        "sqnr_db": math.inf if sq == 0 else 10 * math.log10(signal / sq),
        "cosine": 1.0 if na == nb == 0 else float(np.dot(x, x_hat)) / (na * nb),
    }


NONFINITE_FILES = {
    "npy": ("bad.npy", npy_bytes(nonfinite_grid()), None),
    "csv": ("bad.csv", b"1,nan,3\ninf,5,-inf\n-2,0.5,4\n", None),
    "float16": CASES["nan_inf_float16"],
}


@pytest.mark.parametrize("which", list(NONFINITE_FILES))
def test_nonfinite_metrics_cover_finite_cells_only(which: str) -> None:
    filename, data, name = NONFINITE_FILES[which]
    source = load_one(filename, data, name).source
    assert source.nonfinite is not None
    bad = source.nonfinite.mask.numpy()
    x = source.matrix.numpy().astype(np.float64)
    for cfg in configs_for(source.matrix.shape[1]):
        exp = explore(source.matrix, cfg)
        assert exp.finite is not None and torch.equal(exp.finite, ~source.nonfinite.mask)
        for t in (exp.original, exp.dequantized, exp.error):
            assert np.array_equal(np.isnan(t.numpy()), bad), cfg.describe()
        x_hat = exp.dequantized.numpy().astype(np.float64)
        want = hand_metrics(x[~bad], x_hat[~bad])
        got = exp.metrics
        for key, value in want.items():
            assert getattr(got, key) == pytest.approx(value, rel=1e-9, abs=1e-300), (
                cfg.describe(),
                key,
            )
        assert exp.value_min == float(x[~bad].min()) and exp.value_max == float(x[~bad].max())
        # clipping counts finite cells only (NaN compares False)
        bounds = clip_bounds(exp.qt)
        blocks = exp.qt.layout.to_blocks(exp.original)
        assert exp.clip.n_clipped_low == int((blocks < bounds.lo).sum()), cfg.describe()
        assert exp.clip.n_clipped_high == int((blocks > bounds.hi).sum()), cfg.describe()


def test_a_stand_in_is_not_counted_as_clipped() -> None:
    """A negative row's NaN gets the stand-in max(row) = -2.0, which the asymmetric grid
    does not cover (see test_asymmetric_minmax_never_clips): not counted as clipped."""
    x = torch.tensor([[-3.0, -2.5, NAN, -2.0]])
    exp = explore(x, QuantConfig(2, Mode.ASYMMETRIC))
    bounds = clip_bounds(exp.qt)
    finite = x[torch.isfinite(x)]
    assert exp.clip.n_clipped_low == int((finite < bounds.lo.item()).sum())
    assert exp.clip.n_clipped_high == int((finite > bounds.hi.item()).sum())


def _few_values_many_nan() -> tuple[torch.Tensor, torch.Tensor]:
    """16 positive values, then 30 NaN: one [1, 46] row."""
    values = torch.randn(16, generator=torch.Generator().manual_seed(0)).abs() + 0.3
    return values, torch.cat([values, torch.full((30,), NAN)])[None]


@pytest.mark.parametrize(
    "cfg",
    [
        QuantConfig(3, Mode.SYMMETRIC),
        QuantConfig(format=Format.NF4),
        QuantConfig(4, Mode.SYMMETRIC, range_method=RangeMethod.PERCENTILE, percentile=90.0),
        QuantConfig(3, Mode.SYMMETRIC, range_method=RangeMethod.MSE),
    ],
    ids=["int3_minmax", "nf4_minmax", "int4_percentile", "int3_mse"],
)
def test_many_nan_do_not_change_the_scale(cfg: QuantConfig) -> None:
    values, x = _few_values_many_nan()
    exp = explore(x, cfg)
    alone = quantize(values[None], cfg)
    assert exp.qt.scale.item() == alone.scale.item()
    assert torch.equal(exp.dequantized[0, :16], alone.dequantize()[0])


@pytest.mark.parametrize("gran", [PerTensor(), PerChannel(0), PerChannel(1)], ids=str)
@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.value)
def test_nonfinite_quantizes_like_the_finite_values_alone(gran, mode: Mode) -> None:
    """Min-max: each block's finite values get the codes they would get on their own."""
    source = load_one("bad.npy", npy_bytes(nonfinite_grid())).source
    m = source.matrix
    cfg = QuantConfig(4, mode, gran)
    exp = explore(m, cfg)
    finite = torch.isfinite(m)
    if isinstance(gran, PerTensor):
        pieces = [(finite, m[finite])]
    else:
        pieces = []
        for i in range(m.shape[gran.axis]):
            sel = torch.zeros_like(finite)
            sel.select(gran.axis, i).fill_(True)
            sel &= finite
            pieces.append((sel, m[sel]))
    for sel, values in pieces:
        alone = quantize(values[None], QuantConfig(4, mode, PerTensor())).dequantize()[0]
        assert torch.equal(exp.dequantized[sel], alone)


def test_nonfinite_figures_hold_nan_exactly_there_on_magenta() -> None:
    source = load_one("bad.npy", npy_bytes(nonfinite_grid())).source
    bad = source.nonfinite.mask.numpy()
    for cfg in (QuantConfig(4, Mode.ASYMMETRIC, PerGroup(4)), QuantConfig(format=Format.NF4)):
        exp = explore(source.matrix, cfg)
        figs = overview_figures(exp, ViewOptions())
        for fig in (figs.original, figs.dequantized, figs.error):
            layout = fig_json(fig)["layout"]
            assert layout["plot_bgcolor"] == MAGENTA
            (heat,) = heatmaps(fig)
            z = decode(heat["z"])
            assert z.shape == bad.shape
            assert np.array_equal(np.isnan(z), bad), layout["title"]["text"]
        assert fig_json(figs.codes)["layout"]["plot_bgcolor"] == MAGENTA
        zoom = zoom_payload(zoom_view(exp, 0, 0, 32))
        assert zoom["nan"] == [255, 0, 255]  # the browser paints NaN cells magenta
        cells = np.frombuffer(base64.b64decode(zoom["cells"]), dtype="<f4")
        cells = cells.reshape(zoom["nrows"], zoom["ncols"], -1)
        for i in (0, 2, 3):  # original, dequantized, error
            assert np.array_equal(np.isnan(cells[..., i]), bad)
        # the hover of a non-finite cell says its dequantized value and error are NaN
        custom = decode(heatmaps(figs.original)[0]["customdata"])
        assert np.array_equal(np.isnan(custom[..., 1]), bad)
        assert np.array_equal(np.isnan(custom[..., 2]), bad)


def test_finite_tensor_figures_have_no_nan_and_white_background() -> None:
    source = load_one("ok.npy", npy_bytes(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)))
    assert source.source.nonfinite is None
    exp = explore(source.source.matrix, QuantConfig(4))
    assert exp.finite is None
    for fig in overview_figures(exp, ViewOptions()).all():
        assert fig_json(fig)["layout"]["plot_bgcolor"] == "white"
        assert not np.isnan(decode(heatmaps(fig)[0]["z"])).any()


def test_codes_panels_mark_nonfinite_cells_too() -> None:
    source = load_one("bad.npy", npy_bytes(nonfinite_grid())).source
    bad = source.nonfinite.mask.numpy()
    exp = explore(source.matrix, QuantConfig(4, Mode.SYMMETRIC, PerChannel(0)))
    codes = decode(heatmaps(overview_figures(exp, ViewOptions()).codes)[0]["z"])
    zoom_codes = zoom_view(exp, 0, 0, 32).values(1)
    assert np.array_equal(np.isnan(codes), bad)
    assert np.array_equal(np.isnan(zoom_codes), bad)


def test_clip_counts_cover_finite_cells_only() -> None:
    # int8 symmetric per tensor: 3.0 -> code 127 (saturated); the NaN's stand-in is 3.0 too
    exp = explore(torch.tensor([[3.0, NAN]]), QuantConfig(8, Mode.SYMMETRIC))
    assert exp.clip.n_elements == 1
    assert exp.clip.n_saturated == 1


def test_levels_used_counts_finite_cells_only() -> None:
    exp = explore(torch.tensor([[-4.0, NAN, 1.0, 4.0]]), QuantConfig(8, Mode.SYMMETRIC))
    finite_codes = exp.qt.codes[torch.isfinite(exp.original)]
    assert exp.levels_used == len(set(finite_codes.tolist())) == 3


@pytest.mark.parametrize(
    "filename, data",
    [
        ("nan.npy", npy_bytes(np.full((2, 3), np.nan, np.float32))),
        ("inf.csv", b"inf,-inf\n-inf,inf\n"),
        ("mix.safetensors", safetensors_bytes({"w": torch.tensor([NAN, INF, -INF]).half()})),
    ],
    ids=["all_nan_npy", "all_inf_csv", "all_nonfinite_f16"],
)
def test_nothing_finite_is_a_clear_value_error(filename: str, data: bytes) -> None:
    loaded = load_tensor(filename, data)
    with pytest.raises(ValueError, match=r"nothing to show: .*NaN and .*Inf among"):
        prepare(UploadSource("id", filename, None), loaded.tensor, filename, loaded.notes)


def test_zero_d_and_empty_tensors_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="0-d tensor"):
        item = load_tensor("s.pt", pt_bytes({"s": torch.tensor(1.5)}))
        prepare(UploadSource("id", "s.pt", "s"), item.tensor, "s", item.notes)
    with pytest.raises(ValueError, match="empty"):
        load_tensor("e.npy", npy_bytes(np.zeros((0, 4), np.float32)))


def test_histogram_of_a_block_with_no_finite_value() -> None:
    exp = explore(first_row_nan(), QuantConfig(4, Mode.SYMMETRIC, PerChannel(0)))
    assert histogram_view(exp, 0).counts is None
    assert histogram_view(exp, 1).counts is not None


def test_teaching_numbers_of_a_block_with_no_finite_value() -> None:
    exp = explore(first_row_nan(), QuantConfig(4, Mode.SYMMETRIC, PerChannel(0)))
    nums = teaching.block_numbers(exp, 0)
    teaching.formulas(exp, nums)
