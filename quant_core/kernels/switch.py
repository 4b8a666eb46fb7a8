"""The switch between the compiled and the eager path, and the machinery that compiles
and runs a kernel (see ``quant_core.kernels`` for the rules)."""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import threading
import time
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..config import coerce_enum

__all__ = [
    "ENV_VAR",
    "MIN_ELEMENTS",
    "Backend",
    "active_backend",
    "backend_from_env",
    "compile_failure",
    "runs_compiled",
    "set_backend",
    "use_backend",
    "wait_for_warm_up",
    "warm_up_running",
]

_log = logging.getLogger("quant_core.kernels")

ENV_VAR = "QLAB_COMPILE"
MIN_ELEMENTS = 1 << 15
_OFF = ("0", "false", "off", "no")
_ON = ("", "1", "true", "on", "yes")


class Backend(enum.Enum):
    """Which implementation runs quantize's large passes (see ``quant_core.kernels``).

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
    return coerce_enum(backend, Backend, "backend")


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


def warm_up_running() -> bool:
    """Whether a kernel warm-up runs now in a thread other than this one (so this one's
    kernels run eagerly until it ends, and ``wait_for_warm_up`` would wait)."""
    warming = _warming
    return warming is not None and warming is not threading.current_thread()


def wait_for_warm_up(timeout: float) -> bool:
    """Wait, at most ``timeout`` seconds, while a warm-up runs in another thread; whether
    none runs now. For long work (a whole table of weights): while the kernels warm, every
    other thread runs eagerly (``_usable``), and llama.cpp's searches run far slower
    eagerly (the bundled model's table, measured on 2 busy cores: 9 of its 40 weights in
    164 s eagerly, all 40 in 43 s compiled), so the
    warm-up's remaining seconds are the cheaper wait. Polls: ``_warming`` is cleared, not
    ended, by a warm-up in the foreground of a thread that lives on."""
    deadline = time.monotonic() + timeout
    while True:
        warming = _warming
        if warming is None or warming is threading.current_thread():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def runs_compiled(*tensors: torch.Tensor) -> bool:
    """Whether a compiled pass over ``tensors`` would run now (``_usable``): for a caller
    that prepares a kernel's inputs at some cost, to skip that work where the entry point
    would return ``None`` anyway."""
    return _usable(*tensors)


def _variant(
    fn: Callable[..., Any], key: str, options: dict[str, Any] | None = None
) -> Callable[..., Any]:
    """``torch.compile(fn)`` for one variant ``key``, on its own copy of ``fn``'s code:
    Dynamo keeps one cache (and one recompile limit) per code object, so variants that
    differ by dtype or inference-ness never crowd each other out. ``options``: Inductor
    settings for this kernel alone (``torch.compile``'s ``options``)."""
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
                compiled = torch.compile(copy, dynamic=True, fullgraph=True, options=options)
                _compiled[name] = compiled
    return compiled


_FAILED = object()


def _run(
    fn: Callable[..., Any],
    key: str,
    *args: torch.Tensor,
    options: dict[str, Any] | None = None,
) -> Any:
    """``fn(*args)`` compiled (with ``options``, see ``_variant``), or ``_FAILED`` when the
    compiled path failed (then it is off).

    Kernels run outside autograd and outside inference mode, so their outputs are plain
    tensors. Which inputs are inference tensors (made under ``torch.inference_mode``) picks
    the compiled variant, as Dynamo guards on it."""
    marks = "".join("i" if a.is_inference() else "n" for a in args)
    # detach(): not a view (Dynamo would guard on a view's base, one variant more).
    plain = [a.detach() for a in args]
    try:
        compiled = _variant(fn, f"{key}_{marks}", options)
        with torch.inference_mode(False), torch.no_grad():
            return compiled(*plain)
    except Exception as exc:
        _fail(_describe(exc))
        return _FAILED


def try_compiled(
    fn: Callable[..., Any],
    key: str,
    *args: torch.Tensor,
    options: dict[str, Any] | None = None,
) -> Any:
    """``fn(*args)`` as one compiled kernel (variant ``key``, Inductor ``options``: see
    ``_variant``) where this call may run compiled (``runs_compiled(*args)``: the compiled
    backend, CPU tensors, ``args[0]`` large enough, no warm-up in another thread), else
    ``None``: the caller then takes its own eager route (a failed compile also turns the
    compiled path off for the process, ``_run``). For a kernel whose inputs or outputs
    differ from its eager twin's (tiles, words); else ``compiled_or``."""
    if not _usable(*args):
        return None
    out = _run(fn, key, *args, options=options)
    return None if out is _FAILED else out


def compiled_or(
    fn: Callable[..., Any],
    key: str,
    *args: torch.Tensor,
    fallback: Callable[..., Any] | None = None,
    options: dict[str, Any] | None = None,
) -> Any:
    """``try_compiled(fn, key, *args)``, else ``fallback(*args)`` (default: ``fn`` itself,
    eagerly).

    ``fallback`` must give the same bits: a kernel written for Inductor's loops (one value
    at a time, tiles) may have a faster eager twin written for torch's whole-tensor
    operators."""
    out = try_compiled(fn, key, *args, options=options)
    if out is not None:
        return out
    return (fn if fallback is None else fallback)(*args)
