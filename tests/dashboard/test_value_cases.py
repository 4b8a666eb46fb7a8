"""Unusual values end to end, without a Streamlit server.

Each case is a file as a user would have it (``np.save``, ``safetensors.torch.save``,
``torch.save`` of a state dict, CSV text), taken through the real path the page uses:
``io.list_tensors`` -> ``io.load_tensor`` -> ``prepared.prepare`` ->
``explore.explore`` under many schemes -> figures -> teaching panel -> exports.
The explorer page itself runs under AppTest for the teaching examples and for an upload
holding NaN and Inf.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from streamlit.testing.v1 import AppTest

from dashboard.services.explorer import exports, teaching
from dashboard.services.explorer.explore import Exploration, block_of, explore
from dashboard.services.explorer.heatmaps import ViewOptions, overview_figures, zoom_figure
from dashboard.services.explorer.histogram import histogram_figure
from dashboard.services.io import LoadedTensor, TensorInfo, list_tensors, load_tensor
from dashboard.services.sources.choice import SourceKind, UploadSource
from dashboard.services.sources.examples import Example
from dashboard.services.sources.prepared import PreparedSource, prepare
from quant_core import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    Rounding,
    clip_bounds,
    quantize,
    unpack,
)

EXPLORER = str(Path(__file__).resolve().parents[2] / "dashboard" / "views" / "explorer.py")
NAN, INF = float("nan"), float("inf")
MAGENTA = "#ff00ff"
# float32 unit roundoff: one rounding multiplies a value by (1 + d) with |d| <= U.
U = 2.0**-24


# --- files as a user would have them ------------------------------------------------


def npy_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def pt_bytes(state: dict[str, torch.Tensor]) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def safetensors_bytes(tensors: dict[str, torch.Tensor]) -> bytes:
    return st_save(tensors)


@dataclass(frozen=True)
class Loaded:
    """One tensor of a file after the page's loading path."""

    info: TensorInfo
    loaded: LoadedTensor
    source: PreparedSource


def load_all(filename: str, data: bytes) -> list[Loaded]:
    """Every tensor of a file, as the upload picker and ``_load`` would prepare it."""
    out = []
    for info in list_tensors(filename, data):
        loaded = load_tensor(filename, data, info.name)
        label = f"{filename} · {loaded.name}"
        choice = UploadSource("id", filename, info.name)
        out.append(Loaded(info, loaded, prepare(choice, loaded.tensor, label, loaded.notes)))
    return out


def load_one(filename: str, data: bytes, name: str | None = None) -> Loaded:
    items = load_all(filename, data)
    return items[0] if name is None else next(i for i in items if i.info.name == name)


# --- schemes -----------------------------------------------------------------------


def group_size_for(cols: int) -> int:
    """A valid group size: the largest divisor of ``cols`` below it (1 for 1 or a prime)."""
    return max((d for d in range(1, cols) if cols % d == 0), default=1)


def configs_for(cols: int) -> list[QuantConfig]:
    """Integer 2/4/8 bits at every granularity (per tensor, per channel on axis 0 and 1, per
    group), symmetric and asymmetric alternating so each pair of bits, mode and granularity
    occurs; NF4 and FP8 E4M3 at every granularity; percentile and MSE ranges and stochastic
    rounding in both modes."""
    grans = [PerTensor(), PerChannel(0), PerChannel(1), PerGroup(group_size_for(cols))]
    modes = list(Mode)
    out = [
        QuantConfig(bits, modes[(i + j) % 2], gran)
        for j, bits in enumerate((2, 4, 8))
        for i, gran in enumerate(grans)
    ]
    out += [
        QuantConfig(format=f, granularity=g) for f in (Format.NF4, Format.FP8_E4M3) for g in grans
    ]
    for m in modes:
        out += [
            QuantConfig(4, m, grans[1], range_method=RangeMethod.PERCENTILE, percentile=90.0),
            QuantConfig(8, m, grans[3], range_method=RangeMethod.MSE),
            QuantConfig(3, m, grans[2], rounding=Rounding.STOCHASTIC, seed=7),
        ]
    out += [
        QuantConfig(format=Format.NF4, granularity=grans[1], range_method=RangeMethod.MSE),
        QuantConfig(format=Format.FP8_E4M3, range_method=RangeMethod.PERCENTILE),
    ]
    return out


