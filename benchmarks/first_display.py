"""Where a cold first display of the explorer goes: a timeline of each load, in the page.

Run: ``PYTHONPATH=. python benchmarks/first_display.py [--tensor synth4096] [--loads 3]``.

``benchmarks/browser.py`` says how long a first display takes; this says what the page
waited for. It warms a server as ``browser.py`` does, then opens the explorer on one of its
tensors in a new browser context (nothing cached) ``--loads`` times, each under a scheme
the server has not computed, with ``browser_meter``'s probe and a recorder installed before
the page's own scripts. Times are ms from navigation start, on the page's clock:

- *DOMContentLoaded*: Streamlit's bundle (its HTML, entry script and the ~60 modules it
  imports at once) fetched and run;
- *websocket open*, and the server's *first* and *last message* of the run (with the
  bytes): the script's run, sidebar first, then the quantization, the maps and the rest;
- *code after DCL*: the scripts and fonts the page fetched after ``DOMContentLoaded``:
  Streamlit loads each element's code (widgets, the components' runtime, KaTeX) when the
  first element of that kind arrives;
- *maps fetched*: when the page asked for the overview images, and when the last arrived;
- *long tasks*: main-thread tasks of 50 ms and more (``PerformanceObserver``);
- *metric* and *settled*, as ``browser.py`` defines them.

The recorder wraps ``WebSocket`` to time each message as the page receives it (a busy
main thread receives late: that is the time that counts for drawing). It adds a few ms per
load; ``browser.py``'s first displays are taken without it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.browser import FIRST_SCHEMES, START, TENSORS
from benchmarks.browser_meter import CHROMIUM, CHROMIUM_ARGS, PROBE, ROOT, Meter, streamlit_server

# Installed before the page's scripts (after the probe): each websocket message's arrival
# time and size, and the main thread's long tasks.
RECORDER = """
(() => {
  const T = window.__timeline = {messages: [], longTasks: [], wsOpen: null};
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('open', () => { T.wsOpen = performance.now(); });
      this.addEventListener('message', (e) => {
        const d = e.data;
        T.messages.push([performance.now(), d.size ?? d.byteLength ?? d.length ?? 0]);
      });
    }
  };
  new PerformanceObserver((list) => list.getEntries().forEach(
      (e) => T.longTasks.push([e.startTime, e.duration])))
      .observe({type: 'longtask', buffered: true});
})();
"""

# What the page has recorded once settled: the recorder's, the navigation's and every
# resource's timing.
COLLECT = """
(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource').map((e) => ({
    name: e.name, type: e.initiatorType, start: e.startTime, end: e.responseEnd}));
  return {dcl: nav.domContentLoadedEventEnd, resources: res, ...window.__timeline};
})()
"""


@dataclass(frozen=True)
class Load:
    """One cold first display's marks, ms from navigation start (``None``: did not occur)."""

    scheme: str
    dcl: float
    ws_open: float | None
    first_message: float | None
    last_message: float | None
    kb_received: float
    code_after_dcl: int
    code_after_dcl_end: float | None
    maps_asked: float | None
    maps_end: float | None
    long_tasks: int
    long_task_ms: float
    metric: float
    settled: float


def _is_code(r: dict) -> bool:
    name = r["name"].split("?")[0]
    return name.endswith((".js", ".css", ".woff2", ".woff", ".ttf"))


