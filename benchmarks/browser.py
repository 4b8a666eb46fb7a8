"""What a user waits for: the explorer in headless Chromium, key press to settled page.

Run: ``PYTHONPATH=. python benchmarks/browser.py [--tensors query,intermediate,words,synth4096]``.

Starts ``streamlit run dashboard/app.py`` on a free local port (as ``tests/browser`` does)
and drives ``/usr/bin/chromium`` (Playwright, headless, ``--no-sandbox``) through
bit-width, mode and group-size changes by keyboard on four tensors, each starting from
int4 asymmetric per-group 128:

- MiniLM ``encoder.layer.0.attention.self.query.weight`` (384x384),
- MiniLM ``encoder.layer.0.intermediate.dense.weight`` (1536x384),
- MiniLM ``embeddings.word_embeddings.weight`` (30522x384),
- a synthetic 4096x4096 normal tensor.

Every change is a configuration not seen before (4 -> 8 bits, symmetric, 7, 6 bits,
asymmetric, group 64, 32), so no cache hides the server's work. Times are taken inside the
page (``performance.now()``): from the ``keydown`` to

- *metric*: the first metric value on the page changing;
- *settled*: the status widget gone and the page quiet (no DOM change anywhere outside the
  status widget, and no image loaded, for ``QUIET_MS``), the time being that of the last
  change; the charts whose plot changed (a mutation inside the plotly graph, not
  Streamlit's stale marks around it; for the explorer's image maps, a new ``<img>``) are
  named: those the browser redrew (the original map should not be among them);
- *server+transfer*: from the rerun request the browser sends to the server's last
  websocket message, on the network stack's clock (CDP ``Network`` events), so a busy page
  does not inflate it; ``settled - server`` is then the browser's own share (parsing and
  drawing what it was sent).

Bytes per change count every websocket frame the server sent (``page.on("websocket")``)
and the media files (the explorer's image maps) the page fetched over HTTP.
*Busy* is the browser main thread's task time (CDP ``Performance.getMetrics``
``TaskDuration``) during the change. First display is timed from navigation start.

The reference, measured in the same run between the tensors (so it sees the same load),
is a tiny Streamlit page with one 512x512 float32 heatmap that a button redraws: the least
any page drawing a heatmap can cost on this machine. Ratios to it survive a loaded machine.
Targets (issue 12): settled < 250 ms at 1536x384, < 400 ms at 4096x4096 and for the word
embeddings; first display < 1.5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
QUIET_MS = 600
START = "bits=4&mode=asymmetric&gran=group&group=128"


@dataclass(frozen=True)
class Tensor:
    key: str
    label: str
    query: str
    settled_target_ms: float


TENSORS = (
    Tensor(
        "query",
        "MiniLM query 384x384",
        "src=model&tensor=encoder.layer.0.attention.self.query.weight",
        250.0,
    ),
    Tensor(
        "intermediate",
        "MiniLM intermediate 1536x384",
        "src=model&tensor=encoder.layer.0.intermediate.dense.weight",
        250.0,
    ),
    Tensor(
        "words",
        "MiniLM word embeddings 30522x384",
        "src=model&tensor=embeddings.word_embeddings.weight",
        400.0,
    ),
    Tensor("synth4096", "synthetic 4096x4096", "src=synthetic&rows=4096&cols=4096", 400.0),
)
FIRST_DISPLAY_TARGET_MS = 1500.0

# Installed before any page script: records key presses, DOM changes, metric changes and
# the charts drawn, on the page's own clock.
PROBE = """
(() => {
  const B = window.__bench = {};
  const metricText = () => Array.from(
      document.querySelectorAll('[data-testid="stMetricValue"]')).map(e => e.innerText).join('|');
  const status = () => document.querySelector('[data-testid="stStatusWidget"]');
  // Charts: plotly charts, and the explorer's image maps (an <img> in a "heat_*" box).
  const charts = () => Array.from(document.querySelectorAll(
      '[data-testid="stPlotlyChart"], [class*="st-key-heat_"] [data-testid="stImage"]'));
  const loaded = (c) => Array.from(c.querySelectorAll('img'))
      .some(i => i.complete && i.naturalWidth > 0);
  const drawnCharts = () => charts().filter(c => c.querySelector('.main-svg') || loaded(c))
      .length;
  // A chart's name: its Streamlit key ("heat_codes" -> "codes", "zoom"), else its position.
  const chartName = (c, all) => {
    const box = c.closest('[class*="st-key-"]');
    const key = box && Array.from(box.classList).find(k => k.startsWith('st-key-'));
    return key ? key.slice(7).replace(/^heat_/, '') : String(all.indexOf(c));
  };
  B.arm = (t0) => {
    B.press = t0; B.before = metricText(); B.metricAt = null; B.lastMut = null;
    B.statusGoneAt = null; B.hadStatus = !!status(); B.redrawn = new Set();
    B.drawnAtFirstChart = null; B.allChartsAt = null;
  };
  B.arm(0);
  B.before = '';
  document.addEventListener('keydown', () => { if (B.press === null) B.press = performance.now(); },
                            true);
  B.disarm = () => { B.press = null; };
  B.settled = (minCharts) => {
    if (B.press === null || B.metricAt === null || status()) return false;
    if (drawnCharts() < minCharts) return false;
    return performance.now() - Math.max(B.lastMut ?? 0, B.statusGoneAt ?? 0) > QUIET;
  };
  B.result = () => ({
    metric: B.metricAt - B.press,
    settled: Math.max(B.lastMut ?? B.metricAt, B.statusGoneAt ?? 0) - B.press,
    redrawn: Array.from(B.redrawn).sort(),
    charts: charts().length,
    drawnAtFirstChart: B.drawnAtFirstChart,
    allChartsAt: B.allChartsAt === null ? null : B.allChartsAt - B.press,
  });
  const obs = new MutationObserver((muts) => {
    if (B.press === null) return;
    const t = performance.now();
    const all = charts();
    let counted = false;
    for (const m of muts) {
      const el = m.target.nodeType === 1 ? m.target : m.target.parentElement;
      if (!el || el.closest('[data-testid="stStatusWidget"]')) continue;
      counted = true;
      // A redraw changes the plot itself (not Streamlit's stale marks around it, nor a
      // hover label): a mutation inside the plotly graph, outside its hover layer.
      const c = el.closest('[data-testid="stPlotlyChart"]');
      const inPlot = el.closest('.js-plotly-plot') || el.querySelector?.('.js-plotly-plot');
      if (c && inPlot && !el.closest('.hoverlayer')) B.redrawn.add(chartName(c, all));
      // An image map is redrawn when its <img> gets a new source.
      const img = el.closest('[class*="st-key-heat_"] [data-testid="stImage"]');
      if (img && (el.tagName === 'IMG' || el.querySelector?.('img'))) {
        B.redrawn.add(chartName(img, all));
      }
    }
    if (B.hadStatus && !status() && B.statusGoneAt === null) B.statusGoneAt = t;
    if (status()) { B.hadStatus = true; B.statusGoneAt = null; }
    if (!counted) return;
    B.lastMut = t;
    if (B.metricAt === null && metricText() !== B.before && metricText() !== '') B.metricAt = t;
    const drawn = drawnCharts();
    if (B.drawnAtFirstChart === null && drawn > 0) B.drawnAtFirstChart = drawn;
    if (B.allChartsAt === null && drawn >= 4) B.allChartsAt = t;
  });
  obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  // An image is drawn when it has loaded (after the mutation that set its source).
  document.addEventListener('load', (e) => {
    if (B.press === null || e.target.tagName !== 'IMG') return;
    B.lastMut = performance.now();
  }, true);
})();
""".replace("QUIET", str(QUIET_MS))

REFERENCE_PAGE = """
import numpy as np
import plotly.graph_objects as go
import streamlit as st

