"""``python -m dashboard [streamlit run options]``: serve the app as ``streamlit run
dashboard/app.py`` does, with the one-time work of a new server done before its first page.

Under ``streamlit run`` the first page of a new server pays for it: the app's first run
imports torch, plotly, quant_core and the pages' modules and starts quant_core's kernel
warm-up (seconds of C++ compiling, beside the page), and Streamlit's sockets keep Nagle's
algorithm until that run sets ``TCP_NODELAY`` (``dashboard.served``), so the first page's
~60 script files are served with it on. The launcher:

1. applies the served settings of ``dashboard.served`` (threads, huge pages);
2. imports the modules the entrypoint and its pages import (``page_modules``), before the
   server starts, so that no page's run imports the same modules in another thread;
3. serves Streamlit's static folder with preload hints for the code Streamlit loads
   lazily (``dashboard.preload``), so a new browser fetches it with the bundle;
4. starts the server, and beside it a daemon thread that sets ``TCP_NODELAY`` as soon as
   the server listens (``set_nodelay_when_listening``) and, ``WARM_UP_DELAY_S`` later,
   starts the kernel warm-up and the heap freeze after it, unless a page's first run has
   (a user who opens the page at once gets its first run before the compiler).

Each is done once per process: the app's own first run finds them done.

**Stopping.** SIGTERM or Ctrl-C stops the server (Streamlit's handlers), and the process
exits with the server's status, 0, whatever its other threads are doing (``exit_status``
and ``leave_after_exit_handlers``). Left to itself, Python's finalization would end the
daemon threads still inside torch (a page's run, the kernel warm-up) with
``pthread_exit`` when they next take the GIL, an unwinding that torch's C++ frames do not
survive: "terminate called without an active exception" and exit code 134 (SIGABRT), in 3
of 3 tries during a 64M-cell explorer run. So the launcher's last exit handler, after
everyone else's (logging's, torch's), flushes the standard streams and leaves with
``os._exit``, skipping only the finalization. A signal before the server has started (the
imports) exits with 0 too. Measured on this
machine (cold browser, MiniLM 384x384, median of 3): opened once the new server was idle,
the first page settled in 1.51 s against 3.48 s under ``streamlit run``; opened as soon as
the server answered, in 1.97 s against 3.51 s. The server answers later (1.8 s after the
start against 0.5 s: the imports), so from the start to a settled page that second case
took 3.8 against 4.0 s. Arguments are passed to ``streamlit run`` (``python -m dashboard
--server.port 8502``).
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = [
    "APP",
    "WARM_UP_DELAY_S",
    "exit_status",
    "leave_after_exit_handlers",
    "main",
    "page_modules",
    "prepare",
    "start_warm_up",
    "streamlit_args",
]

APP = Path(__file__).resolve().with_name("app.py")
"""The entrypoint ``streamlit run`` serves."""

_log = logging.getLogger(__name__)

WARM_UP_DELAY_S = 3.0
"""How long after the server listens the launcher starts the kernel warm-up, unless a
page's first run has started it by then."""


def streamlit_args(argv: Sequence[str]) -> list[str]:
    """The ``streamlit`` command line that serves the app with the options ``argv``."""
    return ["run", str(APP), *argv]


def page_modules(scripts: Iterable[Path]) -> list[str]:
    """The modules ``scripts`` import by absolute name (``import a.b``, ``from a.b import
    c``), each once; relative and ``__future__`` imports left out. Raises ``SyntaxError``
    for a script that does not parse."""
    names: list[str] = []
    for script in scripts:
        tree = ast.parse(Path(script).read_text(encoding="utf-8"), filename=str(script))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module)
    return [n for n in dict.fromkeys(names) if n != "__future__"]


def _scripts() -> list[Path]:
    return [APP, *sorted(APP.with_name("views").glob("*.py"))]