def load_marks(scheme: str, probe: dict, t: dict) -> Load:
    """The marks of one load from the probe's result and the recorder's ``COLLECT``."""
    messages = t["messages"]
    late_code = [r for r in t["resources"] if _is_code(r) and r["start"] >= t["dcl"]]
    # The app's media files (Streamlit's own fonts live under /static/media/).
    maps = [r for r in t["resources"] if "/media/" in r["name"] and "/static/" not in r["name"]]
    return Load(
        scheme=scheme,
        dcl=t["dcl"],
        ws_open=t["wsOpen"],
        first_message=messages[0][0] if messages else None,
        last_message=messages[-1][0] if messages else None,
        kb_received=sum(size for _, size in messages) / 1e3,
        code_after_dcl=len(late_code),
        code_after_dcl_end=max((r["end"] for r in late_code), default=None),
        maps_asked=min((r["start"] for r in maps), default=None),
        maps_end=max((r["end"] for r in maps), default=None),
        long_tasks=len(t["longTasks"]),
        long_task_ms=sum(d for _, d in t["longTasks"]),
        metric=probe["metric"],
        settled=probe["settled"],
    )


def open_cold(browser, url: str, min_charts: int, scheme: str) -> Load:
    """One first display in a new browser context (nothing cached), recorded."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    try:
        context.add_init_script(PROBE)
        context.add_init_script(RECORDER)
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(url)
        page.wait_for_function(f"window.__bench.settled({min_charts})", polling=50)
        return load_marks(scheme, page.evaluate("window.__bench.result()"), page.evaluate(COLLECT))
    finally:
        context.close()


ROWS = (
    ("DOMContentLoaded", lambda x: x.dcl),
    ("websocket open", lambda x: x.ws_open),
    ("server's first message", lambda x: x.first_message),
    ("server's last message", lambda x: x.last_message),
    ("code after DCL: last arrived", lambda x: x.code_after_dcl_end),
    ("maps asked for", lambda x: x.maps_asked),
    ("maps arrived", lambda x: x.maps_end),
    ("first metric", lambda x: x.metric),
    ("settled", lambda x: x.settled),
)


def _ms(v: float | None) -> str:
    return "     -" if v is None else f"{v:6.0f}"


def report(loads: list[Load]) -> str:
    """A table: one column per load and their median, one row per mark."""
    lines = [
        "mark (ms from navigation)      "
        + " ".join(f"{'load ' + str(i + 1):>7s}" for i in range(len(loads)))
        + "  median"
    ]
    for name, get in ROWS:
        values = [get(x) for x in loads]
        known = [v for v in values if v is not None]
        med = statistics.median(known) if known else None
        lines.append(f"{name:30s} " + " ".join(f" {_ms(v)}" for v in values) + f"  {_ms(med)}")
    for x in loads:
        lines.append(
            f"  {x.scheme}: {x.kb_received:.0f} kB over the websocket; {x.code_after_dcl} code"
            f" files fetched after DCL; {x.long_tasks} long tasks, {x.long_task_ms:.0f} ms"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensor", default="synth4096", choices=[t.key for t in TENSORS])
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    if args.loads < 1:
        parser.error(f"--loads must be at least 1, got {args.loads}")
    tensor = next(t for t in TENSORS if t.key == args.tensor)
    # Schemes the server has not computed: the benchmark's first-display ones, then more.
    schemes = list(FIRST_SCHEMES) + [
        f"bits={b}&mode={m}&gran=group&group={g}"
        for b in (6, 7)
        for m in ("asymmetric", "symmetric")
        for g in (32, 64, 128)
    ]
    if args.loads > len(schemes):
        parser.error(f"--loads can be at most {len(schemes)}, got {args.loads}")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            log = Path(tmp) / "app.log"
            with streamlit_server(ROOT / "dashboard" / "app.py", log, launcher=True) as app:
                # Imports and the first compile, then quant_core's kernel warm-up.
                warm = Meter(browser)
                warm.open(f"{app.url}/?src=synthetic&rows=512&cols=512&{START}", 4)
                warm.close()
                app.wait_idle()
                loads = [
                    open_cold(browser, f"{app.url}/?{tensor.query}&{scheme}", 4, scheme)
                    for scheme in schemes[: args.loads]
                ]
        finally:
            browser.close()
    print(f"{tensor.label}: cold first displays (the first also loads the tensor)")
    print(report(loads))


if __name__ == "__main__":
    main()
