"""Compiled kernels for quantize's large passes, and the switch between them and eager.

``quantize`` and ``dequantize`` spend their time in three passes over the data: each block's
extremes (a min/max reduction), the codes (``q = clamp(round((r - m)/s + z), qmin, qmax)``)
and the dequantized values (``r_hat = clamp((q - z) s + m, -F, F)``, ``F`` float32's max);
``error_metrics`` adds one over ``x`` and ``x_hat``. On CPU, with ``Backend.COMPILED``, each
pass is one ``torch.compile`` (Inductor) kernel: one C++/OpenMP loop that reads its inputs
once and writes its outputs once, instead of a chain of torch operators over cache-sized
pieces (``quant_core.chunks``, the eager path, which stays the reference and the fallback).

Bit for bit. The compiled path returns the eager path's codes, scales, zero points, offsets
and dequantized values exactly:

- Only elementwise passes and min/max are compiled. Per-block arithmetic (scales, zero
  points, offsets on ``[n_blocks, 1]`` tensors) runs eagerly, in both paths, and so do sums
  whose order decides a result (the MSE search's errors): Inductor may sum in another order.
- Every elementwise formula does eager's IEEE operations in eager's order: Inductor keeps
  the graph's order, does not contract ``a * b + c`` into an FMA (torch builds its C++ with
  ``-ffp-contract=off`` and without unsafe math) and divides by a tensor as division on CPU.
  ``round`` is half to even in both (``nearbyint`` / ``_mm256_round_ps``). The kernels use
  one formula for every zero-point convention, with ``z = 0`` or ``m = 0`` where a scheme
  has none; adding such a zero can only turn a ``-0`` into ``+0`` before rounding, which no
  integer code or dequantized value can show.
- Min and max are exact in any order, but the sign of a zero extreme depends on the order:
  both paths give ``+0`` for a zero extreme (``canonical_zeros``).
- Stochastic rounding draws its noise eagerly with the caller's generator, one draw of the
  blocks' shape as the eager path does, and passes it in: the same seed gives the same codes.
- ``warm_up`` checks all of this on probes against the eager path; a difference turns the
  compiled path off with one warning.

Compile cost. Kernels compile with ``dynamic=True`` (sizes are symbols) and take the code
range as data (``qmin``/``qmax`` 0-d tensors), so a new shape or bit width reuses the
compiled kernel. Each kernel compiles once per code dtype (int8 for bits <= 8, int16 above)
and per layout class: contiguous or transposed blocks (``PerChannel(1)`` of a matrix), and
Dynamo's specialisations of sizes 1 (``n_blocks == 1``, per tensor; ``block_len == 1``).
``warm_up_in_background`` compiles the common ones in a daemon thread; meanwhile other
threads run eagerly (same results) instead of waiting. Inductor keeps compiled kernels in its
on-disk cache (``$TORCHINDUCTOR_CACHE_DIR``, by default ``/tmp/torchinductor_$USER``), so a
later process skips the C++ compiler.

Which backend runs: ``QLAB_COMPILE=0`` (or ``false``/``off``/``no``) forces the eager path
for the process, whatever the code asks; otherwise (unset, ``1``/``true``/``on``/``yes``)
``use_backend`` (this thread) over ``set_backend`` (the process) over the default, compiled.
Compiled kernels run only on CPU tensors of at
least ``MIN_ELEMENTS`` elements (a kernel call costs tens of microseconds before any work;
``use_backend(Backend.COMPILED, min_elements=1)`` lowers it); anything else runs eagerly.
A machine where compiling fails (no C++ compiler, an unsupported platform) logs one warning
and runs eagerly from then on; no error reaches the caller.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import os
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from .config import Format
from .formats import Codebook, codebook_for

__all__ = [
    "ENV_VAR",
    "MIN_ELEMENTS",
    "Backend",
    "WarmUp",
    "active_backend",
    "backend_from_env",
    "canonical_zeros",
    "compile_failure",
    "set_backend",
    "use_backend",
    "warm_up",
    "warm_up_in_background",
]

_log = logging.getLogger(__name__)

ENV_VAR = "QLAB_COMPILE"
MIN_ELEMENTS = 1 << 15
_F32_MAX = torch.finfo(torch.float32).max
_OFF = ("0", "false", "off", "no")
_ON = ("", "1", "true", "on", "yes")


class Backend(enum.Enum):
    """Which implementation runs quantize's large passes (see the module docstring).

    EAGER: torch operators over cache-sized pieces (``quant_core.chunks``); every device.
    The reference, and the fallback wherever compiling is not possible.
    COMPILED: one ``torch.compile`` (Inductor) kernel per pass, on CPU tensors; results
    equal EAGER's bit for bit. Example: ``quantize(x, cfg).dequantize()`` on a 4096 x 4096
    float32 matrix reads ``x`` twice (extremes, codes) and writes the int8 codes and the
    float32 result once each.
    """

    EAGER = "eager"
    COMPILED = "compiled"


@dataclass(frozen=True)
class WarmUp:
    """What ``warm_up`` did: the backend active afterwards, wall-clock ``seconds``, how many
    kernel ``graphs`` Dynamo compiled (0 when every kernel was ready) and, when the compiled
    path is off, why (``failure``; ``None`` otherwise)."""

    backend: Backend
    seconds: float
    graphs: int
    failure: str | None


@dataclass(frozen=True)
class _Choice:
    backend: Backend
    min_elements: int = MIN_ELEMENTS


_lock = threading.RLock()
_process_choice: _Choice | None = None
_local = threading.local()
_failure: str | None = None
_compiler_checked = False
_warming: threading.Thread | None = None
_background: threading.Thread | None = None
_compiled: dict[str, Callable[..., Any]] = {}


def _coerce(backend: object) -> Backend:
    if isinstance(backend, Backend):
        return backend
    if isinstance(backend, str):
        try:
            return Backend(backend.lower())
        except ValueError:
            allowed = ", ".join(b.value for b in Backend)
            raise ValueError(f"unknown backend {backend!r}; expected one of: {allowed}") from None
    raise TypeError(f"backend must be a Backend or str, got {type(backend).__name__}")


def _check_min_elements(min_elements: object) -> int:
    if isinstance(min_elements, bool) or not isinstance(min_elements, int):
        raise TypeError(f"min_elements must be an int, got {min_elements!r}")
    if min_elements < 1:
        raise ValueError(f"min_elements must be >= 1, got {min_elements}")
    return min_elements


def backend_from_env() -> Backend:
    """The backend ``QLAB_COMPILE`` asks for (``ValueError`` for a value it does not know)."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in _OFF:
        return Backend.EAGER
    if value in _ON:
        return Backend.COMPILED
    raise ValueError(
        f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not understood; use 0 (eager) or 1 (compiled)"
    )


