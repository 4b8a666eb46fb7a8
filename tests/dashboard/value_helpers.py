"""What the value-case tests share: files as a user would have them, the schemes every case
runs under, plotly JSON decoding, and the checks every case must pass."""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from dashboard.services.explorer import exports, teaching
from dashboard.services.explorer.explore import Exploration, block_of, explore
from dashboard.services.explorer.heatmaps import ViewOptions, overview_figures
from dashboard.services.explorer.histogram import histogram_view
from dashboard.services.explorer.zoom import zoom_view
from dashboard.services.io import LoadedTensor, TensorInfo, list_tensors, load_tensor
from dashboard.services.sources.choice import UploadSource
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
    unpack,
)

NAN, INF = float("nan"), float("inf")
MAGENTA = "#ff00ff"


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
    zoom = zoom_view(exp, 0, 0, 32)
    assert zoom.cells.shape[:2] == (min(rows, 32), min(cols, 32)), where

    for block in blocks_to_show(exp):
        hist = histogram_view(exp, block)
        n_finite = int(torch.isfinite(exp.qt.layout.to_blocks(exp.original)[block]).sum())
        if check_histogram:
            counts = 0 if hist.counts is None else int(hist.counts.sum())
            assert counts == n_finite, where
        nums = teaching.block_numbers(exp, block)
        assert math.isfinite(nums.scale) and math.isfinite(nums.data_min), where
        lines = teaching.formulas(exp, nums)
        assert lines and not any("nan" in line.lower() for line in lines), (where, lines)
        table = teaching.worked_table(exp, block)
        assert len(table) >= 1
        numeric = table.select_dtypes("number").to_numpy(dtype=np.float64)
        assert np.isfinite(numeric).all(), (where, table)

    assert "nan" not in exports.metrics_csv(exp).lower()
    data = exports.quantized_safetensors(exp)
    assert torch.isfinite(st_load(data)["scale"]).all()
    back = exports.read_quantized_safetensors(data)
    assert torch.equal(back.codes, exp.qt.codes), where
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


def nonfinite_grid() -> np.ndarray:
    a = np.linspace(-2.0, 3.0, 40, dtype=np.float32).reshape(5, 8)
    a[0, 3] = np.nan
    a[1, 0] = np.inf
    a[2, 5] = np.nan
    a[4, 7] = -np.inf
    return a


# (filename, bytes, tensor name or None): every case must run under every scheme.
def cases() -> dict[str, tuple[str, bytes, str | None]]:
    g = torch.Generator().manual_seed(0)
    half = torch.randn(4, 6, generator=g).to(torch.float16)
    half[1, 2] = 70000.0  # beyond float16: +inf
    half[3, 0] = NAN
    return {
        "nan_inf_npy": ("bad.npy", npy_bytes(nonfinite_grid()), None),
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


CASES = cases()


def first_row_nan() -> torch.Tensor:
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5
    x[0, :] = NAN
    return x
