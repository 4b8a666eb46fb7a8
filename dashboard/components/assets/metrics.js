// The explorer's metrics: rows of cards (label, value, "?" with the exact number).
// Data: dashboard.services.explorer.metric_cards.metrics_payload. Cards are kept across
// reruns and only text that changed is written.

function metricCard(parent) {
  const card = el("div", "qlab-metric", parent);
  const head = el("div", "qlab-metric-label", card);
  el("span", "", head);
  helpIcon(head, "");
  el("div", "qlab-metric-value", card);
  return card;
}

const MIN_VALUE_PX = 11;

function fitValues(root) {
  // A value wider than its card is drawn smaller (its width scales with the font size),
  // down to MIN_VALUE_PX; only then would the ellipsis of the CSS cut it.
  for (const v of root.querySelectorAll(".qlab-metric-value")) {
    if (v.style.fontSize) v.style.fontSize = "";
    const full = v.scrollWidth;
    const room = v.clientWidth;
    if (room > 0 && full > room) {
      const size = parseFloat(getComputedStyle(v).fontSize);
      v.style.fontSize = `${Math.max(MIN_VALUE_PX, Math.floor((size * room) / full))}px`;
    }
  }
}

function watchWidth(root) {
  // Refit when the cards' width changes (window resized, zoomed, sidebar toggled).
  if (root.qlabFit) return;
  let width = root.clientWidth;
  root.qlabFit = new ResizeObserver(() => {
    if (root.clientWidth === width) return;
    width = root.clientWidth;
    fitValues(root);
  });
  root.qlabFit.observe(root);
  // The page's font may arrive after the first fit and draw the digits wider.
  document.fonts?.ready.then(() => fitValues(root));
}

function drawMetrics(root, data) {
  const rows = Array.from(root.children);
  data.rows.forEach((cards, i) => {
    const row = rows[i] ?? el("div", "qlab-metric-row", root);
    const columns = `repeat(${cards.length}, minmax(0, 1fr))`;
    if (row.style.gridTemplateColumns !== columns) row.style.gridTemplateColumns = columns;
    const have = Array.from(row.children);
    cards.forEach((c, j) => {
      const card = have[j] ?? metricCard(row);
      const label = card.firstChild;
      setText(label.firstChild, c.label);
      const help = label.querySelector(".qlab-help");
      const shown = c.help ? "" : "none";
      if (help.style.display !== shown) help.style.display = shown;
      help.setHelp(c.help);
      const value = card.querySelector(".qlab-metric-value");
      setText(value, c.value);
      if (value.title !== c.value) value.title = c.value;
    });
    for (const extra of have.slice(cards.length)) extra.remove();
  });
  for (const extra of rows.slice(data.rows.length)) extra.remove();
  if (root.dataset.of !== data.of) root.dataset.of = data.of;
  fitValues(root);
  watchWidth(root);
}

export default function (component) {
  mountChart(component, "metrics", drawMetrics);
}
