"""Speed of the shipped formats' quantizers and GGUF byte decoders, against references
measured in the same run.

Run: ``PYTHONPATH=. python benchmarks/formats_speed.py [--size N] [--repeats K]
[--threads T] [--types Q4_0,Q4_K,...] [--parts quantize,decode]`` (a few minutes at
4096 on a loaded 2-core machine).

For an ``N x N`` float32 random-normal matrix (default 4096; seed 0) and each format
(default Q4_0, Q8_0, Q4_K, Q6_K, IQ4_NL, MXFP4, NVFP4):

- quantize: ``quantize(x, QuantConfig.from_name(name))`` (llama.cpp's quantizer for the GGUF
  types, bit for bit), median of ``K`` runs (default 3) after one warm-up (which compiles
  or loads the kernels). Printed as seconds, M elements/s and ratios to

  * ``rtn``: the lab's plain int4 round-to-nearest, symmetric, groups of 32
    (``QuantConfig(bits=4, granularity=PerGroup(32))``): the same blocks, no search;
  * ``gguf``: ``gguf.quants.quantize`` (llama.cpp's own numpy port) for the types it can
    quantize (Q4_0, Q8_0, MXFP4); target for the legacy types: <= 2;
  * ``C``: llama.cpp's own C quantizers (``quantize_q4_K`` ...: what ``llama-quantize``
    runs without an importance matrix) for the K-quants and IQ4, built with ``gcc -O2`` from
    the source that ``.ci/run`` unpacks into ``.cache/`` (skipped without it).

- decode: ``QuantizedTensor.from_ggml_bytes`` of the bytes (the GGUF types), and that plus
  ``dequantize()``, against ``np.frombuffer(data, np.uint8).copy()`` of the same bytes (a
  read from the page cache costs about that), median of at least 15 runs (the copy takes
  about a millisecond: on a loaded machine a few runs' median swings 10x). Target for
  Q4_K: decode <= 5x the copy.

The cases are timed in turn (reference, ours, gguf, reference, ...), so that a change in
the machine's load affects them alike. ``--threads`` (default: one fewer than the machine's
cores, at least 1: what the served app gives torch, ``dashboard/served.py``): torch's
threads; on a machine busier than its cores, two OpenMP threads wait on each other at
every barrier, and the K-quant searches, a few dozen kernels each, slow down tenfold.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from quant_core import Mode, PerGroup, QuantConfig, QuantizedTensor, quantize
from quant_core.bench_formats import medians

DEFAULT_TYPES = ("Q4_0", "Q8_0", "Q4_K", "Q6_K", "IQ4_NL", "MXFP4", "NVFP4")
GGUF_QUANTIZES = ("Q4_0", "Q8_0", "MXFP4")
LEGACY_RATIO_TARGET = 2.0
DECODE_RATIO_TARGET = 5.0
RTN = QuantConfig(bits=4, mode=Mode.SYMMETRIC, granularity=PerGroup(32))


def _gguf_quantizer(name: str, x: np.ndarray) -> Callable[[], object] | None:
    if name not in GGUF_QUANTIZES:
        return None
    import gguf

    qtype = getattr(gguf.GGMLQuantizationType, name)
    return lambda: gguf.quants.quantize(x, qtype)


@functools.cache
def _c_reference() -> Any:
    """llama.cpp's C quantizers built from its source (``tests/tools/llama_cpp_reference``,
    ``gcc -O2``, as the tests build them), or ``None`` where the source or gcc is missing."""
    from tests.tools import llama_cpp_reference as ref

    if ref.available() is not None:
        return None
    return ref.CQuantizer.load(ref.build(ref.DEFAULT_SOURCE, Path(tempfile.mkdtemp())))


def bench_quantize(x: torch.Tensor, name: str, repeats: int) -> None:
    cfg = QuantConfig.from_name(name)
    fns: dict[str, Callable[[], object]] = {
        "rtn": lambda: quantize(x, RTN),
        "ours": lambda: quantize(x, cfg),
    }
    ref = _gguf_quantizer(name, x.numpy())
    if ref is not None:
        fns["gguf"] = ref
    from tests.tools.llama_cpp_reference import TYPES as C_TYPES

    c_lib = _c_reference() if name in C_TYPES else None
    if c_lib is not None:
        x_np = x.numpy()
        fns["c"] = lambda: c_lib.quantize(name, x_np)
    t = medians(fns, repeats)
    ours = t["ours"]
    line = (
        f"{name:7s} quantize {ours:7.3f} s {x.numel() / ours / 1e6:6.1f} M el/s | "
        f"{ours / t['rtn']:6.1f}x int4 g32 RTN ({t['rtn']:.3f} s)"
    )
    if "gguf" in t:
        ratio = ours / t["gguf"]
        line += f" | {ratio:5.2f}x gguf.quants ({t['gguf']:.3f} s)"
        if name != "MXFP4":
            line += f", target <= {LEGACY_RATIO_TARGET:g}: " + (
                "met" if ratio <= LEGACY_RATIO_TARGET else "NOT met"
            )
    if "c" in t:
        line += f" | {ours / t['c']:5.2f}x llama.cpp's C ({t['c']:.3f} s)"
    print(line, flush=True)


def bench_decode(x: torch.Tensor, name: str, repeats: int) -> None:
    qt = quantize(x, QuantConfig.from_name(name))
    if qt.config.gguf_type is None:
        print(f"{name:7s} decode   n/a (no GGUF bytes)", flush=True)
        return
    data = qt.to_ggml_bytes()
    shape = tuple(x.shape)
    t = medians(
        {
            "copy": lambda: np.frombuffer(data, np.uint8).copy(),
            "decode": lambda: QuantizedTensor.from_ggml_bytes(data, name, shape),
            "full": lambda: QuantizedTensor.from_ggml_bytes(data, name, shape).dequantize(),
        },
        max(repeats, 15),  # milliseconds each: more runs steady the copy's median
    )
    ratio = t["decode"] / t["copy"]
    line = (
        f"{name:7s} decode   {t['decode'] * 1e3:7.1f} ms = {ratio:5.1f}x the bytes' copy "
        f"({t['copy'] * 1e3:.1f} ms, {len(data) / 1e6:.1f} MB); + dequantize "
        f"{t['full'] * 1e3:.1f} ms = {t['full'] / t['copy']:.1f}x"
    )
    if name == "Q4_K":
        line += f"; target <= {DECODE_RATIO_TARGET:g}x: " + (
            "met" if ratio <= DECODE_RATIO_TARGET else "NOT met"
        )
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 1) - 1))
    parser.add_argument("--types", default=",".join(DEFAULT_TYPES))
    parser.add_argument("--parts", default="quantize,decode", help="quantize, decode or both")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.size, args.size, generator=gen)
    names = [n.strip() for n in args.types.split(",") if n.strip()]
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.size}x{args.size} "
        f"float32, median of {args.repeats}"
    )
    parts = {p.strip() for p in args.parts.split(",")}
    if "quantize" in parts:
        for name in names:
            bench_quantize(x, name, args.repeats)
    if "decode" in parts:
        for name in names:
            bench_decode(x, name, args.repeats)


if __name__ == "__main__":
    main()
