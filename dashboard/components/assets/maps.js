// The explorer's four overview maps of a larger tensor: each a PNG the server drew (colours
// only; every value of a cell is in the zoom window) with its title, colour bar and note.
// Data: dashboard.services.explorer.map_image.maps_payload. The panels are kept across
// reruns and only what changed is touched: an image whose address is the same (the
// original map, the same for every bit width) is not fetched, decoded or laid out again.
// New images are loaded and decoded off-page first and shown together, so the four maps
// never disagree (a map still showing the last scheme beside three of the new one) and a
// map never blanks while its new image loads.

const MAP_HELP = "colours only here: every value of a cell is in the zoom";

function mapPanel(name) {
  const p = el("div", `qlab-map qlab-map-${name}`);
  p.dataset.name = name;
  const head = el("div", "qlab-map-head", p);
  el("span", "qlab-title", head);
  helpIcon(head, MAP_HELP);
  el("div", "qlab-subtitle", p);
  el("img", "", p);
  el("div", "qlab-bar-slot", p);
  el("div", "qlab-caption", p);
  return p;
}

function swapImages(root, wanted) {
  // wanted: [img, src] pairs. Shown together once every new image has decoded (or
  // failed: a broken image then shows as such rather than holding the others back).
  const token = (root.qlabSwap = (root.qlabSwap ?? 0) + 1);
  const loads = wanted.map(([, src]) => {
    const probe = new Image();
    probe.src = src;
    return probe.decode().catch(() => undefined);
  });
  Promise.all(loads).then(() => {
    if (root.qlabSwap !== token) return; // a newer rerun's images are on their way
    for (const [img, src] of wanted) img.setAttribute("src", src);
  });
}

function drawMaps(root, data) {
  const wanted = [];
  let grid = root.querySelector(":scope > .qlab-maps-grid");
  if (grid === null) grid = el("div", "qlab-maps-grid", root);
  const panels = Array.from(grid.children);
  data.maps.forEach((m, i) => {
    let p = panels[i];
    if (p === undefined || p.dataset.name !== m.name) {
      const fresh = mapPanel(m.name);
      if (p === undefined) grid.appendChild(fresh);
      else grid.replaceChild(fresh, p);
      p = fresh;
    }
    setText(p.querySelector(".qlab-title"), m.title);
    setText(p.querySelector(".qlab-subtitle"), m.subtitle);
    const img = p.querySelector("img");
    const alt = `${m.title} map`;
    if (img.alt !== alt) img.alt = alt;
    const ratio = `${m.width} / ${m.height}`;
    if (img.dataset.ratio !== ratio) {
      img.dataset.ratio = ratio;
      img.style.aspectRatio = ratio; // the box is kept while a new image loads
    }
    if (img.getAttribute("src") !== m.src) wanted.push([img, m.src]);
    colourBarIn(p.querySelector(".qlab-bar-slot"), m.bar);
    setText(p.querySelector(".qlab-caption"), m.marked);
  });
  for (const extra of panels.slice(data.maps.length)) extra.remove();
  if (wanted.length) swapImages(root, wanted);
}

export default function (component) {
  mountChart(component, "maps", drawMaps);
}