def _requested() -> _Choice:
    choice = getattr(_local, "choice", None) or _process_choice or _Choice(Backend.COMPILED)
    if backend_from_env() is Backend.EAGER:  # QLAB_COMPILE=0 forces the eager path
        return _Choice(Backend.EAGER, choice.min_elements)
    return choice


def set_backend(backend: Backend | str | None, *, min_elements: int = MIN_ELEMENTS) -> None:
    """Choose the backend for the whole process; ``None`` goes back to the default.

    ``min_elements``: the smallest tensor the compiled kernels take (default
    ``MIN_ELEMENTS``). Choosing ``Backend.COMPILED`` under ``QLAB_COMPILE=0``, or where
    compiling failed, keeps the eager path (``active_backend`` says which runs,
    ``compile_failure`` why a compile failed)."""
    global _process_choice
    choice = (
        None if backend is None else _Choice(_coerce(backend), _check_min_elements(min_elements))
    )
    with _lock:
        _process_choice = choice


@contextlib.contextmanager
def use_backend(backend: Backend | str, *, min_elements: int = MIN_ELEMENTS) -> Iterator[Backend]:
    """Run the ``with`` block, in this thread only, on ``backend``; yields the backend that
    actually runs (``Backend.EAGER`` when compiling failed). See ``set_backend``."""
    choice = _Choice(_coerce(backend), _check_min_elements(min_elements))
    previous = getattr(_local, "choice", None)
    _local.choice = choice
    try:
        yield active_backend()
    finally:
        _local.choice = previous


def active_backend() -> Backend:
    """The backend quantize uses in this thread now: the requested one, except
    ``Backend.EAGER`` once compiling has failed in this process."""
    choice = _requested()
    if choice.backend is Backend.COMPILED and _failure is None:
        return Backend.COMPILED
    return Backend.EAGER