Z = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
st.session_state.setdefault("n", 0)
if st.button("Redraw", key="redraw"):
    st.session_state.n += 1
n = st.session_state.n
st.metric("Redraws", n)
# A new factor each time: the figure changes, so it is sent and drawn again.
fig = go.Figure(go.Heatmap(z=Z * np.float32(1 + 0.01 * n), colorscale="RdBu"))
fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 30, "b": 10})
st.plotly_chart(fig, key="ref")
"""


@dataclass(frozen=True)
class Change:
    """One measured change: times in ms from the key press, bytes the server sent."""

    kind: str
    metric_ms: float
    settled_ms: float
    server_ms: float | None
    busy_ms: float
    bytes_sent: int
    redrawn: tuple[str, ...]
    charts: int


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(script: Path, log: Path) -> Iterator[str]:
    """``streamlit run script`` on a free port until the block ends; yields its URL."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port)]
    cmd += ["--server.address", "127.0.0.1", "--server.headless", "true"]
    cmd += ["--browser.gatherUsageStats", "false"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start: see {log}")
                try:
                    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2):
                        break
                except OSError:
                    time.sleep(0.5)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


class Meter:
    """One browser page with the probe installed, counting the bytes the server sends."""

    def __init__(self, browser) -> None:
        self.context = browser.new_context(viewport={"width": 1500, "height": 1100})
        self.context.add_init_script(PROBE)
        self.page = self.context.new_page()
        self.page.set_default_timeout(120_000)
        self.received = 0
        self.page.on("websocket", self._watch)
        # Image maps come over HTTP (Streamlit's media files), not the websocket.
        self.page.on("response", self._media)
        self.cdp = self.context.new_cdp_session(self.page)
        self.cdp.send("Performance.enable")
        # The network stack's clock, not the page's: a busy main thread delays the page's
        # message events, but not these timestamps (seconds).
        self.cdp.send("Network.enable")
        self.sent_at: float | None = None
        self.last_received_at: float | None = None
        self.cdp.on("Network.webSocketFrameSent", self._sent)
        self.cdp.on("Network.webSocketFrameReceived", self._received)

    def _sent(self, event: dict) -> None:
        if self.sent_at is None:
            self.sent_at = event["timestamp"]

    def _received(self, event: dict) -> None:
        self.last_received_at = event["timestamp"]

    def _server_ms(self) -> float | None:
        """From the browser's first message after the press (the rerun request) to the
        server's last message: server work plus transfer."""
        if self.sent_at is None or self.last_received_at is None:
            return None
        return 1e3 * (self.last_received_at - self.sent_at)

    def _media(self, response) -> None:
        if "/media/" in response.url:
            # a response the page dropped before it was read has no body to count
            with contextlib.suppress(Exception):
                self.received += len(response.body())

    def _watch(self, ws) -> None:
        def count(payload: bytes | str) -> None:
            self.received += len(payload)

        ws.on("framereceived", count)

    def _busy_ms(self) -> float:
        metrics = self.cdp.send("Performance.getMetrics")["metrics"]
        return 1e3 * next(m["value"] for m in metrics if m["name"] == "TaskDuration")

    def _wait_settled(self, min_charts: int) -> None:
        self.page.wait_for_function(f"window.__bench.settled({min_charts})", polling=50)
        self.page.wait_for_timeout(50)  # let the last websocket events reach Python

    def open(self, url: str, min_charts: int) -> tuple[Change, int | None]:
        """Navigate and wait until settled: times from navigation start, and how many charts
        were drawn when the first one appeared."""
        self.received = 0
        self.sent_at = self.last_received_at = None
        busy0 = self._busy_ms()
        self.page.goto(url)
        self._wait_settled(min_charts)
        r = self.page.evaluate("window.__bench.result()")
        self.page.evaluate("window.__bench.disarm()")
        return self._change("first display", r, busy0), r["drawnAtFirstChart"]

    def change(self, kind: str, act: Callable[[], None], min_charts: int) -> Change:
        """Arm the probe, ``act`` (a key press), wait until settled."""
        self.page.evaluate("window.__bench.arm(null)")
        self.received = 0
        self.sent_at = self.last_received_at = None
        busy0 = self._busy_ms()
        act()
        self._wait_settled(min_charts)
        r = self.page.evaluate("window.__bench.result()")
        self.page.evaluate("window.__bench.disarm()")
        return self._change(kind, r, busy0)

    def _change(self, kind: str, r: dict, busy0: float) -> Change:
        return Change(
            kind,
            r["metric"],
            r["settled"],
            self._server_ms(),
            self._busy_ms() - busy0,
            self.received,
            tuple(r["redrawn"]),
            r["charts"],
        )

    def close(self) -> None:
        self.context.close()


