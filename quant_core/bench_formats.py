"""The shipped formats' part of ``python -m quant_core.bench``: every preset of
``QuantConfig.from_name`` on the benchmark's ``N x N`` float32 tensor.

For each preset (default: all of ``formats.registry.preset_names()``), timed in turn with
its references so that a change in the machine's load affects them alike, median of ``K``
runs after one warm-up:

- ``ours``: ``quantize_dequantize(x, cfg)`` (the ``QuantizedTensor`` and its values, as
  the app's pages ask for them; bit for bit ``quantize(x, cfg).dequantize()``); against
  ``clone``: ``x.clone()``. Target: ``ours / clone <= CLONE_RATIO_TARGET`` (3). Codes and
  values come from one pass for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXINT8 and
  (compiled) MXFP4, MXFP6, NVFP4, NF4_DQ, BITNET, MXFP4_GGUF, NVFP4_GGUF, Q1_0, IQ4_NL,
  IQ4_XS (IQ4's after its scale search); the others quantize, then dequantize.
  Not every preset meets the target (the row prints ``NOT met``): for the MX and NVFP4
  presets that one pass itself (the encoder's compares or bit arithmetic per value, then
  the value's) and the per-block scale fitting (compiled for E8M0 and NVFP4's E4M3
  scales: ~50 and ~70 ms eagerly on a loaded machine) cost about three copies; IQ4's
  scale search dominates its time. NVFP4_GGUF and Q1_0 (December 7, ``fmt7``: no eager
  per-block steps after their passes, NVFP4_GGUF's FP4 search by counting midpoints;
  ``formats.llama_cpp``'s docstring): base -> head, alternating processes, load 2 to 4,
  NVFP4_GGUF 5.4 -> 3.9x the clone, Q1_0 4.2 -> 3.0x (medians of 6 pairs).
- For the GGUF types that llama.cpp's ``gguf`` package quantizes (Q4_0, Q4_1, Q5_0, Q5_1,
  Q8_0, TQ1_0, TQ2_0, and MXFP4 as ``MXFP4_GGUF``, whose bytes are the package's):
  ``gguf.quants.quantize`` then ``gguf.quants.dequantize`` of the same tensor, its numpy
  code. Target: ``gguf / ours >= GGUF_SPEEDUP_TARGET`` (20).
- For every GGUF type (the package dequantizes them all): decoding the stored bytes,
  ``QuantizedTensor.from_ggml_bytes(data, type, shape).dequantize()``, against
  ``gguf.quants.dequantize`` of the same bytes; the same speed-up target.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .config import QuantConfig
from .formats.registry import preset_names
from .quantize import quantize, quantize_dequantize
from .quantized_tensor import QuantizedTensor

__all__ = [
    "CLONE_RATIO_TARGET",
    "GGUF_QUANTIZED",
    "GGUF_SPEEDUP_TARGET",
    "FormatTiming",
    "medians",
    "report",
    "time_format",
]

CLONE_RATIO_TARGET = 3.0
GGUF_SPEEDUP_TARGET = 20.0
GGUF_QUANTIZED = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4_GGUF")
"""The presets whose bytes ``gguf.quants.quantize`` makes (the tests check them equal)."""


@dataclass(frozen=True)
class FormatTiming:
    """Median seconds of one preset's runs and of its references, from one run.

    ``ours_s``: quantize + dequantize; ``clone_s``: ``x.clone()``; ``gguf_s``: the
    ``gguf`` package's quantize + dequantize (``None`` where it cannot quantize the type);
    ``decode_s``/``gguf_decode_s``: the lab's and the package's bytes-to-float32 decode
    (``None`` for presets without GGUF bytes)."""

    name: str
    ours_s: float
    clone_s: float
    gguf_s: float | None = None
    decode_s: float | None = None
    gguf_decode_s: float | None = None

    @property
    def clone_ratio(self) -> float:
        return self.ours_s / self.clone_s

    @property
    def gguf_speedup(self) -> float | None:
        """``gguf / ours`` for quantize + dequantize."""
        return None if self.gguf_s is None else self.gguf_s / self.ours_s

    @property
    def decode_speedup(self) -> float | None:
        """``gguf / ours`` for the bytes' decode."""
        if self.decode_s is None or self.gguf_decode_s is None:
            return None
        return self.gguf_decode_s / self.decode_s

    @property
    def met(self) -> bool:
        speedups = (s for s in (self.gguf_speedup, self.decode_speedup) if s is not None)
        return self.clone_ratio <= CLONE_RATIO_TARGET and all(
            s >= GGUF_SPEEDUP_TARGET for s in speedups
        )