def compile_failure() -> str | None:
    """Why the compiled path is off in this process (one line), or ``None``."""
    return _failure


def _fail(reason: str) -> None:
    """Turn the compiled path off for the process, with one warning."""
    global _failure
    with _lock:
        if _failure is not None:
            return
        _failure = reason
    _log.warning("quant_core: compiled kernels unavailable (%s); running eager kernels", reason)


def _describe(exc: BaseException) -> str:
    # Dynamo wraps a backend's error; name the innermost cause, on one line.
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _compiler_ok() -> bool:
    """Look for Inductor's C++ compiler once per process (``$CXX``, else ``g++``)."""
    global _compiler_checked
    if _compiler_checked:
        return _failure is None
    with _lock:
        if not _compiler_checked:
            try:
                from torch._inductor.cpp_builder import get_cpp_compiler

                get_cpp_compiler()
            except Exception as exc:
                _fail(_describe(exc))
            _compiler_checked = True
    return _failure is None


def _usable(*tensors: torch.Tensor) -> bool:
    """Whether this call may run compiled: backend, device, size, and no warm-up elsewhere."""
    choice = _requested()
    if choice.backend is not Backend.COMPILED or _failure is not None:
        return False
    first = tensors[0]
    if first.numel() < choice.min_elements:
        return False
    if any(t.device.type != "cpu" for t in tensors):
        return False
    warming = _warming
    if warming is not None and warming is not threading.current_thread():
        return False  # the kernels are being compiled: run eagerly rather than wait
    return _compiler_ok()


def _variant(fn: Callable[..., Any], key: str) -> Callable[..., Any]:
    """``torch.compile(fn)`` for one variant ``key``, on its own copy of ``fn``'s code:
    Dynamo keeps one cache (and one recompile limit) per code object, so variants that
    differ by dtype or inference-ness never crowd each other out."""
    name = f"{fn.__name__}_{key}"
    compiled = _compiled.get(name)
    if compiled is None:
        with _lock:
            compiled = _compiled.get(name)
            if compiled is None:
                code = fn.__code__.replace(co_name=name, co_qualname=name)
                copy = types.FunctionType(
                    code, fn.__globals__, name, fn.__defaults__, fn.__closure__
                )
                compiled = torch.compile(copy, dynamic=True, fullgraph=True)
                _compiled[name] = compiled
    return compiled


_FAILED = object()


def _run(fn: Callable[..., Any], key: str, *args: torch.Tensor) -> Any:
    """``fn(*args)`` compiled, or ``_FAILED`` when the compiled path failed (then it is off).

    Kernels run outside autograd and outside inference mode, so their outputs are plain
    tensors. Which inputs are inference tensors (made under ``torch.inference_mode``) picks
    the compiled variant, as Dynamo guards on it."""
    marks = "".join("i" if a.is_inference() else "n" for a in args)
    # detach(): not a view (Dynamo would guard on a view's base, one variant more).
    plain = [a.detach() for a in args]
    try:
        compiled = _variant(fn, f"{key}_{marks}")
        with torch.inference_mode(False), torch.no_grad():
            return compiled(*plain)
    except Exception as exc:
        _fail(_describe(exc))
        return _FAILED


# -- the kernels (plain torch code; Inductor compiles each into one loop) -----------------


def _extremes_kernel(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        canonical_zeros(blocks.amin(dim=1, keepdim=True)),
        canonical_zeros(blocks.amax(dim=1, keepdim=True)),
    )


def _encode_kernel(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: torch.Tensor,
    qmax: torch.Tensor,
    dtype: torch.dtype,
) -> torch.Tensor:
    v = (blocks - m) / s + z.to(torch.float32)  # int32 zero points convert exactly
    return v.round().clamp(qmin, qmax).to(dtype)


def _encode_int8(blocks, s, z, m, qmin, qmax):
    return _encode_kernel(blocks, s, z, m, qmin, qmax, torch.int8)


def _encode_int16(blocks, s, z, m, qmin, qmax):
    return _encode_kernel(blocks, s, z, m, qmin, qmax, torch.int16)


def _encode_stochastic_kernel(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: torch.Tensor,
    qmax: torch.Tensor,
    noise: torch.Tensor,
    dtype: torch.dtype,
) -> torch.Tensor:
    v = (blocks - m) / s + z.to(torch.float32)
    return (v + noise).floor().clamp(qmin, qmax).to(dtype)