# --- plotly JSON -------------------------------------------------------------------


def decode(arr: object) -> np.ndarray:
    """Plotly's typed array (``{"dtype", "bdata", "shape"}``) or a nested list, as float64."""
    if isinstance(arr, dict):
        flat = np.frombuffer(base64.b64decode(arr["bdata"]), dtype=arr["dtype"])
        shape = arr.get("shape")
        if isinstance(shape, str):
            shape = [int(s) for s in shape.split(",")]
        return flat.reshape(shape).astype(np.float64) if shape else flat.astype(np.float64)
    return np.array(arr, dtype=np.float64)  # None (JSON null) becomes NaN


def fig_json(fig) -> dict:
    return json.loads(fig.to_json())


def heatmaps(fig) -> list[dict]:
    return [t for t in fig_json(fig)["data"] if t["type"] == "heatmap"]


# --- checks shared by every case ------------------------------------------------------


def assert_metrics_sound(exp: Exploration, where: str) -> None:
    """Every metric finite; SQNR is +inf exactly when the error is zero."""
    m = exp.metrics
    for name in ("mse", "rmse", "mean_abs", "max_abs", "cosine"):
        value = getattr(m, name)
        assert math.isfinite(value), f"{where}: {name} = {value}"
    if m.max_abs == 0.0:
        assert m.sqnr_db == math.inf, f"{where}: exact, yet SQNR = {m.sqnr_db}"
    else:
        assert math.isfinite(m.sqnr_db), f"{where}: error {m.max_abs}, yet SQNR = {m.sqnr_db}"
    assert -1.0 <= m.cosine <= 1.0
    assert math.isfinite(exp.value_min) and math.isfinite(exp.value_max), where
    assert exp.clip.n_clipped >= 0 and exp.clip.n_saturated >= 0
    assert 1 <= exp.levels_used <= 1 << exp.config.bits
    assert torch.isfinite(exp.qt.scale).all(), f"{where}: scale {exp.qt.scale}"
    assert (exp.qt.scale > 0).all(), f"{where}: scale {exp.qt.scale}"
    finite = torch.isfinite(exp.original)
    assert torch.isfinite(exp.dequantized[finite]).all(), where
    assert torch.isfinite(exp.error[finite]).all(), where
    frame = exports.metrics_frame(exp)
    text = " ".join(frame["value"]).lower()
    assert "nan" not in text, f"{where}: {text}"


def blocks_to_show(exp: Exploration) -> list[int]:
    """Blocks the page may show: first, last, and every block holding a non-finite cell;
    only those with a finite value (``test_histogram_of_a_block_with_no_finite_value``)."""
    blocks = {0, exp.n_blocks - 1}
    if exp.finite is not None:
        for r, c in (~exp.finite).nonzero().tolist():
            blocks.add(block_of(exp, r, c))
    finite_per_block = exp.qt.layout.to_blocks(torch.isfinite(exp.original)).any(dim=1)
    return sorted(b for b in blocks if bool(finite_per_block[b]))


def run_everything(
    source: PreparedSource, cfg: QuantConfig, check_histogram: bool = True
) -> Exploration:
    """What the explorer page computes for one scheme, with each result checked."""
    where = f"{source.label} under {cfg.describe()}"
    exp = explore(source.matrix, cfg)
    assert tuple(exp.original.shape) == tuple(source.matrix.shape)
    assert_metrics_sound(exp, where)

    figs = overview_figures(exp, ViewOptions())
    background = MAGENTA if exp.finite is not None else "white"
    for fig in figs.all():
        assert fig.layout.plot_bgcolor == background, where
        assert np.asarray(fig.data[0].z).shape == tuple(source.matrix.shape), where
    rows, cols = source.matrix.shape
    zoom = zoom_figure(exp, 0, 0, 32)
    assert [t.type for t in zoom.data] == ["heatmap"] * 4

    for block in blocks_to_show(exp):
        hist = histogram_figure(exp, block, f"block {block}")
        n_finite = int(torch.isfinite(exp.qt.layout.to_blocks(exp.original)[block]).sum())
        if check_histogram:
            assert np.asarray(hist.data[0].y).sum() == n_finite, where
        nums = teaching.block_numbers(exp, block)
        assert math.isfinite(nums.scale) and math.isfinite(nums.data_min), where
        lines = teaching.formulas(exp, nums)
        assert lines and not any("nan" in line.lower() for line in lines), (where, lines)
        table = teaching.worked_table(exp, block)
        assert len(table) >= 1
        numeric = table.select_dtypes("number").to_numpy(dtype=np.float64)
        assert np.isfinite(numeric).all(), (where, table)

    assert "nan" not in exports.metrics_csv(exp).lower()
    tensors = st_load(exports.quantized_safetensors(exp))
    assert torch.equal(tensors["codes"], exp.qt.codes)
    assert torch.isfinite(tensors["scale"]).all()
    packed = exports.packed_codes(exp)
    assert len(packed) == math.ceil(rows * cols * cfg.bits / 8)
    codes = unpack(torch.frombuffer(bytearray(packed), dtype=torch.uint8), cfg.bits, rows * cols)
    low_bits = (1 << cfg.bits) - 1  # unpack sign-extends; codebook codes are unsigned
    assert torch.equal(
        codes.reshape(rows, cols).to(torch.int32) & low_bits,
        exp.qt.codes.to(torch.int32) & low_bits,
    ), where
    return exp