def medians(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each of ``fns``, timed in turn ``repeats`` times after a warm-up."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            began = time.perf_counter()
            out = fn()
            times[k].append(time.perf_counter() - began)
            del out
    return {k: statistics.median(v) for k, v in times.items()}


def _gguf_decodes(rows: np.ndarray, qtype: object) -> bool:
    """Whether the ``gguf`` package dequantizes ``qtype`` (it names some types it has no
    numpy code for, such as Q1_0): tried on the first row of ``rows``."""
    import gguf

    try:
        gguf.quants.dequantize(rows[:1], qtype)
    except NotImplementedError:
        return False
    return True


def time_format(x: torch.Tensor, name: str, repeats: int) -> FormatTiming:
    """One preset's ``FormatTiming`` on the float32 matrix ``x``."""
    import gguf

    cfg = QuantConfig.from_name(name)
    fns: dict[str, Callable[[], object]] = {
        "clone": x.clone,
        "ours": lambda: quantize_dequantize(x, cfg),
    }
    type_name = cfg.gguf_type
    if type_name is not None:
        qtype = gguf.GGMLQuantizationType[type_name]
        data = quantize(x, cfg).to_ggml_bytes()
        rows = np.frombuffer(data, dtype=np.uint8).reshape(x.shape[0], -1)
        shape = tuple(x.shape)
        fns["decode"] = lambda: QuantizedTensor.from_ggml_bytes(data, type_name, shape).dequantize()
        if _gguf_decodes(rows, qtype):
            fns["gguf_decode"] = lambda: gguf.quants.dequantize(rows, qtype)
        if name in GGUF_QUANTIZED:
            x_np = x.numpy()
            fns["gguf"] = lambda: gguf.quants.dequantize(gguf.quants.quantize(x_np, qtype), qtype)
    t = medians(fns, repeats)
    return FormatTiming(
        name, t["ours"], t["clone"], t.get("gguf"), t.get("decode"), t.get("gguf_decode")
    )


def _ms(s: float | None) -> str:
    return "" if s is None else f"{s * 1e3:.1f}"


def _times(r: float | None) -> str:
    return "" if r is None else f"{r:.2f}"


def report(x: torch.Tensor, names: Sequence[str] | None, repeats: int) -> bool:
    """Time every preset of ``names`` (default: all) on ``x``, print one table row each
    and the verdicts; ``True`` when every target is met."""
    names = tuple(names) if names else preset_names()
    print(
        "formats: ours = quantize_dequantize(x, QuantConfig.from_name(name)) (codes and "
        "values, as quantize(...).dequantize()); clone = "
        "x.clone(); gguf = gguf.quants.quantize then dequantize (numpy); decode = "
        "from_ggml_bytes(bytes).dequantize() against gguf.quants.dequantize(bytes)"
    )
    header = (
        f"{'format':<12}{'clone ms':>9}{'ours ms':>9}{'/clone':>8}{'gguf ms':>9}"
        f"{'gguf/ours':>10}{'decode ms':>10}{'gguf ms':>9}{'gguf/ours':>10}  target"
    )
    print(header)
    print("-" * len(header))
    results = []
    for name in names:
        t = time_format(x, name, repeats)
        results.append(t)
        print(
            f"{name:<12}{_ms(t.clone_s):>9}{_ms(t.ours_s):>9}{t.clone_ratio:>8.2f}"
            f"{_ms(t.gguf_s):>9}{_times(t.gguf_speedup):>10}{_ms(t.decode_s):>10}"
            f"{_ms(t.gguf_decode_s):>9}{_times(t.decode_speedup):>10}  "
            f"{'met' if t.met else 'NOT met'}",
            flush=True,
        )
    met_clone = [t.name for t in results if t.clone_ratio <= CLONE_RATIO_TARGET]
    print(
        f"quantize + dequantize <= {CLONE_RATIO_TARGET:g}x x.clone(): {len(met_clone)} of "
        f"{len(results)} formats ({', '.join(met_clone) or 'none'})"
    )
    speedups = [
        (t.name, s) for t in results for s in (t.gguf_speedup, t.decode_speedup) if s is not None
    ]
    if speedups:
        worst = min(speedups, key=lambda p: p[1])
        print(
            f">= {GGUF_SPEEDUP_TARGET:g}x faster than the gguf package's numpy code: "
            f"{sum(s >= GGUF_SPEEDUP_TARGET for _, s in speedups)} of {len(speedups)} "
            f"comparisons (slowest: {worst[0]}, {worst[1]:.2f}x)"
        )
    return all(t.met for t in results)
