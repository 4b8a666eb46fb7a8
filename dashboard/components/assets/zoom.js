// The explorer's zoom window: four panels (original, codes, dequantized, error) of the same
// cells, each a canvas with one pixel a cell, coloured from the palette the server sent;
// hovering a cell shows its exact numbers. Data: dashboard.services.explorer.zoom.zoom_payload.
// The panels, axes and handlers are built once per window (its place, size and titles) and
// kept across reruns: a new scheme repaints the canvases and rewrites what changed.

function paintPanel(canvas, d, cells, k, panel) {
  const { nrows, ncols } = d;
  const pal = panel.palette;
  const levels = pal.length / 3;
  const lo = panel.lo;
  const span = panel.hi - panel.lo;
  if (canvas.width !== ncols) canvas.width = ncols;
  if (canvas.height !== nrows) canvas.height = nrows;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(ncols, nrows);
  const px = img.data;
  for (let i = 0; i < nrows * ncols; i++) {
    const v = cells[i * k + panel.field];
    let r, g, b;
    if (Number.isNaN(v)) {
      [r, g, b] = d.nan;
    } else {
      // display.image.colour_levels: round((v - lo) / (hi - lo) * (levels - 1)), clamped.
      let level = Math.round(((v - lo) / span) * (levels - 1));
      level = Math.min(levels - 1, Math.max(0, level));
      r = pal[3 * level];
      g = pal[3 * level + 1];
      b = pal[3 * level + 2];
    }
    px[4 * i] = r;
    px[4 * i + 1] = g;
    px[4 * i + 2] = b;
    px[4 * i + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

function buildZoom(root, d) {
  // The window's frame: title, panel titles, axes, canvases, colour-bar slots, hover. The
  // handlers read the cells of the latest drawing (root.qlabZoom), not of this one.
  const { nrows, ncols, row0, col0 } = d;
  root.replaceChildren();
  el("div", "qlab-title", root, d.title);
  const grid = el("div", "qlab-grid", root);
  el("div", "", grid);
  for (const p of d.panels) el("div", "qlab-ptitle", grid, p.title);
  const yaxis = el("div", "qlab-yaxis", grid);
  for (const t of niceTicks(row0, row0 + nrows, 6)) {
    const s = el("span", "", yaxis, String(t));
    s.style.top = `${((t - row0 + 0.5) / nrows) * 100}%`;
  }
  const hover = hoverBox(root);
  const canvases = d.panels.map((p) => {
    const box = el("div", "qlab-plot", grid);
    const canvas = el("canvas", "", box);
    canvas.style.aspectRatio = `${ncols} / ${nrows}`;
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", `${p.title}, ${d.title}`);
    return canvas;
  });
  el("div", "", grid);
  for (let i = 0; i < d.panels.length; i++) {
    const xaxis = el("div", "qlab-xaxis", grid);
    for (const t of niceTicks(col0, col0 + ncols, 5)) {
      const s = el("span", "", xaxis, String(t));
      s.style.left = `${((t - col0 + 0.5) / ncols) * 100}%`;
    }
  }
  el("div", "", grid);
  for (let i = 0; i < d.panels.length; i++) el("div", "qlab-bar-slot", grid);
  const cellAt = (canvas, e) => {
    const rect = canvas.getBoundingClientRect();
    const c = Math.floor(((e.clientX - rect.left) / rect.width) * ncols);
    const r = Math.floor(((e.clientY - rect.top) / rect.height) * nrows);
    return r >= 0 && r < nrows && c >= 0 && c < ncols ? [r, c] : null;
  };
  for (const canvas of canvases) {
    const show = (e) => {
      const at = cellAt(canvas, e);
      if (at === null) return hover.hide();
      const [r, c] = at;
      const { cells, fields } = root.qlabZoom;
      const base = (r * ncols + c) * fields.length;
      const lines = [`row ${row0 + r}, col ${col0 + c}`];
      fields.forEach((f, j) => lines.push(`${f.label} ${formatNumber(cells[base + j], f.digits, f.style)}`));
      const box = root.getBoundingClientRect();
      hover.show(lines, e.clientX - box.left, e.clientY - box.top);
    };
    // pointerdown too: a tap on a touch screen names the cell tapped.
    canvas.addEventListener("pointermove", show);
    canvas.addEventListener("pointerdown", show);
    // A lifted finger "leaves" too: on touch the box stays until the next tap.
    canvas.addEventListener("pointerleave", (e) => e.pointerType === "touch" || hover.hide());
  }
}

function drawZoom(root, d) {
  const cells = decodeFloat32(d.cells);
  const k = d.fields.length;
  const frame = JSON.stringify([d.title, d.row0, d.col0, d.nrows, d.ncols, d.panels.map((p) => p.title)]);
  if (root.dataset.frame !== frame) {
    buildZoom(root, d);
    root.dataset.frame = frame;
  }
  root.qlabZoom = { cells, fields: d.fields };
  const canvases = root.querySelectorAll("canvas");
  const slots = root.querySelectorAll(".qlab-bar-slot");
  d.panels.forEach((p, i) => {
    paintPanel(canvases[i], d, cells, k, p);
    colourBarIn(slots[i], p);
  });
}

export default function (component) {
  mountChart(component, "zoom", drawZoom);
}
