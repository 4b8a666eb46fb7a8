"""The measuring half of ``benchmarks/browser.py``: a Streamlit server on a free port, and a
Chromium page with a probe that times key press to metric and to settled page on the
page's own clock, counts the bytes the server sends and names the charts it redrew (see
``browser.py``'s docstring for the definitions)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
QUIET_MS = 600


# Installed before any page script: records key presses, DOM changes, metric changes and
# the charts drawn, on the page's own clock.
PROBE = """
(() => {
  const B = window.__bench = {};
  const METRIC = '[data-testid="stMetric"], .qlab-metrics';
  const metricText = () => Array.from(
      document.querySelectorAll('[data-testid="stMetricValue"], .qlab-metric-value'))
      .map(e => e.innerText).join('|');
  const status = () => document.querySelector('[data-testid="stStatusWidget"]');
  // Charts: plotly charts, the explorer's image maps (a ".qlab-map" box with an <img>) and
  // its canvas charts (dashboard.components.charts: a "data-drawn" mark after each drawing;
  // the grid of maps and the metric cards are not charts themselves).
  const charts = () => Array.from(document.querySelectorAll(
      '[data-testid="stPlotlyChart"], .qlab-map, ' +
      '.qlab-chart:not(.qlab-maps):not(.qlab-metrics)'));
  const loaded = (c) => Array.from(c.querySelectorAll('img'))
      .some(i => i.complete && i.naturalWidth > 0);
  const drawnCharts = () => charts().filter(
      c => c.querySelector('.main-svg') || loaded(c) || c.dataset.drawn).length;
  // A chart's name: an image map's own ("codes"), its Streamlit key ("heat_codes" ->
  // "codes", "zoom"), else its position.
  const chartName = (c, all) => {
    if (c.dataset.name) return c.dataset.name;
    const box = c.closest('[class*="st-key-"]');
    const key = box && Array.from(box.classList).find(k => k.startsWith('st-key-'));
    return key ? key.slice(7).replace(/^heat_/, '') : String(all.indexOf(c));
  };
  B.arm = (t0) => {
    B.press = t0; B.before = metricText(); B.metricAt = null; B.lastMut = null;
    B.statusGoneAt = null; B.hadStatus = !!status(); B.redrawn = new Set(); B.probeMs = 0;
    B.redrawnEls = new Set();
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
    probeMs: B.probeMs,
  });
  const obs = new MutationObserver((muts) => {
    if (B.press === null) return;
    const t = performance.now();
    try { observe(muts, t); } finally { B.probeMs += performance.now() - t; }
  });
  // The observer's own work, timed: it is main-thread time the page did not ask for.
  const observe = (muts, t) => {
    // Looked up once a batch, and only when a chart is named: with the metric and drawn
    // chart counts below (each taken only until it is known), the probe's own work stays
    // small beside the page's (it was ~30 ms of main thread a change).
    let all = null;
    const name = (c) => chartName(c, all ??= charts());
    let counted = false;
    let touchesMetric = false;
    // Many mutations of a batch share a target (a parent given child after child): an
    // element is looked up once a batch; a repeat only has its added nodes looked at for
    // a metric. (An <img>'s new source and a chart's data-drawn mark are attribute
    // mutations of their own element, always looked at.)
    const seen = new Set();
    const addsMetric = (m) => Array.from(m.addedNodes).some(
      n => n.nodeType === 1 && (n.matches(METRIC) || n.querySelector(METRIC)));
    for (const m of muts) {
      const el = m.target.nodeType === 1 ? m.target : m.target.parentElement;
      if (!el) continue;
      if (seen.has(el) && m.type !== 'attributes') {
        if (B.metricAt === null && !touchesMetric) touchesMetric = addsMetric(m);
        continue;
      }
      seen.add(el);
      if (el.closest('[data-testid="stStatusWidget"]')) continue;
      counted = true;
      // The metric text is read only when a batch touches a metric or adds one:
      // reading it on every batch cost ~9 ms of main thread a change.
      if (B.metricAt === null && !touchesMetric) {
        touchesMetric = !!el.closest(METRIC) || addsMetric(m);
      }
      // A redraw changes the plot itself (not Streamlit's stale marks around it, nor a
      // hover label): a mutation inside the plotly graph, outside its hover layer. A
      // redraw is thousands of mutations: a chart already named is not looked at again
      // (this observer's own work would otherwise add ~80 ms of main thread a change).
      const c = el.closest('[data-testid="stPlotlyChart"]');
      if (c && B.redrawnEls.has(c)) continue;
      const inPlot = c && (el.closest('.js-plotly-plot') || el.querySelector('.js-plotly-plot'));
      if (inPlot && !el.closest('.hoverlayer')) {
        B.redrawnEls.add(c);
        B.redrawn.add(name(c));
      }
      // A canvas chart marks each drawing it finishes (the maps and metrics hosts too:
      // their maps are named below, by the image that changed).
      if (m.type === 'attributes' && m.attributeName === 'data-drawn'
          && !el.matches('.qlab-maps, .qlab-metrics')) {
        B.redrawn.add(name(el));
      }
      // An image map is redrawn when its <img> gets a new source.
      const map = el.tagName === 'IMG' && el.closest('.qlab-map');
      if (map) B.redrawn.add(name(map));
    }
    if (B.hadStatus && !status() && B.statusGoneAt === null) B.statusGoneAt = t;
    if (status()) { B.hadStatus = true; B.statusGoneAt = null; }
    if (!counted) return;
    B.lastMut = t;
    if (B.metricAt === null && touchesMetric) {
      const text = metricText();
      if (text !== B.before && text !== '') B.metricAt = t;
    }
    if (B.drawnAtFirstChart === null || B.allChartsAt === null) {
      const drawn = drawnCharts();
      if (B.drawnAtFirstChart === null && drawn > 0) B.drawnAtFirstChart = drawn;
      if (B.allChartsAt === null && drawn >= 4) B.allChartsAt = t;
    }
  };
  obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  // An image is drawn when it has loaded (after the mutation that set its source).
  document.addEventListener('load', (e) => {
    if (B.press === null || e.target.tagName !== 'IMG') return;
    B.lastMut = performance.now();
  }, true);
})();
""".replace("QUIET", str(QUIET_MS))


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
    probe_ms: float
    """The probe's own main-thread time (its mutation observer), part of ``busy_ms``."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Server:
    """A running ``streamlit run``: its ``url`` and process id."""

    url: str
    pid: int

    def wait_idle(
        self, cpu_share: float = 0.05, window_s: float = 1.0, limit_s: float = 120.0
    ) -> float:
        """Wait until the server and its child processes used under ``cpu_share`` of one
        core over ``window_s`` (quant_core's kernel warm-up, started by the first page,
        compiles for seconds in a background thread; on a cold Inductor cache, for tens of
        seconds, in compile worker processes running the C++ compiler); returns the seconds
        waited."""
        tick = os.sysconf("SC_CLK_TCK")

        def cpu_s() -> float:
            return sum(_tree_cpu_ticks(self.pid).values()) / tick

        start = time.monotonic()
        while time.monotonic() - start < limit_s:
            before = cpu_s()
            time.sleep(window_s)
            if cpu_s() - before < cpu_share * window_s:
                break
        return time.monotonic() - start