def press(page, role_name: str, key: str) -> Callable[[], None]:
    import re

    def act() -> None:
        el = page.get_by_role("slider", name=re.compile(role_name)).first
        el.focus()
        page.keyboard.press(key)

    return act


def press_radio(page, label: str, key: str) -> Callable[[], None]:
    def act() -> None:
        page.get_by_role("radio", name=label, exact=True).focus()
        page.keyboard.press(key)

    return act


def explorer_changes(page) -> list[tuple[str, Callable[[], None]]]:
    """Ten configurations never seen before, from int4 asym g128."""
    bits = press(page, "^Bit width", "ArrowRight")
    down = press(page, "^Bit width", "ArrowLeft")
    group_down = press(page, "^Group size", "ArrowLeft")
    return [
        ("bits", bits),
        ("bits", bits),
        ("bits", bits),
        ("bits", bits),
        ("mode", press_radio(page, "Asymmetric", "ArrowLeft")),
        ("bits", down),
        ("bits", down),
        ("mode", press_radio(page, "Symmetric", "ArrowRight")),
        ("group", group_down),
        ("group", group_down),
    ]


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def _redrawn(changes: list[Change]) -> str:
    """The charts most changes redrew, by their Streamlit keys, e.g. ``3/6 codes,dequantized,
    error``; ``(k of n)`` when the changes differ."""
    sets = Counter(c.redrawn for c in changes)
    common, n = sets.most_common(1)[0]
    agree = "" if n == len(changes) else f" ({n} of {len(changes)})"
    return f"{len(common)}/{changes[0].charts} {','.join(common) or '-'}{agree}"


