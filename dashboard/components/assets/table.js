// A small static table (the teaching panel's worked values): every row visible, numbers
// right-aligned as the server formatted them. Data: dashboard.services.display.table.
function drawTable(root, data) {
  const table = el("table", "");
  const head = el("tr", "", el("thead", "", table));
  data.columns.forEach((c, j) => {
    el("th", data.numeric[j] ? "qlab-num" : "", head, c);
  });
  const body = el("tbody", "", table);
  for (const row of data.rows) {
    const tr = el("tr", "", body);
    row.forEach((v, j) => el("td", data.numeric[j] ? "qlab-num" : "", tr, v));
  }
  root.replaceChildren(table);
}

export default function (component) {
  mountChart(component, "table", drawTable);
}