def prepare() -> str:
    """Step 2 of the module's docstring: returns the line it reports. A module that fails
    to import is logged and skipped: the page that needs it shows the error when it runs."""
    start = time.perf_counter()
    names = page_modules(_scripts())
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # the page's own run reports it to its user
            _log.exception("dashboard.launch: importing %s failed", name)
            failed.append(name)
    return (
        f"Quantization Lab: {len(names) - len(failed)} of the pages' {len(names)} modules"
        f" imported in {time.perf_counter() - start:.1f} s"
    )


def start_warm_up() -> threading.Thread | None:
    """quant_core's kernel warm-up and the heap freeze after it, each once per process (a
    page's run that came first has started them: then nothing more happens). Returns the
    warm-up thread, ``None`` under the eager backend."""
    from dashboard.served import freeze_after_warm_up
    from quant_core import warm_up_in_background

    warm_up = warm_up_in_background()
    freeze_after_warm_up(warm_up)
    return warm_up


def _beside_the_server() -> None:
    from dashboard.served import set_nodelay_when_listening

    n = set_nodelay_when_listening(120.0)
    print(f"Quantization Lab: TCP_NODELAY on {n} server socket(s)", file=sys.stderr, flush=True)
    # A user who opens the page at once gets its first run before the compiler: that run
    # starts the warm-up itself, after its own start, as under `streamlit run`.
    time.sleep(WARM_UP_DELAY_S)
    begun = time.perf_counter()
    warm_up = start_warm_up()
    started = "started" if warm_up is not None else "off (eager backend)"
    print(f"Quantization Lab: kernel warm-up {started}", file=sys.stderr, flush=True)
    if warm_up is not None:
        from dashboard.served import HEAP_FROZEN

        # for whoever operates (or tests) the server: from here on the process is warm
        HEAP_FROZEN.wait()
        print(
            f"Quantization Lab: kernel warm-up done, heap frozen, "
            f"{time.perf_counter() - begun:.0f} s after it started",
            file=sys.stderr,
            flush=True,
        )


def exit_status(code: object) -> int:
    """The status a process exits with for ``SystemExit(code)``: ``None`` is 0, an int is
    itself, anything else (a message Python prints) is 1."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    return 1


_status = 1
"""What ``leave_after_exit_handlers`` exits with: 1 until the server has returned."""


def leave_after_exit_handlers() -> None:
    """Registered with ``atexit`` before anything else, so it runs after every other exit
    handler: flush the standard streams and end the process with ``_status`` without
    Python's finalization (see "Stopping" in the module's docstring)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # closed, or None
            stream.flush()
    os._exit(_status)


def _stop_before_serving(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the app (``streamlit run`` with ``argv``, default ``sys.argv[1:]``), the
    process prepared first; exits with the server's status (see "Stopping")."""
    global _status
    argv = sys.argv[1:] if argv is None else list(argv)
    atexit.register(leave_after_exit_handlers)
    # Until Streamlit installs its own handlers: SIGTERM as Ctrl-C, both a quiet stop.
    signal.signal(signal.SIGTERM, _stop_before_serving)
    try:
        _serve(argv)
    except SystemExit as exc:
        _status = exit_status(exc.code)
        raise
    except KeyboardInterrupt:
        print("Quantization Lab: stopped before the server started", file=sys.stderr)
        _status = 0
        return
    _status = 0


def _serve(argv: list[str]) -> None:
    # Importing Streamlit's CLI loads its bootstrap: from here on this process counts as
    # served (dashboard.served.is_served) and the settings below apply.
    from streamlit.web import cli

    from dashboard.preload import serve_static_with_preloads
    from dashboard.served import apply_served_huge_pages, apply_served_threads

    apply_served_huge_pages()
    # Threads before the warm-up: it compiles its kernels for the number set then.
    apply_served_threads()
    print(prepare(), file=sys.stderr, flush=True)
    preloads = serve_static_with_preloads()
    if preloads is not None:
        n, m = len(preloads.modules), len(preloads.fonts)
        line = f"Quantization Lab: the page preloads {n} modules and {m} fonts"
        print(line, file=sys.stderr, flush=True)
    threading.Thread(target=_beside_the_server, name="qlab-launch", daemon=True).start()
    cli.main(args=streamlit_args(argv), prog_name="streamlit")
