"""Settings of the process ``streamlit run`` serves the app from, each made once: torch's
thread count, huge pages for torch's large buffers, the garbage collector kept off the
long-lived heap, and Nagle's algorithm off on the server's sockets. ``AppTest`` and other
importers keep torch's, Python's and the sockets' defaults.

**Threads.** On the 2-core machine this project is measured on, the browser drawing the
page and the server computing it share the cores. Two OpenMP threads a kernel then wait on
each other while Chromium holds one core: a slider move settled 70-90 ms later with two
threads than with one (``benchmarks/browser.py``, MiniLM 384x384 and 1536x384: 690 -> 601
ms, 706 -> 636 ms), and even at 4096x4096, whose kernels gain most from a second core, one
was no slower (813 -> 793 ms). Measured again once the zoom and histogram were drawn by
the browser itself (``QLAB_THREADS=2`` against the default, same benchmark): 384 vs 297 ms
at 1536x384, 488 vs 392 ms for the word embeddings, 544 vs 482 ms at 4096x4096: two threads
were slower at every size. So a served app leaves one core to the browser:
``cpu_count - 1`` threads, at least one. The heavy pages pay for it on 2 cores: GPTQ, AWQ
and HQQ over MiniLM take 5.0, 4.9 and 2.6 s with one thread, 3.6, 3.0 and 1.5 s with two
(``benchmarks/algorithms.py``). ``QLAB_THREADS`` sets the number (a server whose users
browse from other machines can take every core).

**Huge pages.** Every rerun allocates full-size tensors (the dequantized matrix, the
error, codes as floats for the maps: 67 MB each at 4096x4096), and the kernel gives each
fresh 4 kB page on first touch; on this machine (a virtual machine) that first touch cost
more than the arithmetic: ``x * 2`` of a 4096x4096 float32 matrix took 25.7 ms, of which
about 15 were page faults. With ``THP_MEM_ALLOC_ENABLE=1`` torch aligns buffers of 2 MB
and more to 2 MB and asks for transparent huge pages (``madvise``; this machine's
``/sys/kernel/mm/transparent_hugepage/enabled`` is ``madvise``): 10.5 ms, and a 4096x4096
bit-width change computed in 75 ms instead of 92 (``explore``) and 54 instead of 68 (its
three maps), one thread, in process. A setting already in the environment is kept (``0``
turns it off); where the kernel offers no huge pages, buffers are only aligned.

**Heap.** Once torch, plotly, the bundled model and quant_core's compiled kernels are
loaded, the server holds about 545,000 objects that live as long as it does. Streamlit runs
a full collection after every rerun (``runner.postScriptGC``), and one that walks all of
them takes 200 ms here: a fifth of a second of held GIL between a slider move and the
images the page fetches. ``gc.freeze()`` moves the objects alive at that moment into a
generation the collector never scans; the collection after a rerun then walks the few
thousand objects the reruns made (2 ms, measured in the served app), and memory stays flat
(555 -> 559 MB over 60 slider moves; with the collection switched off instead, 560 -> 584
MB). Objects are still freed by reference counting; only cycles among the frozen objects
would wait for ``gc.unfreeze()``.

**Sockets.** Streamlit binds its listening socket itself (``socket.socket(family=...)``,
protocol number 0) and hands it to uvicorn. asyncio turns Nagle's algorithm off
(``TCP_NODELAY``) only on sockets whose protocol number is ``IPPROTO_TCP``, so every
connection the server accepts keeps it on: the last small segment of a response waits for
the browser's delayed acknowledgement, 40 ms on Linux. Measured against the served app on
this machine: a static script file over a kept-alive connection took 43 ms whatever its
size (the first byte after 2 ms), 1 ms with ``TCP_NODELAY``; a cold first page load fetches
about 60 of them over six connections. The websocket's messages and the map images of every
rerun went over the same sockets. Linux (and the BSDs) copy ``TCP_NODELAY`` from a listening
socket to the connections it accepts, so setting it on the listener once covers every later
connection; the connections already open (the first page's websocket) get it too. Under a
plain ``streamlit run`` the first page load of a new server, before any run, is still served
with Nagle's algorithm on; the launcher (``python -m dashboard``, ``dashboard.launch``) sets
it as soon as the server listens (``set_nodelay_when_listening``).
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

__all__ = [
    "ENV",
    "HUGE_PAGES_ENV",
    "apply_served_huge_pages",
    "apply_served_nodelay",
    "apply_served_threads",
    "freeze_after_warm_up",
    "is_served",
    "served_threads",
    "set_nodelay_when_listening",
    "set_tcp_nodelay",
]

ENV = "QLAB_THREADS"
HUGE_PAGES_ENV = "THP_MEM_ALLOC_ENABLE"
"""torch's switch (c10's CPU allocator) for transparent huge pages under buffers >= 2 MB."""
_log = logging.getLogger(__name__)
_lock = threading.Lock()
_threads_set = False
_frozen = False
HEAP_FROZEN = threading.Event()
"""Set once ``freeze_after_warm_up``'s thread has frozen the heap (the warm-up done)."""
_nodelay_set = False


def is_served() -> bool:
    """Whether this process is ``streamlit run`` (its bootstrap module is loaded; under
    ``AppTest`` it is not)."""
    return "streamlit.web.bootstrap" in sys.modules