def run_all_configs(source: PreparedSource, check_histogram: bool = True) -> Iterator[Exploration]:
    for cfg in configs_for(source.matrix.shape[1]):
        yield run_everything(source, cfg, check_histogram)


def explore_all(source: PreparedSource) -> Iterator[Exploration]:
    """Only the computation and its metrics under every scheme (the figures, teaching panel
    and exports of each case run in ``test_case_runs_under_every_scheme``)."""
    for cfg in configs_for(source.matrix.shape[1]):
        exp = explore(source.matrix, cfg)
        assert_metrics_sound(exp, f"{source.label} under {cfg.describe()}")
        yield exp


# --- the cases -----------------------------------------------------------------------


def _nonfinite_grid() -> np.ndarray:
    a = np.linspace(-2.0, 3.0, 40, dtype=np.float32).reshape(5, 8)
    a[0, 3] = np.nan
    a[1, 0] = np.inf
    a[2, 5] = np.nan
    a[4, 7] = -np.inf
    return a


# (filename, bytes, tensor name or None): every case must run under every scheme.
def _cases() -> dict[str, tuple[str, bytes, str | None]]:
    g = torch.Generator().manual_seed(0)
    half = torch.randn(4, 6, generator=g).to(torch.float16)
    half[1, 2] = 70000.0  # beyond float16: +inf
    half[3, 0] = NAN
    return {
        "nan_inf_npy": ("bad.npy", npy_bytes(_nonfinite_grid()), None),
        "nan_inf_csv": ("bad.csv", b"1,nan,3\ninf,5,-inf\n-2,0.5,4\n", None),
        "nan_inf_float16": ("half.safetensors", safetensors_bytes({"w": half}), "w"),
        "constant_pos": ("c.npy", npy_bytes(np.full((4, 6), 0.3, np.float32)), None),
        "constant_neg_pt": ("c.pt", pt_bytes({"w": torch.full((3, 5), -7.25)}), "w"),
        "zeros": ("z.npy", npy_bytes(np.zeros((3, 3), np.float32)), None),
        "one_element_1d": ("one.npy", npy_bytes(np.array([2.5], np.float32)), None),
        "one_element_2d": ("one.csv", b"-3.0\n", None),
        "one_row": ("row.npy", npy_bytes(np.linspace(-1, 1, 16, dtype=np.float32)[None]), None),
        "vector_1d": ("vec.npy", npy_bytes(np.arange(10, dtype=np.float32) - 4.5), None),
        "row_csv": ("row.csv", b"0.5,-1.25,3,7.75\n", None),
        "one_column": (
            "col.npy",
            npy_bytes(np.linspace(-3, 5, 12, dtype=np.float32)[:, None]),
            None,
        ),
        "conv_4d": (
            "conv.pt",
            pt_bytes({"conv.weight": torch.randn(8, 3, 3, 3, generator=g)}),
            "conv.weight",
        ),
        "float16": (
            "h.safetensors",
            safetensors_bytes({"a": torch.randn(3, 4, generator=g).half()}),
            "a",
        ),
        "bfloat16": (
            "b.safetensors",
            safetensors_bytes({"b": torch.randn(2, 8, generator=g).bfloat16()}),
            "b",
        ),
        "int32": (
            "i.safetensors",
            safetensors_bytes({"i": torch.arange(-6, 6, dtype=torch.int32).reshape(3, 4)}),
            "i",
        ),
        "int8": (
            "i8.safetensors",
            safetensors_bytes({"j": torch.tensor([[-128, -1, 0, 1, 127, 5]], dtype=torch.int8)}),
            "j",
        ),
        "int64_pt": ("i.pt", pt_bytes({"n": torch.arange(12).reshape(3, 4) - 5}), "n"),
        "uint8_npy": (
            "u.npy",
            npy_bytes(np.arange(0, 240, 10, dtype=np.uint8).reshape(4, 6)),
            None,
        ),
        "float64_npy": ("d.npy", npy_bytes(np.linspace(-1e5, 1e5, 12).reshape(3, 4)), None),
        "huge_float32": (
            "huge.npy",
            npy_bytes(np.array([[3.0e38, -3.2e38, 1.0], [0.0, 2.5e38, -1e-3]], np.float32)),
            None,
        ),
        "tiny_float32": (
            "tiny.npy",
            npy_bytes(np.array([[1e-40, -3e-42, 0.0], [2e-39, 1e-45, -1e-38]], np.float32)),
            None,
        ),
    }


