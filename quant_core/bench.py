"""Speed and memory of ``quantize`` + ``dequantize`` against PyTorch's fused fake-quantizer.

    python -m quant_core.bench [--size N] [--repeats K]

For an ``N x N`` float32 tensor (default 4096) and each granularity (per tensor, per
channel on axis 0, groups of 128) in both modes at 8 bits:

- time: ``quantize(x, cfg).dequantize()``, median of ``K`` runs (default 7) after one
  warm-up, divided by the median of ``torch.fake_quantize_per_channel_affine`` on the same
  tensor. The two are timed alternately (reference, ours, reference, ours, ...), so a
  change in machine load during the run affects both. Target: every ratio <= 1.5.
- memory: peak resident memory added by ``quantize`` + ``dequantize`` (outputs included),
  in multiples of the input's size, measured in a fresh process per case (see
  ``_MEMORY_METHOD``). Target: < 3x.

Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from quant_core import Mode, PerChannel, PerGroup, PerTensor, QuantConfig, quantize

__all__ = ["CASES", "main"]

TIME_RATIO_TARGET = 1.5
MEMORY_RATIO_TARGET = 3.0
REFERENCE = "reference"

CASES: dict[str, QuantConfig] = {
    cfg.describe(): cfg
    for gran in (PerTensor(), PerChannel(0), PerGroup(128))
    for cfg in (
        QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=gran),
        QuantConfig(bits=8, mode=Mode.ASYMMETRIC, granularity=gran),
    )
}

_MEMORY_METHOD = (
    "peak extra memory: each case runs in a fresh Python process, which builds x, runs the "
    "case once on a small tensor (so lazy initialisation is not counted), reads its resident "
    "set size (VmRSS), resets the kernel's high-water mark (writing 5 to "
    "/proc/self/clear_refs), runs the case on x and reads VmHWM; extra = (VmHWM - VmRSS "
    "before) / x.nbytes, outputs included. torch's CPU allocator is plain malloc, so freed "
    "temporaries leave the count, and tracemalloc would not see them at all."
)


@dataclass(frozen=True)
class TimeResult:
    name: str
    reference_s: float
    ours_s: float

    @property
    def ratio(self) -> float:
        return self.ours_s / self.reference_s


def _make_input(size: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(size, size, generator=gen)


def _reference_fn(x: torch.Tensor) -> Callable[[], torch.Tensor]:
    """``fake_quantize_per_channel_affine`` with our 8-bit symmetric per-channel qparams."""
    qt = quantize(x, QuantConfig(bits=8, mode=Mode.SYMMETRIC, granularity=PerChannel(0)))
    scale, zero_point = qt.scale.clone(), qt.zero_point.clone()

    def run() -> torch.Tensor:
        return torch.fake_quantize_per_channel_affine(x, scale, zero_point, 0, -128, 127)

    return run


def _case_fn(x: torch.Tensor, name: str) -> Callable[[], torch.Tensor]:
    if name == REFERENCE:
        return _reference_fn(x)
    cfg = CASES[name]
    return lambda: quantize(x, cfg).dequantize()


def _elapsed(fn: Callable[[], torch.Tensor]) -> float:
    start = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - start
    del out
    return elapsed


def time_case(x: torch.Tensor, name: str, repeats: int) -> TimeResult:
    """Median seconds of the reference and of the case, timed alternately."""
    reference, ours = _reference_fn(x), _case_fn(x, name)
    reference()
    ours()
    ref_times, our_times = [], []
    for _ in range(repeats):
        ref_times.append(_elapsed(reference))
        our_times.append(_elapsed(ours))
    return TimeResult(name, statistics.median(ref_times), statistics.median(our_times))


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _measure_memory_here(name: str, size: int) -> dict[str, float]:
    """Run one case in this process and report its peak extra memory (see module doc)."""
    x = _make_input(size)
    small = _make_input(256)
    _case_fn(small, name)()
    fn = _case_fn(x, name)  # the reference's qparams are computed here, before the baseline
    before = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    out = fn()
    peak = _status_kib("VmHWM")
    del out
    return {"extra_bytes": (peak - before) * 1024.0, "input_bytes": float(x.nbytes)}


def memory_case(name: str, size: int) -> float | None:
    """Peak extra memory of a case as a multiple of the input's bytes, from a fresh process;
    ``None`` where the kernel offers no resettable high-water mark (not Linux)."""
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    cmd = [sys.executable, "-m", "quant_core.bench", "--memory-case", name, "--size", str(size)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["extra_bytes"] / result["input_bytes"]


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quant_core.bench", description=__doc__)
    parser.add_argument("--size", type=int, default=4096, help="x is size x size (default 4096)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per case (>= 5)")
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.size < 128 or args.size % 128:
        parser.error(f"--size must be a positive multiple of 128 (groups of 128), got {args.size}")
    if args.repeats < 5:
        parser.error(f"--repeats must be >= 5, got {args.repeats}")
    if args.memory_case is not None:
        print(json.dumps(_measure_memory_here(args.memory_case, args.size)))
        return 0

    x = _make_input(args.size)
    mib = x.nbytes / 2**20
    print(
        f"quant_core benchmark: x float32 [{args.size}, {args.size}] ({mib:.1f} MiB), "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"median of {args.repeats} runs after 1 warm-up"
    )
    print("ours: quantize(x, cfg).dequantize()")
    print(
        "reference: torch.fake_quantize_per_channel_affine(x, s, z, axis=0, -128, 127), "
        "timed alternately with each case"
    )
    print()
    ref_memory = memory_case(REFERENCE, args.size)
    header = f"{'case':<26}{'ref ms':>9}{'ours ms':>9}{'ratio':>8}  {'time':<6}{'memory':>8}  mem"
    print(header)
    print("-" * len(header))
    times, memories = [], []
    for name in CASES:
        t = time_case(x, name, args.repeats)
        m = memory_case(name, args.size)
        times.append(t)
        memories.append(m)
        mem_text = "n/a" if m is None else f"{m:.2f}x"
        mem_verdict = "n/a" if m is None else _verdict(m < MEMORY_RATIO_TARGET)
        print(
            f"{name:<26}{t.reference_s * 1e3:>9.1f}{t.ours_s * 1e3:>9.1f}{t.ratio:>8.2f}  "
            f"{_verdict(t.ratio <= TIME_RATIO_TARGET):<6}{mem_text:>8}  {mem_verdict}"
        )
    print()
    if ref_memory is not None:
        print(f"(the reference itself: peak extra memory {ref_memory:.2f}x the input)")
    print(_MEMORY_METHOD)
    print()
    worst_time = max(times, key=lambda t: t.ratio)
    time_ok = worst_time.ratio <= TIME_RATIO_TARGET
    print(
        f"{_verdict(time_ok)}: time ratio <= {TIME_RATIO_TARGET} for every case "
        f"(worst {worst_time.ratio:.2f}, {worst_time.name})"
    )
    measured = [(m, t.name) for m, t in zip(memories, times, strict=True) if m is not None]
    if measured:
        worst_mem, worst_name = max(measured)
        memory_ok = worst_mem < MEMORY_RATIO_TARGET
        print(
            f"{_verdict(memory_ok)}: peak extra memory < {MEMORY_RATIO_TARGET:g}x the input for "
            f"every case (worst {worst_mem:.2f}x, {worst_name})"
        )
    else:
        memory_ok = True
        print("SKIP: peak extra memory (needs Linux's /proc/self/clear_refs)")
    return 0 if time_ok and memory_ok else 1


if __name__ == "__main__":
    sys.exit(main())
