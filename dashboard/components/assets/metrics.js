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
      setText(card.querySelector(".qlab-metric-value"), c.value);
    });
    for (const extra of have.slice(cards.length)) extra.remove();
  });
  for (const extra of rows.slice(data.rows.length)) extra.remove();
  if (root.dataset.of !== data.of) root.dataset.of = data.of;
}

export default function (component) {
  mountChart(component, "metrics", drawMetrics);
}
