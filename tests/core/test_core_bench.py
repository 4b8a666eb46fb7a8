"""The benchmark's pieces work on a small tensor (the full run is `python -m quant_core.bench`)."""

from __future__ import annotations

import os

import pytest
import torch

from quant_core import bench, bench_formats


def test_time_case_returns_positive_medians():
    x = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
    result = bench.time_case(x, "int8 asym g128", repeats=5)
    assert result.reference_s > 0 and result.ours_s > 0
    assert result.ratio == result.ours_s / result.reference_s


def test_cases_cover_every_granularity_in_both_modes():
    assert list(bench.CASES) == [
        "int8 sym per-tensor", "int8 asym per-tensor", "int8 sym per-channel(0)",
        "int8 asym per-channel(0)", "int8 sym g128", "int8 asym g128",
    ]  # fmt: skip


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_memory_case_measures_a_fresh_process():
    # dequantize's float32 output alone is 1x the input, the int8 codes another 0.25x
    extra = bench.memory_case("int8 sym per-channel(0)", 512)
    assert 1.0 <= extra < 3.0


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--repeats", "3"], "--repeats must be >= 5"),
        (["--size", "100"], "multiple of 128"),
        (["--formats", "Q4_0,Q9_K"], "unknown preset(s) Q9_K"),
        (["--format-repeats", "0"], "--format-repeats must be >= 1"),
    ],
    ids=["repeats", "size", "formats", "format-repeats"],
)
def test_bad_arguments_are_refused(argv, match, capsys):
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert match in capsys.readouterr().err


def test_format_timing_compares_with_the_gguf_package_where_it_can():
    x = torch.randn(256, 256, generator=torch.Generator().manual_seed(0))
    legacy = bench_formats.time_format(x, "Q4_0", repeats=1)
    assert legacy.gguf_s is not None and legacy.gguf_s > 0
    assert legacy.decode_s is not None and legacy.gguf_decode_s is not None
    # a K-quant: the package dequantizes its bytes but cannot quantize it
    kquant = bench_formats.time_format(x, "Q4_K", repeats=1)
    assert kquant.gguf_s is None and kquant.gguf_decode_s is not None
    # no GGUF bytes at all
    nvfp4 = bench_formats.time_format(x, "NVFP4", repeats=1)
    assert (nvfp4.gguf_s, nvfp4.decode_s, nvfp4.gguf_decode_s) == (None, None, None)
    # a GGUF type the package names but has no numpy code for: the lab's decode alone
    q1 = bench_formats.time_format(x, "Q1_0", repeats=1)
    assert q1.decode_s is not None and (q1.gguf_s, q1.gguf_decode_s) == (None, None)


@pytest.mark.parametrize(
    ("timing", "met"),
    [
        (bench_formats.FormatTiming("a", ours_s=3.0, clone_s=1.0), True),
        (bench_formats.FormatTiming("b", ours_s=3.1, clone_s=1.0), False),
        (
            bench_formats.FormatTiming(
                "c", 1.0, 1.0, gguf_s=20.0, decode_s=1.0, gguf_decode_s=20.0
            ),
            True,
        ),
        (
            bench_formats.FormatTiming(
                "d", 1.0, 1.0, gguf_s=20.0, decode_s=1.0, gguf_decode_s=19.0
            ),
            False,
        ),
        (bench_formats.FormatTiming("e", 1.0, 1.0, gguf_s=19.0), False),
    ],
)
def test_format_targets(timing, met):
    # quantize + dequantize within 3x a copy; at least 20x faster than the package's numpy
    assert timing.met is met
