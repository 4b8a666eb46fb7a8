"""``warm_up``: compile the common kernels on small probes and check each against the
eager path bit for bit, in the foreground or in a daemon thread: the integer and codebook
passes first, then the GGUF byte decoders, then every shipped preset's own passes, then
the mixed-precision table's error sums.

It sits above what it warms (``quantize``, ``metrics``, ``analysis`` and the kernels they
call), so the kernels package imports nothing of theirs."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .analysis import clip_stats, histogram
from .config import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    Rounding,
    ZeroPoint,
)
from .formats.bytes_kernels import (
    block_codes,
    block_codes_types,
    legacy_blocks_types,
    min_blocks_types,
)
from .formats.gguf_bytes import from_ggml_bytes
from .formats.gguf_types import ggml_type
from .formats.registry import preset_names
from .kernels import switch
from .kernels.switch import Backend, _compiler_ok, active_backend, use_backend
from .metrics import error_metrics
from .quantize import quantize, quantize_dequantize
from .quantized_tensor import QuantizedTensor

if TYPE_CHECKING:  # quant_core.mixed imports quantize: imported late at run time
    from .mixed import Candidate

__all__ = ["WarmUp", "warm_up", "warm_up_in_background", "warm_up_table"]

_background: threading.Thread | None = None


@dataclass(frozen=True)
class WarmUp:
    """What ``warm_up`` did: the backend active afterwards, wall-clock ``seconds``, how many
    kernel ``graphs`` Dynamo compiled (0 when every kernel was ready) and, when the compiled
    path is off, why (``failure``; ``None`` otherwise)."""

    backend: Backend
    seconds: float
    graphs: int
    failure: str | None


# -- warm-up ---------------------------------------------------------------------------------


def _graphs_compiled() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _probe_cases() -> list[tuple[tuple[int, ...], QuantConfig]]:
    """The configs a dashboard session meets first, over every layout class."""
    grans = (PerTensor(), PerChannel(0), PerChannel(1), PerGroup(32))
    cases = []
    for bits in (4, 12):  # int8 codes, then int16
        for rounding in (Rounding.NEAREST, Rounding.STOCHASTIC):
            for gran in grans:
                mode = Mode.ASYMMETRIC if bits == 4 else Mode.SYMMETRIC
                cases.append(((128, 256), QuantConfig(bits, mode, gran, rounding=rounding)))
    # float-min dequantizes through its own kernel (an offset m), on every layout class;
    # the course's clamp runs the integer kernels, checked once
    for gran in grans:
        cfg = QuantConfig(3, Mode.ASYMMETRIC, gran, zero_point=ZeroPoint.FLOAT_MIN)
        cases.append(((128, 256), cfg))
    course = QuantConfig(3, Mode.ASYMMETRIC, PerGroup(32), zero_point=ZeroPoint.COURSE_CLAMP)
    cases.append(((128, 256), course))
    # an index codebook, a sign-magnitude one (its own encoder) and FP8's cast
    for fmt in (Format.NF4, Format.FP4_E2M1, Format.FP8_E4M3):
        for gran in (PerTensor(), PerGroup(64)):
            cases.append(((128, 256), QuantConfig(format=fmt, granularity=gran)))
    # BitNet's absmean range: the compiled float64 sum and its window (kernels.absmean)
    cases.append(
        ((128, 256), QuantConfig(format=Format.TERNARY, range_method=RangeMethod.ABSMEAN))
    )
    return cases


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Equal bit for bit (dtype, shape and every value's bits; NaNs alike)."""
    if a is None or b is None:
        return a is b
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.is_floating_point():
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.contiguous().view(width), b.contiguous().view(width))
    return torch.equal(a, b)


def _first_difference(
    fast: QuantizedTensor,
    fast_hat: torch.Tensor,
    ref: QuantizedTensor,
    ref_hat: torch.Tensor,
    label: str,
) -> str | None:
    """The first of the codes, scales, zero points, offsets, dequantized values and stored
    scale levels (where either has them) in which the compiled path's ``fast`` differs from
    the eager path's ``ref``, described with ``label`` (the config), or None."""
    pairs = {
        "codes": (fast.codes, ref.codes),
        "scales": (fast.scale, ref.scale),
        "zero points": (fast.zero_point, ref.zero_point),
        "offsets": (fast.offset, ref.offset),
        "dequantized": (fast_hat, ref_hat),
    }
    if fast.stored is not None or ref.stored is not None:
        for field in ("codes", "min_codes", "super_scale", "super_min"):
            pairs[f"stored {field}"] = (
                getattr(fast.stored, field, None),
                getattr(ref.stored, field, None),
            )
    for what, (a, b) in pairs.items():
        if not _same(a, b):
            return f"{what} of {label} differ from the eager path's"
    return None