def _tree_cpu_ticks(root: int) -> dict[int, int]:
    """CPU ticks of ``root`` and its descendants, by pid: each one's own (utime + stime) and
    its reaped children's (cutime + cstime), so that a compiler a worker ran and waited for
    counts too."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        pid = int(proc.name)
        parents[pid] = int(fields[1])
        ticks[pid] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    tree = {root}
    grew = True
    while grew:
        kids = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= kids
        grew = bool(kids)
    return {pid: ticks[pid] for pid in tree if pid in ticks}


@contextmanager
def streamlit_server(script: Path, log: Path, launcher: bool = False) -> Iterator[Server]:
    """``streamlit run script`` on a free port until the block ends; with ``launcher``, the
    app as the README starts it, ``python -m dashboard`` (``script`` must then be the app's
    entrypoint)."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"}
    if launcher:
        if Path(script).resolve() != ROOT / "dashboard" / "app.py":
            raise ValueError(f"the launcher serves dashboard/app.py, not {script}")
        cmd = [sys.executable, "-m", "dashboard", "--server.port", str(port)]
    else:
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
            yield Server(base, proc.pid)
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
            r["probeMs"],
        )

    def close(self) -> None:
        self.context.close()


@dataclass(frozen=True)
class FirstDisplay:
    """A first display timed on a page with nothing but the probe: ms from navigation."""

    metric_ms: float
    settled_ms: float


def lean_first_display(browser, url: str, min_charts: int) -> FirstDisplay:
    """Open ``url`` in a new browser context (nothing cached) with the probe alone and wait
    until settled. No DevTools session and no listener: ``Meter``'s instrumentation (every
    websocket frame and response reported to this process over the DevTools pipe, on the
    same two cores) added about 110 ms to a first display (median of 5 each, MiniLM 384x384:
    1517 vs 1404 ms), time no user's browser spends."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    try:
        context.add_init_script(PROBE)
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(url)
        page.wait_for_function(f"window.__bench.settled({min_charts})", polling=50)
        r = page.evaluate("window.__bench.result()")
        return FirstDisplay(r["metric"], r["settled"])
    finally:
        context.close()


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