def summary(label: str, changes: list[Change], ref: float | None = None) -> str:
    settled = [c.settled_ms for c in changes]
    metric = [c.metric_ms for c in changes]
    server = [c.server_ms for c in changes if c.server_ms is not None]
    draw = [c.settled_ms - c.server_ms for c in changes if c.server_ms is not None]
    nan = float("nan")
    text = (
        f"{label:34s} metric {statistics.median(metric):6.0f} / {p95(metric):6.0f} ms"
        f"  settled {statistics.median(settled):6.0f} / {p95(settled):6.0f} ms"
        f"  [server+transfer {statistics.median(server) if server else nan:5.0f},"
        f" browser after it {statistics.median(draw) if draw else nan:5.0f},"
        f" main thread busy {statistics.median(c.busy_ms for c in changes):5.0f} ms]"
        f"  {statistics.median(c.bytes_sent for c in changes) / 1e3:8.1f} kB/change"
        f"  charts redrawn {_redrawn(changes)}"
    )
    if ref:
        text += f"  = {statistics.median(settled) / ref:4.1f}x reference"
    return text


def _matrix(tensor: Tensor):
    """The tensor ``tensor`` names, loaded in this process (for the server breakdown)."""
    from dashboard.services.io import load_safetensors_file_tensor
    from dashboard.services.model.files import bundled_model_file
    from dashboard.services.sources.synthetic import SyntheticSpec, make_synthetic

    if tensor.key == "synth4096":
        return make_synthetic(SyntheticSpec(rows=4096, cols=4096))
    name = dict(p.split("=") for p in tensor.query.split("&"))["tensor"]
    return load_safetensors_file_tensor(bundled_model_file(), name).tensor


