"""Unusual values end to end, the way a user would bring them (``.npy``, ``.safetensors``,
``torch.save`` of a state dict, CSV text), taken through the real path the page uses:
``io.list_tensors`` -> ``io.load_tensor`` -> ``prepared.prepare`` -> ``explore`` and every
figure, under every scheme. Also constants, odd shapes and dtypes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from value_helpers import (
    CASES,
    configs_for,
    explore_all,
    load_all,
    load_one,
    npy_bytes,
    pt_bytes,
    run_all_configs,
    safetensors_bytes,
)

from dashboard.services.explorer import teaching
from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.histogram import histogram_view
from dashboard.services.io import list_tensors
from quant_core import (
    Mode,
    PerChannel,
    QuantConfig,
    ZeroPoint,
)

# float32 unit roundoff: one rounding multiplies a value by (1 + d) with |d| <= U.
U = 2.0**-24

# --- the cases -----------------------------------------------------------------------


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
    hist = histogram_view(exp, 0)
    assert hist.counts is not None and int(hist.counts.sum()) == 6


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
    # The course convention clamps z; the default (include zero) never does.
    cfg = QuantConfig(8, Mode.ASYMMETRIC, zero_point=ZeroPoint.COURSE_CLAMP)
    exp = explore(item.source.matrix, cfg)
    assert int(exp.qt.zero_point) == zero_point
    assert exp.clip.n_clipped >= 1
    (note,) = teaching.block_notes(exp, teaching.block_numbers(exp, 0))
    assert f"clamped to {zero_point}" in note and sign in note
