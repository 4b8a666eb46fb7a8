// The explorer's histogram of one block: bars of its values, its quantization levels as
// lines, the clipped ranges shaded. Hover names a bin (and a level under the pointer); drag
// across to zoom into a range of values, double-click to see all of it again.
// Data: dashboard.services.explorer.histogram.histogram_payload.

const BAR = "#4c78a8";
const LEVEL = "rgba(228, 87, 86, 0.7)";
const CLIPPED = "rgba(255, 165, 0, 0.25)";
const HEIGHT = 280;
const M = { left: 52, right: 12, top: 8, bottom: 26 };

function valueTicks(lo, hi, count) {
  // d3's ticks: a step of 1, 2 or 5 x 10^k, about `count` ticks over [lo, hi].
  const step = niceStep((hi - lo) / count);
  const out = [];
  for (let i = Math.ceil(lo / step); i * step <= hi; i++) out.push(i * step);
  return { ticks: out, step };
}

function countTicks(top, count) {
  // Ticks for counts, which are whole numbers: a step of 1, 2 or 5 x 10^k and at least 1,
  // from 0 up to `top`. (valueTicks over [0, 2.1] steps by 0.5, written "0, 1, 1, 2, 2".)
  const step = Math.max(1, niceStep(top / count));
  const out = [];
  for (let c = 0; c <= top; c += step) out.push(c);
  return { ticks: out, step };
}

function countText(c) {
  // A whole count: 0, 40, 9000, 50k, 1.5M.
  if (c >= 1e6) return `${+(c / 1e6).toPrecision(3)}M`;
  if (c >= 1e4) return `${+(c / 1e3).toPrecision(3)}k`;
  return String(c);
}

function tickText(v, step) {
  const decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return Math.abs(v) >= 1e5 || (v !== 0 && Math.abs(v) < 1e-4) ? v.toPrecision(3) : v.toFixed(decimals);
}

function fullDomain(d) {
  let lo = d.lo;
  let hi = d.lo + d.width * d.counts.length;
  for (const v of d.levels || []) {
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  const pad = (hi - lo) * 0.02 || 1;
  return [lo - pad, hi + pad];
}

function paint(state) {
  const { canvas, d, domain, drag } = state;
  const dpr = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  if (width === 0) return;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(HEIGHT * dpr);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, width, HEIGHT);
  const pw = width - M.left - M.right;
  const ph = HEIGHT - M.top - M.bottom;
  const [x0, x1] = domain;
  const top = Math.max(1, ...d.counts) * 1.05;
  const X = (v) => M.left + ((v - x0) / (x1 - x0)) * pw;
  const Y = (c) => M.top + ph - (c / top) * ph;
  state.X = X;
  state.invX = (px) => x0 + ((px - M.left) / pw) * (x1 - x0);
  ctx.save();
  ctx.beginPath();
  ctx.rect(M.left, M.top, pw, ph);
  ctx.clip();
  ctx.fillStyle = CLIPPED;
  for (const [a, b] of d.clipped) ctx.fillRect(X(a), M.top, X(b) - X(a), ph);
  ctx.fillStyle = BAR;
  d.counts.forEach((c, i) => {
    if (c === 0) return;
    // Whole-pixel edges: neighbouring bars meet without an anti-aliased seam.
    const a = Math.round(X(d.lo + i * d.width));
    const b = Math.round(X(d.lo + (i + 1) * d.width));
    const y = Math.round(Y(c));
    ctx.fillRect(a, y, Math.max(1, b - a), Math.round(Y(0)) - y);
  });
  if (d.levels) {
    ctx.strokeStyle = LEVEL;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (const v of d.levels) {
      const x = Math.round(X(v)) + 0.5;
      ctx.moveTo(x, M.top);
      ctx.lineTo(x, M.top + ph);
    }
    ctx.stroke();
  }
  if (drag) {
    ctx.fillStyle = "rgba(100, 100, 100, 0.15)";
    ctx.fillRect(Math.min(drag.a, drag.b), M.top, Math.abs(drag.b - drag.a), ph);
  }
  ctx.restore();
  const ink = getComputedStyle(canvas).color;
  ctx.fillStyle = ink;
  ctx.strokeStyle = ink;
  ctx.globalAlpha = 0.8;
  ctx.font = "10px sans-serif";
  ctx.beginPath();
  ctx.moveTo(M.left, M.top + ph + 0.5);
  ctx.lineTo(M.left + pw, M.top + ph + 0.5);
  ctx.stroke();
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const xt = valueTicks(x0, x1, Math.max(2, Math.floor(pw / 80)));
  for (const v of xt.ticks) ctx.fillText(tickText(v, xt.step), X(v), M.top + ph + 5);
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  const yt = countTicks(top, 5);
  for (const c of yt.ticks) ctx.fillText(countText(c), M.left - 6, Y(c));
  ctx.globalAlpha = 1;
}