def _check_probe(shape: tuple[int, ...], cfg: QuantConfig) -> str | None:
    """Quantize a probe on both paths; a description of the first difference, or None."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 3 + 0.5
    x[0, :8] = torch.tensor([0.5, -0.5, 1.5, 2.5, -0.0, 0.0, 1e-30, -1e-30])  # ties, zeros
    with use_backend(Backend.COMPILED, min_elements=1):
        fast = quantize(x, cfg)
        fast_hat = fast.dequantize()
        fast_trip = quantize_dequantize(x, cfg)  # the integer encoders that give values
        error_metrics(x, fast_hat)
        # x * 2 on x's ranges (static ranges), so that some inputs clip
        fast_clip = clip_stats(x * 2, quantize(x * 2, cfg, ranges=fast.chosen_range))
    with use_backend(Backend.EAGER):
        ref = quantize(x, cfg)
        ref_hat = ref.dequantize()
        ref_clip = clip_stats(x * 2, quantize(x * 2, cfg, ranges=ref.chosen_range))
    if fast_clip != ref_clip:
        return f"clipping counts of {cfg.describe()} differ from the eager path's"
    with use_backend(Backend.COMPILED, min_elements=1):
        fast_hist = histogram(x.reshape(-1), 50, -2.0, 3.0)
    with use_backend(Backend.EAGER):
        ref_hist = histogram(x.reshape(-1), 50, -2.0, 3.0)
    if not torch.equal(fast_hist, ref_hist):
        return "histogram counts differ from the eager path's"
    return _first_difference(fast, fast_hat, ref, ref_hat, cfg.describe()) or _first_difference(
        fast_trip.quantized, fast_trip.values, ref, ref_hat, f"{cfg.describe()} (round trip)"
    )


def _check_bytes_probe() -> str | None:
    """Decode random Q2_K, Q3_K, Q4_K, Q5_K, Q6_K blocks and blocks of each
    ``legacy_blocks_types`` (Q4_0, Q8_0, ...) and ``min_blocks_types`` (Q4_1, ...)
    (``formats.bytes_kernels``: the whole-block kernels ``q2_k_blocks`` ... ``q6_k_blocks``,
    ``legacy_blocks`` and ``min_blocks``, NaN and infinite ``d`` included), random
    blocks of each other ``block_codes`` type and random MXFP4 and
    NVFP4 blocks (``mxfp4_blocks``, both readings of code 8, and ``fp4_plus_zero``) on
    both paths; a description of the first difference, or None."""
    gen = torch.Generator().manual_seed(0)
    k_names = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
    for k_name in (*k_names, *legacy_blocks_types, *min_blocks_types):
        record = ggml_type(k_name)
        blocks = 8 * 512 // record.block_size  # 16 super-blocks, 128 blocks of 32
        data = torch.randint(0, 256, (blocks * record.type_size,), dtype=torch.uint8, generator=gen)
        data = data.numpy().tobytes()
        with use_backend(Backend.COMPILED, min_elements=1):
            fast = from_ggml_bytes(data, k_name, (8, 512))
        with use_backend(Backend.EAGER):
            ref = from_ggml_bytes(data, k_name, (8, 512))
        for name in ("codes", "scale", "zero_point", "offset"):
            if not _same(getattr(fast, name), getattr(ref, name)):
                return f"{k_name} bytes decode to {name} that differ from the eager path's"
        for name in ("codes", "min_codes", "super_scale", "super_min"):
            if fast.stored is None and ref.stored is None:
                break
            if not _same(getattr(fast.stored, name), getattr(ref.stored, name)):
                return f"{k_name} bytes decode to stored {name} that differ from the eager path's"
    for type_name in block_codes_types:
        if type_name in (*legacy_blocks_types, *min_blocks_types, *k_names):
            continue  # decoded by legacy_blocks, min_blocks, q2_k_blocks ... above
        # random bytes: every code pattern of each word kernel (Q5_0 ... TQ1_0)
        size = ggml_type(type_name).type_size
        raw = torch.randint(0, 256, (16, size), dtype=torch.uint8, generator=gen)
        with use_backend(Backend.COMPILED, min_elements=1):
            fast_codes = block_codes(type_name, raw)
        if not _same(fast_codes, block_codes(type_name, raw, eager=True)):
            return f"{type_name} bytes decode to codes that differ from the eager path's"
    for type_name in ("MXFP4", "NVFP4"):
        # random bytes: FP4 code 8 (llama.cpp's +0) in every byte position of a word
        record = ggml_type(type_name)
        raw = torch.randint(0, 256, (16 * record.type_size,), dtype=torch.uint8, generator=gen)
        shape = (4, 4 * record.block_size)
        # MXFP4 read both ways (code 8 as llama.cpp's +0, and kept: the lab's own export)
        data = raw.numpy().tobytes()
        for signed_zero in (False, True) if type_name == "MXFP4" else (False,):
            with use_backend(Backend.COMPILED, min_elements=1):
                fast = from_ggml_bytes(data, type_name, shape, signed_zero=signed_zero)
            with use_backend(Backend.EAGER):
                ref = from_ggml_bytes(data, type_name, shape, signed_zero=signed_zero)
            for name in ("codes", "scale"):
                if not _same(getattr(fast, name), getattr(ref, name)):
                    return f"{type_name} bytes decode to {name} that differ from the eager path's"
    return None


def _check_format_probe(name: str) -> str | None:
    """Quantize and dequantize a probe under the shipped preset ``name`` (``"Q4_K"``) on
    both paths, with the GGUF bytes where it is a GGUF type, and ``quantize_dequantize``
    compiled against the eager pair (its fused passes); a description of the first
    difference, or None. ``[256, 768]``: three K-quant super-blocks (256) per row and
    2 x 6 of FP8_BLOCK's 128 x 128 tiles, so that no count of blocks is 1 (Dynamo
    specialises sizes of 1, and a later real shape would compile again)."""
    cfg = QuantConfig.from_name(name)
    x = torch.randn(256, 768, generator=torch.Generator().manual_seed(1)) * 3 + 0.5
    x[0, :8] = torch.tensor([0.5, -0.5, 1.5, 2.5, -0.0, 0.0, 1e-30, -1e-30])  # ties, zeros
    x[1, :32] = 0.0  # an all-zero block
    with use_backend(Backend.COMPILED, min_elements=1):
        fast = quantize(x, cfg)
        fast_hat = fast.dequantize()
        fast_bytes = fast.to_ggml_bytes() if cfg.gguf_type is not None else b""
        fast_trip = quantize_dequantize(x, cfg)  # its fused passes, where it has them
    with use_backend(Backend.EAGER):
        ref = quantize(x, cfg)
        ref_hat = ref.dequantize()
        ref_bytes = ref.to_ggml_bytes() if cfg.gguf_type is not None else b""
    problem = _first_difference(fast, fast_hat, ref, ref_hat, name) or _first_difference(
        fast_trip.quantized, fast_trip.values, ref, ref_hat, f"{name} (quantize_dequantize)"
    )
    if problem is not None:
        return problem
    if fast_bytes != ref_bytes:
        return f"the GGUF bytes of {name} differ from the eager path's"
    return None


def _mixed_table_probe(
    candidates: Sequence[Candidate] | None = None,
    held_out: bool = True,
    unweighted: bool = True,
) -> str | None:
    """The mixed-precision page's table on small probes: ``mixed.measure_tensor`` over
    every candidate (``mixed.ALL_CANDIDATES``), with input importance and without, with
    held-out inputs and without, so that its own passes (the error sums, plain and
    weighted, fused with the code per block or over the dequantized copy) are compiled
    before the page's first table. ``[8, 384]``: rows that llama.cpp's 256-blocks do not
    divide (the GGUF fallback types), ``[4, 768]``: three K-quant super-blocks per row;
    one block per row (``int8_pc``) and several both occur, and no count is 1 but that
    one (Dynamo specialises sizes of 1 and 0 to 1 apart). Its sums round differently from
    the eager reference's by design (``mixed.sums``), so nothing is compared here: the
    kernels it runs are checked against the eager path by the probes before it. Always
    ``None`` (a compile that fails turns the compiled path off by itself). ``candidates``
    (``None``: all), ``held_out`` (``False``: without held-out inputs only) and
    ``unweighted`` (``False``: with input importance only) narrow it to one table's
    passes (``warm_up_table``)."""
    from .mixed import ALL_CANDIDATES, measure_tensor  # above quantize: imported late

    candidates = ALL_CANDIDATES if candidates is None else tuple(candidates)
    gen = torch.Generator().manual_seed(2)
    with use_backend(Backend.COMPILED, min_elements=1):
        for rows, cols in ((8, 384), (4, 768)):
            w = torch.randn(rows, cols, generator=gen)
            a = torch.rand(cols, generator=gen, dtype=torch.float64) + 0.5
            inputs = (None, torch.randn(40, cols, generator=gen)) if held_out else (None,)
            for importance in (a, None) if unweighted else (a,):
                for x in inputs:
                    measure_tensor("probe", w, candidates, importance=importance, held_out=x)
    return None


def warm_up() -> WarmUp:
    """Compile the common kernels now (on small probes) and check each against the eager
    path bit for bit; returns what happened. Cold, this takes tens of seconds (mostly the
    C++ compiler); with Inductor's on-disk cache, a few. While it runs, other threads use
    the eager path. Under ``Backend.EAGER`` it returns at once."""
    start = time.perf_counter()
    if active_backend() is not Backend.COMPILED or not _compiler_ok():
        return WarmUp(active_backend(), time.perf_counter() - start, 0, switch._failure)
    graphs = _graphs_compiled()
    me = threading.current_thread()
    with switch._lock:
        switch._warming = me
    try:
        checks = [functools.partial(_check_probe, shape, cfg) for shape, cfg in _probe_cases()]
        checks.append(_check_bytes_probe)
        # last: the shipped formats' own passes (llama.cpp's quantizers, MX, NVFP4, ...),
        # so that the first pick of a preset on a page does not wait for the C++ compiler
        checks += [functools.partial(_check_format_probe, name) for name in preset_names()]
        # then the mixed-precision table's sums, which run those presets' quantizers
        checks.append(_mixed_table_probe)
        for check in checks:
            problem = check()
            if problem is None and switch._failure is None:
                continue
            if problem is not None:
                switch._fail(problem)
            break
    finally:
        with switch._lock:
            if switch._warming is me:
                switch._warming = None
    return WarmUp(
        active_backend(),
        time.perf_counter() - start,
        _graphs_compiled() - graphs,
        switch._failure,
    )


def warm_up_table(
    candidates: Sequence[Candidate] | None = None, unweighted: bool = True
) -> WarmUp:
    """Compile only the mixed-precision table's kernels for ``candidates`` (a sequence of
    ``mixed.Candidate``; ``None``: all), with input importance and, if ``unweighted``,
    without (5 of the default candidates' 30 graphs), no held-out inputs
    (``_mixed_table_probe``), unchecked: what a table worker process runs before
    its first task (``dashboard.services.mixed.runner``), where ``warm_up`` in the
    server's process has checked the kernels against the eager path already. Under
    ``Backend.EAGER`` it returns at once."""
    start = time.perf_counter()
    if active_backend() is not Backend.COMPILED or not _compiler_ok():
        return WarmUp(active_backend(), time.perf_counter() - start, 0, switch._failure)
    graphs = _graphs_compiled()
    _mixed_table_probe(candidates, held_out=False, unweighted=unweighted)
    return WarmUp(
        active_backend(),
        time.perf_counter() - start,
        _graphs_compiled() - graphs,
        switch._failure,
    )


def warm_up_in_background() -> threading.Thread | None:
    """Start ``warm_up`` in a daemon thread, once per process (later calls return the same
    thread); ``None`` under ``Backend.EAGER``. Safe to call on every app rerun."""
    global _background
    if active_backend() is not Backend.COMPILED:
        return None
    with switch._lock:
        if _background is None:

            def run() -> None:
                try:
                    report = warm_up()
                    switch._log.info(
                        "quant_core: warm-up took %.1f s (%d kernel graphs), backend %s",
                        report.seconds,
                        report.graphs,
                        report.backend.value,
                    )
                finally:
                    with switch._lock:
                        if switch._warming is threading.current_thread():
                            switch._warming = None

            _background = threading.Thread(target=run, name="quant_core-warm-up", daemon=True)
            # Mark the warm-up as running before the thread starts, so a call that comes
            # first runs eagerly instead of compiling the same kernel alongside it.
            switch._warming = _background
            _background.start()
        return _background
