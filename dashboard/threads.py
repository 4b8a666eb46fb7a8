"""How many threads torch's kernels use in the served app.

On the 2-core machine this project is measured on, the browser drawing the page and the
server computing it share the cores. Two OpenMP threads a kernel then wait on each other
while Chromium holds one core: a slider move settled 70-120 ms later with two threads
than with one (``benchmarks/browser.py``, MiniLM 384x384 and 1536x384: 690 -> 601 ms,
706 -> 636 ms), even at 4096x4096, whose kernels gain most from a second core (813 ->
793 ms). So a served app leaves one core to the browser: ``cpu_count - 1`` threads, at
least one. ``QLAB_THREADS`` sets the number (a server whose users browse from elsewhere
can give it every core); tests and ``AppTest`` keep torch's default.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

import torch

__all__ = ["ENV", "apply_served_threads", "served_threads"]

ENV = "QLAB_THREADS"
_log = logging.getLogger(__name__)
_lock = threading.Lock()
_applied = False


def served_threads(cpu_count: int | None, setting: str | None) -> int:
    """Threads for a served app: ``setting`` (the value of ``QLAB_THREADS``) when it is a
    positive integer, else ``cpu_count - 1`` (at least 1; 1 when the count is unknown).
    Raises ``ValueError`` naming a setting that is not a positive integer."""
    if setting is not None and setting.strip():
        try:
            n = int(setting)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"{ENV}={setting!r}: expected a positive whole number of threads")
        return n
    return max(1, (cpu_count or 2) - 1)


def apply_served_threads() -> int | None:
    """Once per process, under ``streamlit run`` only (``AppTest`` and other importers
    keep torch's default): set torch's intra-op threads to ``served_threads``. Call it
    before quant_core's warm-up, which compiles its kernels for the threads set then.
    Returns the number set, ``None`` when nothing was set. A bad ``QLAB_THREADS`` is
    logged and the default used, so the app still starts."""
    global _applied
    with _lock:
        if _applied or "streamlit.web.bootstrap" not in sys.modules:
            return None
        _applied = True
        try:
            n = served_threads(os.cpu_count(), os.environ.get(ENV))
        except ValueError as exc:
            _log.warning("%s; using the default", exc)
            n = served_threads(os.cpu_count(), None)
        torch.set_num_threads(n)
        return n
