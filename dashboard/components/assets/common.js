// Shared by the browser-drawn charts (prepended to each component's module): decoding,
// colours and colour bars, number formats, ticks and the hover box.

function decodeFloat32(b64) {
  // base64 little-endian float32 -> Float32Array (exact values, no JSON float text).
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Float32Array(bytes.buffer);
}

function formatNumber(v, digits, style) {
  // d3's ".6g" is toPrecision(6) ("0.0123400", "1.23400e-7"); ".0f" is toFixed(0).
  if (!Number.isFinite(v)) return String(v);
  return style === "g" ? v.toPrecision(digits) : v.toFixed(digits);
}

function niceStep(raw) {
  // The smallest step of 1, 2 or 5 x 10^k that is at least `raw` (d3's tick rule).
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
}

function niceTicks(start, stop, count) {
  // Integer positions in [start, stop) at a step of 1, 2 or 5 x 10^k, about `count` of them.
  const step = Math.max(1, niceStep(Math.max(1, stop - start) / count));
  const out = [];
  for (let t = Math.ceil(start / step) * step; t < stop; t += step) out.push(t);
  return out;
}

function setText(e, text) {
  // Written only when it differs: an unchanged text is no DOM change to lay out again.
  if (e.textContent !== text) e.textContent = text;
}

function el(tag, cls, parent, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

function mountChart(component, kind, draw) {
  // The chart's root in the component's element (made once, kept across reruns), drawn
  // with the new data, then marked: tools (and the benchmark) watch the mark for redraws.
  const { data, parentElement } = component;
  let root = parentElement.querySelector(`:scope > .qlab-${kind}`);
  if (root === null) root = el("div", `qlab-chart qlab-${kind}`, parentElement);
  draw(root, data);
  root.dataset.drawn = String(Number(root.dataset.drawn || 0) + 1);
}

function paletteGradient(pal) {
  // A flat [r, g, b, ...] palette as a CSS gradient of 11 of its colours.
  const n = pal.length / 3;
  const stops = [];
  for (let s = 0; s <= 10; s++) {
    const i = Math.round((s / 10) * (n - 1));
    stops.push(`rgb(${pal[3 * i]},${pal[3 * i + 1]},${pal[3 * i + 2]}) ${((100 * i) / (n - 1)).toFixed(1)}%`);
  }
  return `linear-gradient(to right, ${stops.join(", ")})`;
}

function colourBar(parent, bar) {
  // A horizontal colour bar (services.explorer.colour.colourbar_payload): the gradient,
  // its tick values under it, the note's lines below.
  const box = el("div", "qlab-bar", parent);
  el("div", "qlab-gradient", box).style.background = paletteGradient(bar.palette);
  const ticks = el("div", "qlab-ticks", box);
  for (const t of bar.ticks) el("span", "", ticks, t);
  const note = el("div", "qlab-note", box);
  for (const line of bar.note) el("div", "", note, line);
  return box;
}

function colourBarIn(slot, bar) {
  // `slot` holds the colour bar of `bar` (its palette, ticks and note), drawn again only
  // when they differ from what it holds.
  const key = JSON.stringify([bar.palette, bar.ticks, bar.note]);
  if (slot.dataset.bar === key) return;
  slot.dataset.bar = key;
  slot.replaceChildren();
  colourBar(slot, bar);
}

function hoverBox(root) {
  // One box per chart, shown by show(lines, x, y) at the pointer (chart coordinates).
  const box = el("div", "qlab-hover", root);
  box.style.display = "none";
  return {
    show(lines, x, y) {
      box.textContent = lines.join("\n");
      box.style.display = "block";
      const w = root.clientWidth;
      const left = x + 14 + box.offsetWidth > w ? Math.max(0, x - 14 - box.offsetWidth) : x + 14;
      box.style.left = `${left}px`;
      box.style.top = `${y + 14}px`;
    },
    hide() {
      box.style.display = "none";
    },
  };
}

function helpIcon(parent, text) {
  // A "?" that shows `text` in a box while hovered or focused (keyboard users tab to it).
  const icon = el("span", "qlab-help", parent, "?");
  icon.tabIndex = 0;
  icon.setAttribute("role", "img");
  const tip = el("span", "qlab-tip", icon);
  const set = (t) => {
    icon.setAttribute("aria-label", t);
    tip.textContent = t;
  };
  set(text);
  icon.setHelp = (t) => {
    if (icon.getAttribute("aria-label") !== t) set(t);
  };
  return icon;
}