def _encode_stochastic_int8(blocks, s, z, m, qmin, qmax, noise):
    return _encode_stochastic_kernel(blocks, s, z, m, qmin, qmax, noise, torch.int8)


def _encode_stochastic_int16(blocks, s, z, m, qmin, qmax, noise):
    return _encode_stochastic_kernel(blocks, s, z, m, qmin, qmax, noise, torch.int16)


def _int_squared_error_kernel(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: torch.Tensor,
    qmax: torch.Tensor,
) -> torch.Tensor:
    zf = z.to(torch.float32)
    q = ((blocks - m) / s + zf).round().clamp(qmin, qmax)
    x_hat = ((q - zf) * s + m).clamp(-_F32_MAX, _F32_MAX)
    d = blocks - x_hat
    return d * d


# Dequantization, in place on the codes already converted to float32, one kernel per
# convention (no zero tensors to make): the eager path's operations in its order.


def _decode_scale(q: torch.Tensor, s: torch.Tensor) -> None:
    q.copy_((q * s).clamp(-_F32_MAX, _F32_MAX))


def _decode_zero_point(q: torch.Tensor, s: torch.Tensor, z: torch.Tensor) -> None:
    q.copy_(((q - z.to(torch.float32)) * s).clamp(-_F32_MAX, _F32_MAX))


def _decode_offset(q: torch.Tensor, s: torch.Tensor, m: torch.Tensor) -> None:
    q.copy_((q * s + m).clamp(-_F32_MAX, _F32_MAX))