def server_breakdown(tensor: Tensor, repeats: int = 3) -> str:
    """Median ms of each step of one explorer rerun in this process (int5 asym g128, a
        configuration the page has after one change) and the size of each figure (JSON, or an
    image map's PNG), in three
        groups: what every change pays (the original map comes from its cache, and Streamlit
        sends a reference to it), what a first display adds (the original map), and what only
        the "Prepare downloads" button pays."""
    import plotly.io as pio

    from dashboard.services.explorer import exports
    from dashboard.services.explorer.explore import explore
    from dashboard.services.explorer.heatmaps import (
        MapImage,
        ViewOptions,
        original_map,
        overview_figures,
        zoom_figure,
    )
    from dashboard.services.explorer.histogram import histogram_figure
    from dashboard.services.explorer.teaching import teaching_panel
    from quant_core import Mode, PerGroup, QuantConfig

    x = _matrix(tensor)
    steps: dict[str, dict[str, list[float]]] = {"change": {}, "first": {}, "downloads": {}}
    sizes: dict[str, int] = {}

    def timed(group: str, name: str, fn: Callable[[], object]) -> object:
        t0 = time.perf_counter()
        out = fn()
        steps[group].setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
        return out

    def json_of(group: str, name: str, fig) -> None:
        if isinstance(fig, MapImage):  # an image map: its PNG, already encoded
            sizes[name] = len(fig.png)
            return
        sizes[name] = len(timed(group, f"json {name}", lambda: pio.to_json(fig, validate=False)))

    opts = ViewOptions()
    for i in range(repeats + 1):
        cfg = QuantConfig(5 + i % 3, Mode.ASYMMETRIC, PerGroup(128))
        exp = timed("change", "explore", lambda cfg=cfg: explore(x, cfg))
        base = timed("first", "original map", lambda exp=exp: original_map(exp, opts))
        json_of("first", "original", base.figure)
        figs = timed("change", "maps", lambda e=exp, b=base: overview_figures(e, opts, b))
        for name, fig in zip(("codes", "dequant", "error"), figs.all()[1:], strict=True):
            json_of("change", name, fig)
        zoom = timed("change", "zoom", lambda exp=exp: zoom_figure(exp, 0, 0, 32))
        json_of("change", "zoom", zoom)
        hist = timed("change", "histogram", lambda exp=exp: histogram_figure(exp, 0))
        json_of("change", "histogram", hist)
        timed("change", "teaching", lambda exp=exp: teaching_panel(exp, 0))
        timed("downloads", "csv", lambda exp=exp: exports.metrics_csv(exp))
        timed("downloads", "safetensors", lambda exp=exp: exports.quantized_safetensors(exp))
        timed("downloads", "packed", lambda exp=exp: exports.packed_codes(exp))
        if i == 0:
            for group in steps.values():
                group.clear()  # warm-up
    lines = [tensor.label]
    titles = {
        "change": "every change",
        "first": "first display adds",
        "downloads": "downloads (on demand)",
    }
    for group, named in steps.items():
        med = {k: statistics.median(v) for k, v in named.items()}
        parts = ", ".join(f"{k} {v:.0f}" for k, v in med.items())
        lines.append(f"    {titles[group]}: {sum(med.values()):.0f} ms = {parts}")
    lines.append("    JSON kB: " + ", ".join(f"{k} {v / 1e3:.0f}" for k, v in sizes.items()))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", default=",".join(t.key for t in TENSORS))
    parser.add_argument("--reference-clicks", type=int, default=4)
    parser.add_argument("--no-breakdown", action="store_true", help="skip the server steps")
    args = parser.parse_args()
    chosen = [t for t in TENSORS if t.key in args.tensors.split(",")]
    breakdown = [] if args.no_breakdown else [server_breakdown(t) for t in chosen]
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} not found (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    logs = ROOT / "artifacts"
    logs.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        ref_script = Path(tmp) / "reference_page.py"
        ref_script.write_text(REFERENCE_PAGE)
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        with (
            streamlit_server(ROOT / "dashboard" / "app.py", logs / "bench-app.log") as app,
            streamlit_server(ref_script, logs / "bench-ref.log") as ref_url,
        ):
            ref_meter = Meter(browser)
            ref_first, _ = ref_meter.open(ref_url, 1)
            ref_changes: list[Change] = []
            button = ref_meter.page.get_by_role("button", name="Redraw")

            def click() -> None:
                button.focus()
                ref_meter.page.keyboard.press("Enter")

            # Warm-up: the first app page of a server imports torch and plotly, and the
            # first tensor past quant_core's eager threshold compiles its kernels (seconds,
            # once per server): paid here, so first displays below are a running server's.
            warm = Meter(browser)
            warmed, _ = warm.open(f"{app}/?src=synthetic&rows=512&cols=512&{START}", 4)
            warm.close()
            results: list[tuple[Tensor, Change, int | None, list[Change]]] = []
            for tensor in chosen:
                for _ in range(args.reference_clicks):
                    ref_changes.append(ref_meter.change("reference", click, 1))
                meter = Meter(browser)
                first, drawn = meter.open(f"{app}/?{tensor.query}&{START}", 4)
                changes = [meter.change(k, act, 4) for k, act in explorer_changes(meter.page)]
                meter.close()
                results.append((tensor, first, drawn, changes))
                print(summary(tensor.label, changes), flush=True)
            ref_meter.close()
        browser.close()

    ref = statistics.median(c.settled_ms for c in ref_changes)
    print()
    print(f"uptime load: {os.getloadavg()[0]:.2f} (other work on this machine adds noise)")
    print(
        f"server's first page (imports, kernel compile; synthetic 512x512): settled"
        f" {warmed.settled_ms:.0f} ms"
    )
    print(summary("reference: one 512x512 heatmap", ref_changes))
    print(
        f"  reference first display (a new browser page: Streamlit's and plotly.js's code, one"
        f" chart): settled {ref_first.settled_ms:.0f} ms"
    )
    ok = True
    for tensor, first, drawn, changes in results:
        med = statistics.median(c.settled_ms for c in changes)
        passed = med < tensor.settled_target_ms and first.settled_ms < FIRST_DISPLAY_TARGET_MS
        ok &= passed
        print(summary(tensor.label, changes, ref))
        for kind in ("bits", "mode", "group"):
            part = [c for c in changes if c.kind == kind]
            print(summary(f"  {kind} changes ({len(part)})", part, ref))
        print(
            f"  first display: metric {first.metric_ms:6.0f} ms, settled {first.settled_ms:6.0f} ms"
            f" (target < {FIRST_DISPLAY_TARGET_MS:.0f}), {first.bytes_sent / 1e3:.0f} kB;"
            f" charts drawn when the first appeared: {drawn}"
        )
        print(
            f"  settled median {med:.0f} ms, target < {tensor.settled_target_ms:.0f} ms:"
            f" {'PASS' if passed else 'FAIL'}"
        )
    if breakdown:
        print("\nServer steps of one rerun, in this process (median ms):")
        print("\n".join(breakdown))
    print("ALL PASS" if ok else "SOME TARGETS MISSED")


if __name__ == "__main__":
    main()
