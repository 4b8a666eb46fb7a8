"""The benchmark's pieces work on a small tensor (the full run is `python -m quant_core.bench`)."""

from __future__ import annotations

import os

import pytest
import torch

from quant_core import bench


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
    [(["--repeats", "3"], "--repeats must be >= 5"), (["--size", "100"], "multiple of 128")],
    ids=["repeats", "size"],
)
def test_bad_arguments_are_refused(argv, match, capsys):
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert match in capsys.readouterr().err