CASES = _cases()


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_case_runs_under_every_scheme(case: str) -> None:
    filename, data, name = CASES[case]
    item = load_one(filename, data, name)
    # huge_float32: see test_histogram_of_values_spanning_more_than_float32_max
    explorations = list(run_all_configs(item.source, check_histogram=case != "huge_float32"))
    assert len(explorations) == len(configs_for(item.source.matrix.shape[1]))


def test_histogram_of_values_spanning_more_than_float32_max() -> None:
    filename, data, _ = CASES["huge_float32"]
    exp = explore(load_one(filename, data).source.matrix, QuantConfig(8))
    hist = histogram_figure(exp, 0, "Tensor")
    assert np.asarray(hist.data[0].y).sum() == 6


# --- NaN and Inf ---------------------------------------------------------------------


def test_nonfinite_counts_and_first_positions() -> None:
    item = load_one("bad.npy", npy_bytes(_nonfinite_grid()))
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
    "npy": ("bad.npy", npy_bytes(_nonfinite_grid()), None),
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
    source = load_one("bad.npy", npy_bytes(_nonfinite_grid())).source
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
    source = load_one("bad.npy", npy_bytes(_nonfinite_grid())).source
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
        zoom = zoom_figure(exp, 0, 0, 32)
        assert fig_json(zoom)["layout"]["plot_bgcolor"] == MAGENTA
        panels = heatmaps(zoom)
        for i in (0, 2, 3):  # original, dequantized, error
            assert np.array_equal(np.isnan(decode(panels[i]["z"])), bad)
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
    source = load_one("bad.npy", npy_bytes(_nonfinite_grid())).source
    bad = source.nonfinite.mask.numpy()
    exp = explore(source.matrix, QuantConfig(4, Mode.SYMMETRIC, PerChannel(0)))
    codes = decode(heatmaps(overview_figures(exp, ViewOptions()).codes)[0]["z"])
    zoom_codes = decode(heatmaps(zoom_figure(exp, 0, 0, 32))[1]["z"])
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


def _first_row_nan() -> torch.Tensor:
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5
    x[0, :] = NAN
    return x


def test_histogram_of_a_block_with_no_finite_value() -> None:
    exp = explore(_first_row_nan(), QuantConfig(4, Mode.SYMMETRIC, PerChannel(0)))
    histogram_figure(exp, 0, "Channel 0")


def test_teaching_numbers_of_a_block_with_no_finite_value() -> None:
    exp = explore(_first_row_nan(), QuantConfig(4, Mode.SYMMETRIC, PerChannel(0)))
    nums = teaching.block_numbers(exp, 0)
    teaching.formulas(exp, nums)


# --- constant tensors ------------------------------------------------------------------