def served_threads(cpu_count: int | None, setting: str | None) -> int:
    """Threads for a served app: ``setting`` (the value of ``QLAB_THREADS``) when given,
    else ``cpu_count - 1`` (at least 1; 1 when the count is unknown). Raises ``ValueError``
    naming a setting that is not a positive whole number."""
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
    """Once per served process: set torch's intra-op threads to ``served_threads``. Call
    it before quant_core's warm-up, which compiles its kernels for the threads set then.
    Returns the number set, ``None`` when nothing was set. A bad ``QLAB_THREADS`` is logged
    and the default used, so the app still starts."""
    global _threads_set
    with _lock:
        if _threads_set or not is_served():
            return None
        _threads_set = True
        try:
            n = served_threads(os.cpu_count(), os.environ.get(ENV))
        except ValueError as exc:
            _log.warning("%s; using the default", exc)
            n = served_threads(os.cpu_count(), None)
        torch.set_num_threads(n)
        return n


def apply_served_huge_pages() -> bool:
    """In a served process, unless the environment already says: set
    ``THP_MEM_ALLOC_ENABLE=1`` for torch's CPU allocator, which reads it when it allocates.
    Call it before the pages allocate their tensors. Returns whether it was set here."""
    if not is_served() or HUGE_PAGES_ENV in os.environ:
        return False
    os.environ[HUGE_PAGES_ENV] = "1"
    return True


def freeze_after_warm_up(warm_up: threading.Thread | None) -> threading.Thread | None:
    """Call at the end of every run (so the pages' own imports are in the frozen heap too).
    The first call in a served process starts a daemon thread that waits for ``warm_up``
    (quant_core's kernel warm-up thread; ``None`` under the eager backend), then collects
    once and freezes what is left; returns that thread, ``None`` on every other call.

    Not in the run itself: with the compiled kernels loaded, that one collection took 0.4-0.9
    s, and the run that found the warm-up finished (a user's first tensor, seconds after the
    server started) waited for it. In a thread it holds the GIL as long, but once, while
    nobody may be waiting."""
    global _frozen
    with _lock:
        if _frozen or not is_served():
            return None
        _frozen = True

    def freeze() -> None:
        if warm_up is not None:
            warm_up.join()
        gc.collect()
        gc.freeze()
        HEAP_FROZEN.set()

    thread = threading.Thread(target=freeze, name="qlab-gc-freeze", daemon=True)
    thread.start()
    return thread


def _open_fds() -> list[int]:
    """This process's open file descriptors: ``/proc/self/fd`` where there is one (Linux),
    else every number below the soft limit (at most 4096) that ``fstat`` accepts."""
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        pass
    try:
        import resource

        limit = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 4096)
    except (ImportError, OSError, ValueError):
        limit = 1024
    fds = []
    for fd in range(limit):
        try:
            os.fstat(fd)
        except OSError:
            continue
        fds.append(fd)
    return fds


@contextmanager
def _tcp_socket(fd: int) -> Iterator[socket.socket | None]:
    """The TCP socket (IPv4 or IPv6 stream) open on ``fd``, borrowed for the block, else
    ``None``: files, pipes, Unix and UDP sockets, and a descriptor closed meanwhile by
    another thread. The descriptor stays open: it belongs to the server."""
    try:
        sock = socket.socket(fileno=fd) if stat.S_ISSOCK(os.fstat(fd).st_mode) else None
    except OSError:
        sock = None
    if sock is None:
        yield None
        return
    try:
        # Detected from the descriptor; a descriptor reused meanwhile is checked anew.
        tcp = sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
        yield sock if tcp else None
    finally:
        sock.detach()


def set_tcp_nodelay(fds: list[int] | None = None) -> int:
    """Turn Nagle's algorithm off (``TCP_NODELAY``) on every TCP socket among ``fds`` (this
    process's open descriptors when ``None``): listening ones, whose later connections
    inherit the setting on Linux and the BSDs, and connected ones. Other descriptors (files,
    pipes, Unix and UDP sockets) are left alone, and so is one closed meanwhile by another
    thread. Returns how many sockets were set."""
    n = 0
    for fd in _open_fds() if fds is None else fds:
        with _tcp_socket(fd) as sock:
            if sock is None:
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                n += 1
            except OSError:
                pass
    return n


def _listening_tcp(fd: int) -> bool:
    """Whether ``fd`` is a listening TCP socket (``SO_ACCEPTCONN``)."""
    with _tcp_socket(fd) as sock:
        try:
            return sock is not None and bool(
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            )
        except OSError:
            return False


def set_nodelay_when_listening(
    timeout_s: float, poll_s: float = 0.01, fds: Callable[[], list[int]] = _open_fds
) -> int:
    """Wait until this process holds a listening TCP socket (checking ``fds()``, its open
    descriptors, every ``poll_s`` seconds, for at most ``timeout_s``), then
    ``set_tcp_nodelay``: the launcher (``python -m dashboard``) runs it beside the starting
    server, so that even the first page load is served without Nagle's algorithm. Returns
    how many sockets were set, 0 when no listener appeared in time."""
    for name, value in (("timeout_s", timeout_s), ("poll_s", poll_s)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    deadline = time.monotonic() + timeout_s
    while True:
        current = fds()
        if any(_listening_tcp(fd) for fd in current):
            return set_tcp_nodelay(current)
        if time.monotonic() >= deadline:
            return 0
        time.sleep(poll_s)


def apply_served_nodelay() -> int | None:
    """Once per served process, at its first run: ``set_tcp_nodelay`` on the server's
    sockets (see the module's docstring). Returns how many were set, ``None`` when nothing
    was done (not served, or done before)."""
    global _nodelay_set
    with _lock:
        if _nodelay_set or not is_served():
            return None
        _nodelay_set = True
    return set_tcp_nodelay()
