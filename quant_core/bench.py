"""Speed and memory of ``quantize`` + ``dequantize`` against PyTorch's fused fake-quantizer
and against a plain copy of the input.

    python -m quant_core.bench [--size N] [--repeats K] [--backend eager|compiled]
                               [--part linear|formats|all] [--formats Q4_K,MXFP4,...]
                               [--format-repeats K] [--huge-pages | --no-huge-pages]

For an ``N x N`` float32 tensor (default 4096) and each granularity (per tensor, per
channel on axis 0, groups of 128) in both modes at 8 bits:

- time: ``quantize(x, cfg).dequantize()``, median of ``K`` runs (default 7) after one
  warm-up, divided by the median of ``torch.fake_quantize_per_channel_affine`` on the same
  tensor (target: every ratio <= 0.5) and by the median of ``x.clone()`` (target: <= 2.5,
  the cost of a memory copy sets the floor). The three are timed in turn (reference,
  clone, ours, reference, ...), so a change in machine load during the run affects all.
- memory: peak resident memory added by ``quantize`` + ``dequantize`` (outputs included),
  in multiples of the input's size, measured in a fresh process per case (see
  ``_MEMORY_METHOD``). Target: < 3x.

The backend (``quant_core.kernels``) is the process's (``QLAB_COMPILE``) unless
``--backend`` picks one; the compiled kernels are warmed up (compiled, or loaded from
Inductor's on-disk cache) before anything is timed, and the warm-up's time is printed.

The shipped formats (``--part formats``; ``all``, the default, runs both parts): every
preset of ``QuantConfig.from_name``, quantize + dequantize against ``x.clone()`` (target
<= 3x) and, for the GGUF types, against the ``gguf`` package's numpy code (target >= 20x
faster); see ``quant_core.bench_formats``. Median of ``--format-repeats`` runs (default 3:
a K-quant search takes seconds here).

Pages: a copy into fresh memory pays a page fault per 4 kB page unless torch puts large
buffers on transparent huge pages (``THP_MEM_ALLOC_ENABLE=1``, which the served app sets:
``dashboard/served.py``). The faults roughly quadruple the clone (64 MiB: about 40 ms
against 10 ms here) and add less to the formats' heavier passes, so every ratio to the
clone is lower on 4 kB pages. ``--huge-pages`` (the default where the environment does not
say) / ``--no-huge-pages`` choose, and the header says which ran. On 4 kB pages the
clone's own time swings between about 7 and 40 ms from one format's row to the next
(freed pages reused or fresh ones faulted in), so those ratios say more about the
allocator than about the format.

Exit status 0 when every target is met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from quant_core import (
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    bench_formats,
    kernels,
    quantize,
    warm_up,
)
from quant_core.formats.registry import preset_names

__all__ = ["CASES", "main"]

TIME_RATIO_TARGET = 0.5
CLONE_RATIO_TARGET = 2.5
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
    "temporaries leave the count, and tracemalloc would not see them at all. Before the "
    "baseline, malloc_trim(0) hands the heap that compiling kernels freed back to the "
    "system, so the case cannot reuse it uncounted."
)


@dataclass(frozen=True)
class TimeResult:
    """Median seconds of one case (``ours_s``), of the fake-quant reference and of
    ``x.clone()``, all from one run."""

    name: str
    reference_s: float
    ours_s: float
    clone_s: float

    @property
    def ratio(self) -> float:
        """``ours / fake_quantize_per_channel_affine``."""
        return self.ours_s / self.reference_s

    @property
    def clone_ratio(self) -> float:
        """``ours / x.clone()``."""
        return self.ours_s / self.clone_s


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
    """Median seconds of the reference, of ``x.clone()`` and of the case, timed in turn."""
    reference, ours = _reference_fn(x), _case_fn(x, name)
    fns = (reference, x.clone, ours)
    for fn in fns:
        fn()
    times: tuple[list[float], ...] = ([], [], [])
    for _ in range(repeats):
        for fn, column in zip(fns, times, strict=True):
            column.append(_elapsed(fn))
    ref_s, clone_s, ours_s = (statistics.median(column) for column in times)
    return TimeResult(name, ref_s, ours_s, clone_s)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _trim_heap() -> None:
    """glibc's ``malloc_trim(0)``: return freed heap pages to the system (no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _measure_memory_here(name: str, size: int) -> dict[str, float]:
    """Run one case in this process and report its peak extra memory (see module doc)."""
    warm_up()
    x = _make_input(size)
    small = _make_input(256)
    _case_fn(small, name)()
    fn = _case_fn(x, name)  # the reference's qparams are computed here, before the baseline
    _trim_heap()
    before = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    out = fn()
    peak = _status_kib("VmHWM")
    del out
    return {"extra_bytes": (peak - before) * 1024.0, "input_bytes": float(x.nbytes)}