@pytest.mark.parametrize("c", [0.3, -7.25, 0.0, 1e30, -1e-30, 65504.0, 1.0 / 3.0], ids=repr)
def test_constant_tensor_dequantizes_to_itself(c: float) -> None:
    """``s = |c| / v_max`` (one rounding), ``r_hat = s * v_max`` (one more): within
    ``|c| ((1 + U)^2 - 1)`` of ``c``, under every range method and rounding mode."""
    source = load_one("c.npy", npy_bytes(np.full((4, 6), c, np.float32))).source
    c32 = float(np.float32(c))
    tol = abs(c32) * ((1 + U) ** 2 - 1)
    for exp in explore_all(source):
        cfg = exp.config
        err = (exp.dequantized.double() - c32).abs().max().item()
        assert err <= tol, (cfg.describe(), err, tol)
        if err == 0.0:
            assert exp.metrics.sqnr_db == math.inf
        assert exp.clip.n_clipped == 0


# --- shapes ------------------------------------------------------------------------------


def test_one_element_tensors() -> None:
    one_1d = load_one("one.npy", npy_bytes(np.array([2.5], np.float32))).source
    assert tuple(one_1d.matrix.shape) == (1, 1) and one_1d.original_shape == (1,)
    assert "1-D tensor [1] shown as [1, 1]" in one_1d.notes
    one_2d = load_one("one.csv", b"-3.0\n").source
    assert tuple(one_2d.matrix.shape) == (1, 1) and one_2d.matrix.item() == -3.0
    for source in (one_1d, one_2d):
        for exp in explore_all(source):
            assert exp.metrics.max_abs <= abs(source.matrix.item()) * ((1 + U) ** 2 - 1)
            assert exp.n_blocks == 1


def test_one_row_and_vectors() -> None:
    row = load_one("row.npy", npy_bytes(np.linspace(-1, 1, 16, dtype=np.float32)[None])).source
    assert tuple(row.matrix.shape) == (1, 16) and row.notes == ()
    vec = load_one("vec.npy", npy_bytes(np.arange(10, dtype=np.float32))).source
    assert tuple(vec.matrix.shape) == (1, 10) and vec.original_shape == (10,)
    assert "1-D tensor [10] shown as [1, 10]" in vec.notes
    for source, cols in ((row, 16), (vec, 10)):
        exp = explore(source.matrix, QuantConfig(4, granularity=PerChannel(0)))
        assert exp.n_blocks == 1  # one row: one channel
        exp = explore(source.matrix, QuantConfig(4, granularity=PerChannel(1)))
        # one value per column: s = |x| / 7 and r_hat = 7 s, two float32 roundings
        assert exp.n_blocks == cols
        bound = source.matrix.abs().max().item() * ((1 + U) ** 2 - 1)
        assert exp.metrics.max_abs <= bound


def test_conv_weight_shows_as_rows_of_output_channels() -> None:
    w = torch.randn(8, 3, 3, 3, generator=torch.Generator().manual_seed(1))
    item = load_one("conv.pt", pt_bytes({"features.0.weight": w, "features.0.bias": w[:, 0, 0, 0]}))
    src = item.source
    assert item.info.shape == (8, 3, 3, 3)
    assert tuple(src.matrix.shape) == (8, 27) and src.original_shape == (8, 3, 3, 3)
    assert "4-D tensor [8, 3, 3, 3] shown as [8, 27]" in src.notes
    assert torch.equal(src.matrix, w.reshape(8, 27))
    exp = explore(src.matrix, QuantConfig(4, granularity=PerChannel(0)))
    assert exp.n_blocks == 8  # one scale per output channel
    bias = load_one("conv.pt", pt_bytes({"features.0.weight": w, "b": w[:, 0, 0, 0]}), "b")
    assert tuple(bias.source.matrix.shape) == (1, 8)


# --- dtypes --------------------------------------------------------------------------


def test_float16_and_bfloat16_keep_their_values_and_say_so() -> None:
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(3, 4, generator=g).half(), torch.randn(5, 2, generator=g).bfloat16()
    data = safetensors_bytes({"a": a, "b": b})
    infos = list_tensors("two.safetensors", data)
    assert [(i.name, i.shape, i.dtype) for i in infos] == [
        ("a", (3, 4), "float16"),
        ("b", (5, 2), "bfloat16"),
    ]
    for item, t, dtype in zip(
        load_all("two.safetensors", data), (a, b), ("float16", "bfloat16"), strict=True
    ):
        src = item.source
        assert item.loaded.tensor.dtype == t.dtype
        assert src.dtype_label == dtype
        assert any(dtype in note for note in src.notes), src.notes
        assert src.matrix.dtype == torch.float32 and torch.equal(src.matrix, t.float())