function hoverLines(state, px) {
  const { d, X } = state;
  const v = state.invX(px);
  const lines = [];
  const i = Math.floor((v - d.lo) / d.width);
  if (i >= 0 && i < d.counts.length) {
    const a = d.lo + i * d.width;
    lines.push(`${(a + d.width / 2).toPrecision(4)}: ${d.counts[i]} values`);
    lines.push(`(bin ${a.toPrecision(4)} to ${(a + d.width).toPrecision(4)})`);
  }
  if (d.levels) {
    let best = null;
    for (const l of d.levels) if (Math.abs(X(l) - px) <= 3 && (best === null || Math.abs(X(l) - px) < Math.abs(X(best) - px))) best = l;
    if (best !== null) lines.push(`level ${best.toPrecision(6)}`);
  }
  if (d.clipped.some(([a, b]) => v >= a && v <= b)) lines.push("clipped (beyond the representable range)");
  return lines;
}

function drawHistogram(root, d) {
  root.replaceChildren();
  el("div", "qlab-title", root, d.title);
  if (d.counts === null) return;
  const legend = el("div", "qlab-legend", root);
  el("span", "qlab-swatch qlab-swatch-bar", legend);
  el("span", "", legend, "values");
  if (d.levels) {
    el("span", "qlab-swatch qlab-swatch-level", legend);
    el("span", "", legend, d.levels_label);
  }
  if (d.clipped.length) {
    el("span", "qlab-swatch qlab-swatch-clipped", legend);
    el("span", "", legend, "clipped");
  }
  el("span", "qlab-hint", legend, "drag to zoom, double-click for all");
  const canvas = el("canvas", "", root);
  canvas.style.height = `${HEIGHT}px`;
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", d.title);
  const hover = hoverBox(root);
  const state = { canvas, d, domain: fullDomain(d), drag: null };
  const px = (e) => e.clientX - canvas.getBoundingClientRect().left;
  canvas.addEventListener("pointerdown", (e) => {
    state.drag = { a: px(e), b: px(e) };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointermove", (e) => {
    const x = px(e);
    if (state.drag) {
      state.drag.b = x;
      paint(state);
      return;
    }
    const lines = hoverLines(state, x);
    if (!lines.length) return hover.hide();
    const box = root.getBoundingClientRect();
    hover.show(lines, e.clientX - box.left, e.clientY - box.top);
  });
  const endDrag = () => {
    const drag = state.drag;
    state.drag = null;
    if (drag && Math.abs(drag.b - drag.a) > 4) {
      const a = state.invX(Math.min(drag.a, drag.b));
      const b = state.invX(Math.max(drag.a, drag.b));
      state.domain = [a, b];
    }
    paint(state);
  };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointerleave", () => {
    hover.hide();
    if (state.drag) endDrag();
  });
  canvas.addEventListener("dblclick", () => {
    state.domain = fullDomain(d);
    paint(state);
  });
  // Drawn at the canvas's width, and again whenever the page resizes it.
  const resize = new ResizeObserver(() => paint(state));
  resize.observe(canvas);
  root.__resize?.disconnect();
  root.__resize = resize;
  paint(state);
}

export default function (component) {
  mountChart(component, "histogram", drawHistogram);
}