def memory_case(name: str, size: int) -> float | None:
    """Peak extra memory of a case as a multiple of the input's bytes, from a fresh process
    on this process's backend; ``None`` where the kernel offers no resettable high-water
    mark (not Linux)."""
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    cmd = [sys.executable, "-m", "quant_core.bench", "--memory-case", name, "--size", str(size)]
    cmd += ["--backend", kernels.active_backend().value]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["extra_bytes"] / result["input_bytes"]


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quant_core.bench", description=__doc__)
    parser.add_argument("--size", type=int, default=4096, help="x is size x size (default 4096)")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per case (>= 5)")
    parser.add_argument(
        "--backend",
        choices=[b.value for b in kernels.Backend],
        help="eager or compiled (default: the process's, from QLAB_COMPILE)",
    )
    parser.add_argument(
        "--part", choices=("linear", "formats", "all"), default="all", help="what to time"
    )
    parser.add_argument("--formats", help="comma-separated preset names (default: all)")
    parser.add_argument("--format-repeats", type=int, default=3, help="runs per format")
    parser.add_argument(
        "--huge-pages",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch's large buffers on transparent huge pages (THP_MEM_ALLOC_ENABLE=1, as the "
        "served app runs) or not; default: the environment's setting, on when unset",
    )
    parser.add_argument("--memory-case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.size < 128 or args.size % 128:
        parser.error(f"--size must be a positive multiple of 128 (groups of 128), got {args.size}")
    if args.repeats < 5:
        parser.error(f"--repeats must be >= 5, got {args.repeats}")
    if args.format_repeats < 1:
        parser.error(f"--format-repeats must be >= 1, got {args.format_repeats}")
    args.format_names = [n.strip() for n in (args.formats or "").split(",") if n.strip()]
    unknown = [n for n in args.format_names if n not in preset_names()]
    if unknown:
        parser.error(f"--formats: unknown preset(s) {', '.join(unknown)}")
    # torch's allocator reads it at each allocation (dashboard/served.py); the memory
    # cases' subprocesses inherit it; put back afterwards (main may run inside a process)
    before = os.environ.get("THP_MEM_ALLOC_ENABLE")
    if args.huge_pages is not None:
        os.environ["THP_MEM_ALLOC_ENABLE"] = "1" if args.huge_pages else "0"
    else:
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    if args.backend is not None:
        kernels.set_backend(args.backend)
    try:
        return _run(args)
    finally:
        if args.backend is not None:
            kernels.set_backend(None)
        if before is None:
            os.environ.pop("THP_MEM_ALLOC_ENABLE", None)
        else:
            os.environ["THP_MEM_ALLOC_ENABLE"] = before


def _run(args: argparse.Namespace) -> int:
    if args.memory_case is not None:
        print(json.dumps(_measure_memory_here(args.memory_case, args.size)))
        return 0

    warm = warm_up()
    x = _make_input(args.size)
    mib = x.nbytes / 2**20
    print(
        f"quant_core benchmark: x float32 [{args.size}, {args.size}] ({mib:.1f} MiB), "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"median of {args.repeats} runs after 1 warm-up"
    )
    # a plain copy into fresh 4 kB pages pays a fault per page (64 MiB: ~4x the copy on
    # huge pages), which flatters every ratio to it: say which the run used
    huge = os.environ.get("THP_MEM_ALLOC_ENABLE", "0") == "1"
    print(
        f"THP_MEM_ALLOC_ENABLE={'1' if huge else '0'}: "
        + ("large buffers on huge pages, as the served app" if huge else
           "4 kB pages (the served app runs on huge pages: --huge-pages)")
    )
    backend = f"backend {warm.backend.value}"
    if warm.failure is not None:
        backend += f" (compiled path off: {warm.failure})"
    elif warm.backend is kernels.Backend.COMPILED:
        backend += f", kernels warmed in {warm.seconds:.1f} s ({warm.graphs} graphs compiled)"
    print(backend)
    ok = True
    if args.part in ("linear", "all"):
        ok = _linear(args, x) and ok
    if args.part in ("formats", "all"):
        print()
        print(f"formats: median of {args.format_repeats} runs after 1 warm-up")
        ok = bench_formats.report(x, args.format_names, args.format_repeats) and ok
    return 0 if ok else 1


def _linear(args: argparse.Namespace, x: torch.Tensor) -> bool:
    print("ours: quantize(x, cfg).dequantize()")
    print(
        "ref: torch.fake_quantize_per_channel_affine(x, s, z, axis=0, -128, 127); "
        "clone: x.clone(); timed in turn with each case"
    )
    print()
    ref_memory = memory_case(REFERENCE, args.size)
    header = (
        f"{'case':<26}{'ref ms':>8}{'clone ms':>9}{'ours ms':>9}{'/ref':>7}{'/clone':>8}"
        f"  {'time':<6}{'memory':>8}  mem"
    )
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
        time_ok = t.ratio <= TIME_RATIO_TARGET and t.clone_ratio <= CLONE_RATIO_TARGET
        print(
            f"{name:<26}{t.reference_s * 1e3:>8.1f}{t.clone_s * 1e3:>9.1f}{t.ours_s * 1e3:>9.1f}"
            f"{t.ratio:>7.2f}{t.clone_ratio:>8.2f}  {_verdict(time_ok):<6}{mem_text:>8}  "
            f"{mem_verdict}"
        )
    print()
    if ref_memory is not None:
        print(f"(the reference itself: peak extra memory {ref_memory:.2f}x the input)")
    print(_MEMORY_METHOD)
    print()
    worst = max(times, key=lambda t: t.ratio)
    ref_ok = worst.ratio <= TIME_RATIO_TARGET
    print(
        f"{_verdict(ref_ok)}: time / fake-quant <= {TIME_RATIO_TARGET} for every case "
        f"(worst {worst.ratio:.2f}, {worst.name})"
    )
    worst_clone = max(times, key=lambda t: t.clone_ratio)
    clone_ok = worst_clone.clone_ratio <= CLONE_RATIO_TARGET
    print(
        f"{_verdict(clone_ok)}: time / clone <= {CLONE_RATIO_TARGET} for every case "
        f"(worst {worst_clone.clone_ratio:.2f}, {worst_clone.name})"
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
    return ref_ok and clone_ok and memory_ok


if __name__ == "__main__":
    sys.exit(main())