@pytest.mark.parametrize(
    "filename, data, dtype, values",
    [
        (
            "i32.safetensors",
            safetensors_bytes({"i": torch.tensor([[-7, 0, 9], [100, -100, 3]], dtype=torch.int32)}),
            "int32",
            [[-7, 0, 9], [100, -100, 3]],
        ),
        (
            "i8.safetensors",
            safetensors_bytes({"j": torch.tensor([[-128, 127, 0, 1]], dtype=torch.int8)}),
            "int8",
            [[-128, 127, 0, 1]],
        ),
        ("i64.pt", pt_bytes({"n": torch.tensor([[1, 2], [3, -4]])}), "int64", [[1, 2], [3, -4]]),
        ("i16.npy", npy_bytes(np.array([[-300, 300]], np.int16)), "int16", [[-300, 300]]),
        ("u8.npy", npy_bytes(np.array([[0, 255], [7, 8]], np.uint8)), "uint8", [[0, 255], [7, 8]]),
    ],
    ids=["int32_safetensors", "int8_safetensors", "int64_pt", "int16_npy", "uint8_npy"],
)
def test_integer_files_convert_with_a_note(filename: str, data: bytes, dtype, values) -> None:
    (item,) = load_all(filename, data)
    assert item.info.dtype == dtype
    assert item.loaded.source_dtype == dtype
    assert f"{dtype} values converted to float32." in item.loaded.notes
    assert item.source.notes == item.loaded.notes  # passed through to the page
    assert item.source.matrix.dtype == torch.float32
    assert item.source.matrix.tolist() == values  # small integers are exact in float32
    assert len(list(explore_all(item.source))) > 0


def test_bool_and_large_integers_say_what_happened() -> None:
    (flags,) = load_all("b.npy", npy_bytes(np.array([[True, False, True]])))
    assert any("bool values converted to float32" in n for n in flags.source.notes)
    assert flags.source.matrix.tolist() == [[1.0, 0.0, 1.0]]
    big = torch.tensor([[2**24 + 1, -5, 0]], dtype=torch.int32)
    (item,) = load_all("big.safetensors", safetensors_bytes({"big": big}))
    assert any("2^24" in n for n in item.source.notes), item.source.notes
    assert item.source.matrix[0, 0].item() == 2**24  # rounded to float32's nearest
    assert len(list(explore_all(item.source))) > 0


def test_float64_beyond_float32_is_reported_as_inf() -> None:
    a = np.array([[1.0, 1e300, -2.0], [3.0, -1e300, 0.25]], np.float64)
    item = load_one("d.npy", npy_bytes(a))
    assert item.loaded.tensor.dtype == torch.float64
    assert any("float64" in n for n in item.source.notes)
    nf = item.source.nonfinite
    assert nf is not None and (nf.n_nan, nf.n_inf) == (0, 2)
    assert nf.first_positions == ((0, 1), (1, 1))
    for exp in explore_all(item.source):
        assert exp.value_max == 3.0 and exp.value_min == -2.0


def test_nan_and_inf_text_in_a_csv_are_found() -> None:
    item = load_one("t.csv", b"a,b,c\n1,NaN,3\n-Infinity,2,inf\n")
    assert "CSV numbers read as float32." in item.source.notes
    nf = item.source.nonfinite
    assert nf is not None and (nf.n_nan, nf.n_inf) == (1, 2)
    assert nf.first_positions == ((0, 1), (1, 0), (1, 2))


# --- asymmetric min-max: the course's zero-point clamp ------------------------------------
#
# The issue pins the course's convention: s = (r_max - r_min) / (qmax - qmin) and
# z = clamp(round(qmin - r_min / s), qmin, qmax). A block whose range contains 0 keeps every
# error within half a step; a block without 0 has z clamped, its grid pulled back to
# include 0, and its far end clipped. The page says so in the teaching panel.


