"""Keep Python's cyclic garbage collector off the server's long-lived heap.

Once torch, plotly, the bundled model and quant_core's compiled kernels are loaded, the
server process holds about 545,000 objects that live as long as it does. Streamlit runs a
full collection after every rerun (``runner.postScriptGC``), and one that walks all of
them takes 200 ms on this project's 2-core machine: a fifth of a second of held GIL
between a slider move and the images the page fetches. ``gc.freeze()`` moves the objects
alive at that moment into a generation the collector never scans; the collection after a
rerun then walks the few thousand objects the reruns made (2 ms, measured in the served
app), and the server's memory stays flat (555 -> 559 MB over 60 slider moves; with the
collection switched off instead, 560 -> 584 MB). Objects are still freed by reference
counting as before; only cycles among the frozen objects would wait for ``gc.unfreeze()``.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["freeze_when_warm"]

_started = threading.Event()


def freeze_when_warm(warm_up: threading.Thread | None) -> None:
    """Once per process: after ``warm_up`` (quant_core's kernel warm-up thread, or ``None``
    under the eager backend) finishes, collect once and freeze what is left. Runs in a
    daemon thread, so a rerun never waits for it; later calls do nothing."""
    if _started.is_set():
        return
    _started.set()

    def run() -> None:
        if warm_up is not None:
            warm_up.join()
        gc.collect()
        gc.freeze()

    threading.Thread(target=run, name="qlab-heap-freeze", daemon=True).start()