def _decode_table(q: torch.Tensor, table: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Codebook dequantization ``clamp(s * table[q])``."""
    return (table[q.to(torch.int64)] * s).clamp(-_F32_MAX, _F32_MAX)


@functools.cache
def _codebook_encoder(fmt: Format) -> Callable[..., torch.Tensor]:
    """The nearest-rounding encoder of one codebook format, its constants baked in.

    FP8: ``clamp(r / s)`` cast to the native float8 dtype (IEEE round to nearest even,
    subnormals and ``-0`` included), the bits being the code: the codebook's nearest value
    with ties to the even code, which is what the eager path computes. NF4 and FP4 (16
    values): the index ``sum_k [v > mid_k]`` (``bucketize`` over the 15 midpoints, a tie
    going to the lower value), FP4 moving a tie at ``mid_k`` up when the lower code is odd;
    the code by table (NF4 codes are indices), ``-0``'s code for a negative ``v`` rounding
    to zero. NF4 takes ``1/s`` and multiplies, as bitsandbytes and the eager path do."""
    cb = codebook_for(fmt)
    lo, hi = float(cb.values[0]), float(cb.values[-1])
    if fmt in _FLOAT8:
        dtype = _FLOAT8[fmt]

        def encode_fp8(blocks: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            return (blocks / s).clamp(lo, hi).to(dtype).view(torch.uint8)

        return encode_fp8
    mids = ((cb.values[1:] + cb.values[:-1]) / 2).tolist()
    nf4 = fmt is Format.NF4
    if nf4 and not torch.equal(cb.codes, torch.arange(len(cb.codes), dtype=torch.uint8)):
        raise ValueError(f"{fmt.value} codes are not the value indices")
    bumps = [] if nf4 else [mids[k] for k in range(len(mids)) if int(cb.codes[k]) % 2 == 1]
    neg_zero, zero_index = cb.neg_zero_code, cb.zero_index

    def encode_small(blocks: torch.Tensor, s: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        v = blocks * s if nf4 else blocks / s
        c = v.clamp(lo, hi)
        idx = (c > mids[0]).to(torch.int32)
        for mid in mids[1:]:
            idx = idx + (c > mid).to(torch.int32)
        for mid in bumps:
            idx = idx + (c == mid).to(torch.int32)
        if nf4:
            return idx.to(torch.uint8)
        code = codes[idx]
        if neg_zero is not None:
            code = torch.where((idx == zero_index) & torch.signbit(v), neg_zero, code)
        return code

    return encode_small


def _error_sums_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    d = a64 - b64
    ad = d.abs()
    return torch.stack(
        [
            (d * d).sum(),
            ad.sum(),
            ad.amax(),
            (a64 * a64).sum(),
            (b64 * b64).sum(),
            (a64 * b64).sum(),
        ]
    )


def _beyond_kernel(blocks: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    return torch.stack([(blocks < lo).sum(), (blocks > hi).sum()])


def _bin_kernel(x: torch.Tensor, lo: torch.Tensor, per_unit: torch.Tensor, top: torch.Tensor):
    return torch.minimum(((x - lo) * per_unit).floor().clamp_min(0.0), top).to(torch.uint8)


_FLOAT8 = {Format.FP8_E4M3: torch.float8_e4m3fn, Format.FP8_E5M2: torch.float8_e5m2}
_ENCODE = {torch.int8: _encode_int8, torch.int16: _encode_int16}
_ENCODE_STOCHASTIC = {torch.int8: _encode_stochastic_int8, torch.int16: _encode_stochastic_int16}


# -- entry points: each returns None where the eager path must run ---------------------------


def canonical_zeros(t: torch.Tensor) -> torch.Tensor:
    """``t`` with ``-0`` replaced by ``+0`` (every other value, NaN included, kept). Applied
    to the extremes of both paths, whose zero signs depend on the order of comparison.
    (A ``select``, not ``t + 0``, which a compiler may drop as a no-op.)"""
    return torch.where(t == 0, 0.0, t)


def extremes(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per row of ``blocks`` (2-D float32), ``(min, max)`` as ``[n_rows, 1]`` (NaN
    propagates; a zero extreme is ``+0``), or ``None``: run eagerly."""
    if blocks.dtype != torch.float32 or not _usable(blocks):
        return None
    out = _run(_extremes_kernel, "extremes", _kernel_layout(blocks))
    return None if out is _FAILED else out


def _kernel_layout(blocks: torch.Tensor) -> torch.Tensor:
    """``blocks`` as a kernel takes it: contiguous, or the transpose of a contiguous
    matrix (``PerChannel(1)``), else a contiguous copy, so few layouts reach Dynamo."""
    if blocks.is_contiguous() or blocks.t().is_contiguous():
        return blocks
    return blocks.contiguous()


def _column(t: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One value per row as an ``[n, 1]`` tensor of ``dtype`` (a view when it is one)."""
    return t.reshape(-1, 1).to(dtype)


def encode_int(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    qmin: int,
    qmax: int,
    dtype: torch.dtype,
    noise: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Integer codes ``clamp(round((r - m)/s + z), qmin, qmax)`` of ``blocks`` (float32
    ``[n, L]``; ``s``, ``z``, ``m`` one value per row), as ``dtype`` (int8 or int16); with
    ``noise`` (``U[0, 1)``, ``blocks``' shape) ``clamp(floor((r - m)/s + z + u))`` instead.
    ``None``: run eagerly."""
    tensors = (blocks,) if noise is None else (blocks, noise)
    if blocks.dtype != torch.float32 or dtype not in _ENCODE or not _usable(*tensors):
        return None
    bounds = torch.tensor([qmin, qmax], dtype=torch.float32)
    args = (
        _kernel_layout(blocks),
        _column(s),
        _column(z, torch.int32),
        _column(m),
        bounds[0],
        bounds[1],
    )
    if noise is None:
        out = _run(_ENCODE[dtype], "encode", *args)
    else:
        out = _run(_ENCODE_STOCHASTIC[dtype], "encode_stochastic", *args, noise)
    return None if out is _FAILED else out


def int_squared_error(
    blocks: torch.Tensor, s: torch.Tensor, z: torch.Tensor, m: torch.Tensor, qmin: int, qmax: int
) -> torch.Tensor | None:
    """``(r - r_hat)^2`` (float32, ``blocks``' shape) with ``r_hat = clamp((q - z) s + m)``
    and ``q`` the nearest-rounded integer code; one pass instead of the eager path's chain,
    the same operations in the same order, so the same bits. ``None``: run eagerly."""
    if blocks.dtype != torch.float32 or not _usable(blocks):
        return None
    bounds = torch.tensor([qmin, qmax], dtype=torch.float32)
    args = (_kernel_layout(blocks), _column(s), _column(z, torch.int32), _column(m))
    out = _run(_int_squared_error_kernel, "squared_error", *args, bounds[0], bounds[1])
    return None if out is _FAILED else out


def decode_int(
    codes: torch.Tensor, s: torch.Tensor, z: torch.Tensor | None, m: torch.Tensor | None
) -> torch.Tensor | None:
    """Dequantized float32 values of integer ``codes`` ``[n, L]``: ``clamp(s q + m)`` with
    offsets ``m``, else ``clamp((q - z) s)`` with zero points ``z``, else ``clamp(s q)``
    (one ``s``, ``z``, ``m`` per row; ``clamp`` to float32's finite range); ``None``: run
    eagerly.

    Two passes: torch's own ``codes.to(float32)`` (exact), then the compiled affine map in
    place. Inductor loads 8-bit integers a lane group at a time through a stack copy (on
    AVX2), which made one fused kernel slower than the two: the conversion streams at
    memory speed, and the second pass reads what the first wrote."""
    if codes.dtype not in _ENCODE or not _usable(codes):
        return None
    with torch.inference_mode(False):
        out = _kernel_layout(codes).to(torch.float32)
    if m is not None:
        done = _run(_decode_offset, "decode", out, _column(s), _column(m))
    elif z is not None:
        done = _run(_decode_zero_point, "decode", out, _column(s), _column(z, torch.int32))
    else:
        done = _run(_decode_scale, "decode", out, _column(s))
    return None if done is _FAILED else out


def encode_codebook(blocks: torch.Tensor, s: torch.Tensor, cb: Codebook) -> torch.Tensor | None:
    """uint8 codes of ``blocks`` (float32 ``[n, L]``) under codebook ``cb`` with nearest
    rounding, ``s`` one scale per row; ``None``: run eagerly."""
    if blocks.dtype != torch.float32 or not _usable(blocks):
        return None
    kernel = _codebook_encoder(cb.format)
    if cb.format in _FLOAT8:
        args: tuple[torch.Tensor, ...] = (_kernel_layout(blocks), _column(s))
    elif cb.format is Format.NF4:
        args = (_kernel_layout(blocks), _column(s).reciprocal(), cb.codes)
    else:
        args = (_kernel_layout(blocks), _column(s), cb.codes)
    out = _run(kernel, f"codebook_{cb.format.value}", *args)
    return None if out is _FAILED else out


def decode_codebook(
    codes: torch.Tensor, s: torch.Tensor, table: torch.Tensor
) -> torch.Tensor | None:
    """``clamp(s * table[q])`` (float32) of uint8 codebook ``codes`` ``[n, L]``, one ``s``
    per row, ``table`` the codebook's ``decode_table``; ``None``: run eagerly."""
    if codes.dtype != torch.uint8 or not _usable(codes):
        return None
    out = _run(_decode_table, "decode_table", _kernel_layout(codes), table, _column(s))
    return None if out is _FAILED else out


def error_sums(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
    """``[sum d^2, sum |d|, max |d|, sum a^2, sum b^2, sum a b]`` (float64, ``d = a - b``)
    of two 1-D float32 tensors in one pass, or ``None``: run eagerly. Sums follow Inductor's
    order, so they may differ from the eager path's in the last bits."""
    if a.dtype != torch.float32 or b.dtype != torch.float32 or not _usable(a, b):
        return None
    out = _run(_error_sums_kernel, "error_sums", a.contiguous(), b.contiguous())
    return None if out is _FAILED else out


def count_beyond(
    blocks: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor
) -> tuple[int, int] | None:
    """How many entries of ``blocks`` (float32 ``[n, L]``) lie below their row's ``lo`` and
    above its ``hi`` (one value per row), in one pass; counts are exact in any order.
    ``None``: run eagerly."""
    if blocks.dtype != torch.float32 or not _usable(blocks):
        return None
    out = _run(_beyond_kernel, "beyond", _kernel_layout(blocks), _column(lo), _column(hi))
    if out is _FAILED:
        return None
    return int(out[0]), int(out[1])


def bin_indices(
    x: torch.Tensor, lo: torch.Tensor, per_unit: torch.Tensor, top: torch.Tensor
) -> torch.Tensor | None:
    """uint8 ``clamp(floor((x - lo) * per_unit), 0, top)`` of a 1-D float32 ``x`` (0-d
    float32 ``lo``, ``per_unit``, ``top``; ``top`` <= 255), the eager formula's operations
    in its order. ``None``: run eagerly."""
    if x.dtype != torch.float32 or not _usable(x):
        return None
    out = _run(_bin_kernel, "bins", x.contiguous(), lo, per_unit, top)
    return None if out is _FAILED else out


# -- warm-up ---------------------------------------------------------------------------------


def _graphs_compiled() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _probe_cases() -> list[tuple[tuple[int, ...], Any]]:
    """The configs a dashboard session meets first, over every layout class."""
    from .config import Mode, PerChannel, PerGroup, PerTensor, QuantConfig, Rounding, ZeroPoint

    grans = (PerTensor(), PerChannel(0), PerChannel(1), PerGroup(32))
    cases = []
    for bits in (4, 12):  # int8 codes, then int16
        for rounding in (Rounding.NEAREST, Rounding.STOCHASTIC):
            for gran in grans:
                mode = Mode.ASYMMETRIC if bits == 4 else Mode.SYMMETRIC
                cases.append(((128, 256), QuantConfig(bits, mode, gran, rounding=rounding)))
    for zp in (ZeroPoint.FLOAT_MIN, ZeroPoint.COURSE_CLAMP):  # the same kernels, checked
        cases.append(((128, 256), QuantConfig(3, Mode.ASYMMETRIC, PerGroup(32), zero_point=zp)))
    for fmt in (Format.NF4, Format.FP8_E4M3):
        for gran in (PerTensor(), PerGroup(64)):
            cases.append(((128, 256), QuantConfig(format=fmt, granularity=gran)))
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


def _check_probe(shape: tuple[int, ...], cfg: Any) -> str | None:
    """Quantize a probe on both paths; a description of the first difference, or None."""
    from .analysis import clip_stats, histogram
    from .metrics import error_metrics
    from .quantize import quantize

    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 3 + 0.5
    x[0, :8] = torch.tensor([0.5, -0.5, 1.5, 2.5, -0.0, 0.0, 1e-30, -1e-30])  # ties, zeros
    with use_backend(Backend.COMPILED, min_elements=1):
        fast = quantize(x, cfg)
        fast_hat = fast.dequantize()
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
    pairs = {
        "codes": (fast.codes, ref.codes),
        "scales": (fast.scale, ref.scale),
        "zero points": (fast.zero_point, ref.zero_point),
        "offsets": (fast.offset, ref.offset),
        "dequantized": (fast_hat, ref_hat),
    }
    for name, (a, b) in pairs.items():
        if not _same(a, b):
            return f"{name} of {cfg.describe()} differ from the eager path's"
    return None


def warm_up() -> WarmUp:
    """Compile the common kernels now (on small probes) and check each against the eager
    path bit for bit; returns what happened. Cold, this takes tens of seconds (mostly the
    C++ compiler); with Inductor's on-disk cache, a few. While it runs, other threads use
    the eager path. Under ``Backend.EAGER`` it returns at once."""
    global _warming
    start = time.perf_counter()
    if active_backend() is not Backend.COMPILED or not _compiler_ok():
        return WarmUp(active_backend(), time.perf_counter() - start, 0, _failure)
    graphs = _graphs_compiled()
    me = threading.current_thread()
    with _lock:
        _warming = me
    try:
        for shape, cfg in _probe_cases():
            problem = _check_probe(shape, cfg)
            if problem is None and _failure is None:
                continue
            if problem is not None:
                _fail(problem)
            break
    finally:
        with _lock:
            if _warming is me:
                _warming = None
    return WarmUp(
        active_backend(), time.perf_counter() - start, _graphs_compiled() - graphs, _failure
    )


def warm_up_in_background() -> threading.Thread | None:
    """Start ``warm_up`` in a daemon thread, once per process (later calls return the same
    thread); ``None`` under ``Backend.EAGER``. Safe to call on every app rerun."""
    global _background
    if active_backend() is not Backend.COMPILED:
        return None
    with _lock:
        if _background is None:

            def run() -> None:
                global _warming
                try:
                    report = warm_up()
                    _log.info(
                        "quant_core: warm-up took %.1f s (%d kernel graphs), backend %s",
                        report.seconds,
                        report.graphs,
                        report.backend.value,
                    )
                finally:
                    with _lock:
                        if _warming is threading.current_thread():
                            _warming = None

            _background = threading.Thread(target=run, name="quant_core-warm-up", daemon=True)
            # Mark the warm-up as running before the thread starts, so a call that comes
            # first runs eagerly instead of compiling the same kernel alongside it.
            global _warming
            _warming = _background
            _background.start()
        return _background