def test_asymmetric_minmax_with_zero_in_range_never_clips() -> None:
    values = [-2.0, 0.5, 3.0, 1.0]
    item = load_one("v.npy", npy_bytes(np.array([values], np.float32)))
    for bits in (2, 4, 8):
        exp = explore(item.source.matrix, QuantConfig(bits, Mode.ASYMMETRIC))
        s = float(exp.qt.scale)
        tol = s * (0.5 + 4 * 2**bits * U) + U * max(abs(v) for v in values)
        assert exp.metrics.max_abs <= tol, (bits, exp.dequantized.tolist(), values)
        assert exp.clip.n_clipped == 0


@pytest.mark.parametrize(
    ("values", "zero_point", "sign"),
    [([2.0, 5.0, 3.0, 4.0], -128, "positive"), ([-2.0, -5.0, -3.0, -4.0], 127, "negative")],
    ids=["all_positive", "all_negative"],
)
def test_asymmetric_minmax_without_zero_clamps_and_says_so(
    values: list[float], zero_point: int, sign: str
) -> None:
    item = load_one("v.npy", npy_bytes(np.array([values], np.float32)))
    exp = explore(item.source.matrix, QuantConfig(8, Mode.ASYMMETRIC))
    assert int(exp.qt.zero_point) == zero_point
    assert exp.clip.n_clipped >= 1
    (note,) = teaching.block_notes(exp, teaching.block_numbers(exp, 0))
    assert f"clamped to {zero_point}" in note and sign in note


# --- the explorer page under AppTest -----------------------------------------------------


def new_app(**query: str) -> AppTest:
    st.cache_data.clear()
    at = AppTest.from_file(EXPLORER, default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def no_errors(at: AppTest, where: str = "") -> None:
    assert not at.exception, (where, [e.value for e in at.exception])
    assert not at.error, (where, [e.value for e in at.error])


def metric_texts(at: AppTest) -> list[str]:
    return [m.value for m in at.metric]


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


@pytest.mark.parametrize("example", list(Example), ids=lambda e: e.value)
def test_examples_under_every_format_and_granularity(example: Example) -> None:
    at = new_app(src="example", ex=example.value).run()
    no_errors(at, "first run")
    for fmt in Format:
        for gran, axis in (("tensor", None), ("channel", 0), ("channel", 1), ("group", None)):
            at.selectbox(key="q_fmt").set_value(fmt)
            at.radio(key="q_gran").set_value(gran)
            at.run()
            if axis is not None:
                at.radio(key="q_axis").set_value(axis).run()
            where = f"{example.value} {fmt.value} {gran} {axis}"
            no_errors(at, where)
            texts = metric_texts(at)
            assert len(texts) >= 12 and not any("nan" in t.lower() for t in texts), (where, texts)
            assert len(chart_specs(at)) >= 6, where  # 4 heatmaps, zoom, histogram


def upload_in_app(array: np.ndarray, name: str) -> AppTest:
    """The explorer with ``array`` as an upload (AppTest cannot drive the file widget: the
    upload is placed where the picker keeps it for the session)."""
    at = new_app().run()
    at.session_state["_uploaded_file"] = (f"id-{name}", name, npy_bytes(array))
    at.selectbox(key="src_kind").set_value(SourceKind.UPLOAD).run()
    return at


def test_page_offers_to_quantize_finite_values_only() -> None:
    at = upload_in_app(_nonfinite_grid(), "bad.npy")
    no_errors(at)
    (warning,) = at.warning
    assert "2 NaN and 2 Inf among 40 values, first at (0, 3), (1, 0), (2, 5), (4, 7)" in (
        warning.value
    )
    box = at.checkbox(key="v_finite_only")
    assert box.label == "Quantize the finite values only" and box.value is True
    texts = metric_texts(at)
    assert texts and not any("nan" in t.lower() for t in texts), texts
    specs = chart_specs(at)
    bad = ~np.isfinite(_nonfinite_grid())
    overview = specs[:4]
    assert all(s["layout"]["plot_bgcolor"] == MAGENTA for s in overview)
    assert np.array_equal(np.isnan(decode(overview[0]["data"][0]["z"])), bad)
    # unticked: nothing is quantized and no metric is shown
    box.uncheck().run()
    no_errors(at)
    assert not at.metric and not at.get("plotly_chart")


def test_page_with_a_row_of_nan_under_the_default_scheme() -> None:
    at = upload_in_app(_first_row_nan().numpy(), "row_nan.npy")
    no_errors(at)
