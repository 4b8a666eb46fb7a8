"""Defect: under a small model folder the whole-model page's throughput line read "4 weights,
0.00 GB read in 0.0 s (0.10 GB/s); 1.37e+06 elements quantized and measured in 22.4 s (0.1M
elements/s, 0.000 GB/s)": sizes, times and rates that round to zero, and a count in e-notation.
Sizes and rates now take the unit that fits (as the folder's caption above, "2.81 MB")."""

from __future__ import annotations

from dashboard.services.model.throughput import Throughput


def test_a_small_folder_reads_in_units_that_show_the_numbers() -> None:
    line = Throughput(4, 2_810_000, 1_370_000, 0.028, 22.4).describe()
    assert line == (
        "4 weights, 2.81 MB read in 0.028 s (100 MB/s); 1.37M elements quantized and "
        "measured in 22.4 s (61.2k elements/s, 125 kB/s)"
    ), line
    for zero in ("0.00 GB", "0.0 s", "0.000 GB/s", "e+0"):
        assert zero not in line, line


def test_a_large_model_keeps_its_units() -> None:
    line = Throughput(96, 2_100_000_000, 1_050_000_000, 1.2, 150.0).describe()
    assert line == (
        "96 weights, 2.1 GB read in 1.2 s (1.75 GB/s); 1.05G elements quantized and "
        "measured in 150 s (7M elements/s, 14 MB/s)"
    ), line
