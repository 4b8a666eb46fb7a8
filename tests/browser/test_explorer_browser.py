"""The explorer in a real browser: four heatmaps, a slider move, metrics that follow."""

from __future__ import annotations

import math
import re

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS
from .locators import widget

pytestmark = pytest.mark.browser


def metric_values(page, of: str | None = None) -> list[str]:
    """The explorer's metric values as shown, once its cards are drawn and, with ``of``,
    once they measure a scheme whose description starts so (``"int6 "``: the cards'
    ``data-of``, ``Exploration.describe()``). The browser draws the cards when their data
    arrives, which can be a moment after the status widget says the run has finished."""
    page.wait_for_function(
        "(of) => { const m = document.querySelector('.qlab-metrics[data-drawn]');"
        " return m !== null && (of === null || (m.dataset.of || '').startsWith(of)); }",
        arg=of,
        timeout=90_000,
    )
    return page.locator(".qlab-metric-value").all_inner_texts()


DRAWN_CHARTS = """() =>
    document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg').length
    + Array.from(document.querySelectorAll('.qlab-map img'))
        .filter(i => i.complete && i.naturalWidth > 0).length
    + document.querySelectorAll(
        '.qlab-chart[data-drawn]:not(.qlab-maps):not(.qlab-metrics)').length"""


def wait_for_charts(page, n: int) -> None:
    """Until ``n`` charts are drawn: plotly charts, the explorer's image maps (a larger
    tensor's overview maps are plain images, each in a ``.qlab-map`` box) and its canvas
    charts (zoom, histogram, worked table: ``dashboard.components.charts``)."""
    page.wait_for_function(f"({DRAWN_CHARTS})() >= {n}", timeout=90_000)


def wait_idle(page) -> None:
    """Until Streamlit's status widget says the script finished."""
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=90_000
    )


def test_slider_changes_metrics(page, app_url: str) -> None:
    page.goto(f"{app_url}/?bits=4&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    heatmaps = page.locator('[data-testid="stPlotlyChart"]')
    assert heatmaps.count() >= 4
    before = metric_values(page)
    assert before and before[0] != ""

    slider = widget(page, "q_bits", "slider")
    # One step at a time: a key pressed while the page reruns can be dropped. The URL is
    # written at the end of a run, after the metrics, so once it names the new width the
    # metrics on the page are that width's.
    for bits in (5, 6, 7):
        slider.focus()
        slider.press("ArrowRight")
        page.wait_for_url(f"**bits={bits}&**", timeout=90_000)
    wait_idle(page)
    after = metric_values(page, "int7 ")
    assert after[0] != before[0]
    # 7 bits instead of 4: the MSE shown falls
    assert float(after[0]) < float(before[0])
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=True)


HEATMAP_IMAGES = """() => ['original', 'codes', 'dequantized', 'error'].map(n => {
    const img = document.querySelector('.qlab-map-' + n + ' img');
    if (img) return img.src;
    const box = document.querySelector('.st-key-heat_' + n);
    if (!box) return '';
    const drawn = box.querySelector('.imagelayer image')
      || box.querySelector('.heatmaplayer image');
    return drawn?.href?.baseVal ?? '';
  })"""


def heatmap_images(page) -> list[str]:
    """What each overview map shows: a small tensor's heatmap (plotly draws it as one
    image, ``data:``) or a larger tensor's image map (its media file's address)."""
    return page.evaluate(HEATMAP_IMAGES)


def test_bit_width_change_redraws_codes_dequantized_and_error(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=64&cols=64&bits=4&mode=asymmetric")
    wait_for_charts(page, 4)
    wait_idle(page)
    before = heatmap_images(page)
    assert all(before), "every overview map is drawn"
    slider = widget(page, "q_bits", "slider")
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url("**bits=5&**", timeout=90_000)
    wait_idle(page)
    page.wait_for_function(
        f"(() => {{ const now = ({HEATMAP_IMAGES})(); const was = {before!r};"
        " return [1, 2, 3].every(i => now[i] && now[i] !== was[i]); })()",
        timeout=90_000,
    )
    after = heatmap_images(page)
    names = ("original", "codes", "dequantized", "error")
    changed = {n for n, b, a in zip(names, before, after, strict=True) if a != b}
    assert {"codes", "dequantized", "error"} <= changed, changed


def test_bit_width_change_leaves_a_large_tensors_original_map_alone(page, app_url: str) -> None:
    # 256x256 cells: drawn as images; the original's map is the same for every bit width,
    # so its address stays, the browser neither fetches nor redraws it.
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if "/media/" in r.url else None)
    page.goto(f"{app_url}/?src=synthetic&rows=256&cols=256&bits=4&mode=asymmetric")
    wait_for_charts(page, 6)
    wait_idle(page)
    before = heatmap_images(page)
    assert all("/media/" in src and src.endswith(".png") for src in before), before
    fetched.clear()
    page.evaluate(
        """() => { const img = document.querySelector('.qlab-map-original img');
            window.__original = img; window.__originalMutations = 0;
            new MutationObserver(() => window.__originalMutations++)
              .observe(img, {attributes: true}); }"""
    )
    slider = widget(page, "q_bits", "slider")
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url("**bits=5&**", timeout=90_000)
    wait_idle(page)
    page.wait_for_function(f"({HEATMAP_IMAGES})()[1] !== {before[1]!r}", timeout=90_000)
    wait_for_charts(page, 6)
    after = heatmap_images(page)
    assert after[0] == before[0]
    assert after[1] != before[1] and after[2] != before[2] and after[3] != before[3]
    assert page.evaluate("window.__original.isConnected && window.__originalMutations === 0")
    # the three new maps were fetched, the original's was not
    names = {url.rsplit("/", 1)[-1] for url in fetched}
    assert {src.rsplit("/", 1)[-1] for src in after[1:]} <= names
    assert before[0].rsplit("/", 1)[-1] not in names


def test_large_tensor_maps_have_titles_colour_bars_and_rings(page, app_url: str) -> None:
    # 0.2% outliers of magnitude 20 (beyond the 99.5th percentile): saturated, ringed
    page.goto(
        f"{app_url}/?src=synthetic&dist=outliers&rows=256&cols=256&ofrac=0.002&omag=20"
        "&bits=4&mode=asymmetric&gran=group&group=64"
    )
    wait_for_charts(page, 6)
    wait_idle(page)
    for name, title in (
        ("original", "Original"),
        ("codes", "Quantized codes"),
        ("dequantized", "Dequantized (same scale as original)"),
        ("error", "Error = original − dequantized"),
    ):
        box = page.locator(f".qlab-map-{name}")
        text = box.inner_text()
        assert title in text, text
        img = box.locator("img")
        width = img.evaluate("i => i.getBoundingClientRect().width")
        assert width > 300, width  # the image fills its column
    original = page.locator(".qlab-map-original").inner_text()
    assert "red = positive, blue = negative" in original and "values beyond" in original
    assert "rings: cells beyond the colour range" in original
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".st-key-overview_maps").screenshot(path=str(ARTIFACTS / "image_maps.png"))


def canvas_hover(page, canvas, row: int, col: int, rows: int, cols: int) -> list[str]:
    """Hover the centre of cell ``(row, col)`` of a ``rows x cols`` canvas and read the
    chart's hover box, a line each."""
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    x = box["x"] + box["width"] * (col + 0.5) / cols
    y = box["y"] + box["height"] * (row + 0.5) / rows
    page.mouse.move(x, y)
    hover = page.locator(".qlab-chart .qlab-hover").first
    hover.wait_for(state="visible", timeout=30_000)
    return hover.inner_text().splitlines()


def significant(value: float, digits: int) -> float:
    """Half a unit in the last of ``digits`` significant digits of ``value``: how far
    ``toPrecision(digits)`` may round it."""
    if value == 0:
        return 0.0
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)


def assert_zoom_hover(page, canvas, view, row: int, col: int) -> None:
    """Hover cell ``(row, col)`` of the zoom ``canvas`` and check every line against
    ``view`` (a ``ZoomView`` of the window), within the 6-digit rounding of the hover."""
    n = len(view.rows)
    lines = canvas_hover(page, canvas, row, col, n, len(view.cols))
    assert lines[0] == f"row {view.rows.start + row}, col {view.cols.start + col}", lines
    got = dict(line.rsplit(" ", 1) for line in lines[1:])
    assert list(got) == [f.label for f in view.fields], lines
    for k, field in enumerate(view.fields):
        want = float(view.cells[row, col, k])
        tol = significant(want, field.digits) if field.style.value == "g" else 0.5
        assert abs(float(got[field.label]) - want) <= tol, (field.label, got, want)


def test_zoom_hover_names_every_value_of_a_large_tensors_cell(page, app_url: str) -> None:
    from dashboard.services.display.image import colour_levels, palette
    from dashboard.services.explorer.explore import explore
    from dashboard.services.explorer.zoom import zoom_view
    from dashboard.services.sources.synthetic import SyntheticSpec, make_synthetic
    from dashboard.services.state.scale_storage import DEFAULT_SCALE_DTYPE
    from quant_core import Mode, QuantConfig

    page.goto(f"{app_url}/?src=synthetic&rows=256&cols=256&bits=4&mode=asymmetric&gran=tensor")
    wait_for_charts(page, 5)
    wait_idle(page)
    exp = explore(
        make_synthetic(SyntheticSpec(rows=256, cols=256)),
        QuantConfig(4, Mode.ASYMMETRIC, scale_dtype=DEFAULT_SCALE_DTYPE),
    )
    view = zoom_view(exp, 0, 0, 32)
    canvases = page.locator(".st-key-zoom canvas")
    assert canvases.count() == 4
    assert_zoom_hover(page, canvases.nth(0), view, 3, 5)
    # every panel coloured as the overview images are (the same palette and levels)
    for i, panel in enumerate(view.panels):
        rgba = page.evaluate(
            """([i]) => { const c = document.querySelectorAll('.st-key-zoom canvas')[i];
                return Array.from(c.getContext('2d').getImageData(5, 3, 1, 1).data); }""",
            [i],
        )
        level = int(colour_levels(view.values(i)[3:4, 5:6], panel.limits.lo, panel.limits.hi)[0, 0])
        assert rgba[:3] == palette(panel.limits.colorscale)[level].tolist(), panel.title
    # A new bit width: the same window, redrawn; its hover reads the new scheme's cells.
    drawn = page.evaluate("document.querySelector('.qlab-zoom').dataset.drawn")
    slider = widget(page, "q_bits", "slider")
    slider.focus()
    slider.press("ArrowRight")
    metric_values(page, "int5 ")
    page.wait_for_function(
        f"document.querySelector('.qlab-zoom').dataset.drawn !== {drawn!r}", timeout=90_000
    )
    page.mouse.move(0, 0)
    five = explore(
        make_synthetic(SyntheticSpec(rows=256, cols=256)),
        QuantConfig(5, Mode.ASYMMETRIC, scale_dtype=DEFAULT_SCALE_DTYPE),
    )
    assert_zoom_hover(page, canvases.nth(0), zoom_view(five, 0, 0, 32), 3, 5)


def test_a_tap_on_a_touch_screen_names_the_zoom_cell(browser, app_url: str) -> None:
    context = browser.new_context(viewport={"width": 1200, "height": 900}, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{app_url}/?src=synthetic&rows=256&cols=256&bits=4&zr=40&zc=8")
        wait_for_charts(page, 5)
        wait_idle(page)
        canvas = page.locator(".st-key-zoom canvas").nth(3)
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        # cell (2, 30) of the 32x32 window from row 40, column 8
        page.touchscreen.tap(
            box["x"] + box["width"] * 30.5 / 32, box["y"] + box["height"] * 2.5 / 32
        )
        hover = page.locator(".st-key-zoom .qlab-hover")
        hover.wait_for(state="visible")
        assert hover.inner_text().splitlines()[0] == "row 42, col 38"
    finally:
        context.close()


def test_block_change_leaves_the_heatmaps_alone(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=64&cols=64&bits=4&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    before = heatmap_images(page)
    page.evaluate(
        """() => { window.__mutated = new Set();
        Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]')).slice(0, 4)
          .forEach((c, i) => new MutationObserver(() => window.__mutated.add(i))
            .observe(c, {subtree: true, childList: true, attributes: true})); }"""
    )
    chooser = widget(page, "v_block", "spinbutton")
    expect(chooser).to_have_accessible_name("Show channel (0–63)")
    chooser.fill("5")
    chooser.press("Enter")
    page.wait_for_url("**blk=5**", timeout=90_000)
    wait_idle(page)
    assert heatmap_images(page) == before
    assert page.evaluate("Array.from(window.__mutated)") == []


@pytest.mark.parametrize("width", [1280, 1366])
def test_metrics_fit_at_laptop_width(browser, app_url: str, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(90_000)
    try:
        page.goto(f"{app_url}/?src=synthetic&rows=256&cols=256&bits=8&gran=group&group=16")
        wait_for_charts(page, 4)
        wait_idle(page)
        cut = page.evaluate(
            """() => Array.from(document.querySelectorAll('.qlab-metric-value'))
                .flatMap(e => [e, ...e.querySelectorAll('*')])
                .filter(e => e.scrollWidth > e.clientWidth)
                .map(e => e.innerText)"""
        )
        values = metric_values(page)
        assert len(values) == 12 and "5.39e" not in " ".join(values)
        assert cut == [], f"metric values cut off at {width} px: {cut}"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"explorer-{width}.png"))
    finally:
        context.close()


@pytest.mark.parametrize("fmt", ["fp4_e2m1", "fp8_e4m3", "fp8_e5m2", "nf4"])
def test_codebook_formulas_render(page, app_url: str, fmt: str) -> None:
    page.goto(f"{app_url}/?src=example&ex=course_3x3&fmt={fmt}&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    page.wait_for_selector(".katex", timeout=90_000)
    assert page.locator(".katex").count() >= 3
    assert page.locator(".katex-error").count() == 0


def test_quick_second_download_still_gives_a_file(page, app_url: str) -> None:
    from dashboard.services.explorer.exports import read_quantized_safetensors

    page.goto(f"{app_url}/?src=example&ex=course_3x3&bits=4&mode=asymmetric&gran=channel")
    wait_for_charts(page, 4)
    wait_idle(page)
    page.get_by_role("button", name="Prepare downloads", exact=True).click()
    name = re.compile(r"^Quantized tensor \(\.safetensors, [\d,]+ bytes\)$")
    button = page.get_by_role("button", name=name)
    button.wait_for()
    with page.expect_download() as first:
        button.click()
    with page.expect_download() as second:
        button.click()  # at once: within a fraction of a second of the first
    a, b = first.value.path(), second.value.path()
    assert a.read_bytes() == b.read_bytes()
    qt = read_quantized_safetensors(a.read_bytes())
    assert tuple(qt.shape) == (3, 3) and qt.config.bits == 4


TABLE_ROWS = """(i) => {
    const t = document.querySelectorAll('[data-testid="stDataFrame"]')[i];
    return t ? t.querySelectorAll('[role="row"]').length : 0;
  }"""


def table_rows(page, index: int, at_least: int) -> int:
    """Rows (the header included) of the page's ``index``-th data grid, once it has drawn
    at least ``at_least`` of them (the grid fills in as it comes into view)."""
    tables = page.locator('[data-testid="stDataFrame"]')
    tables.nth(index).scroll_into_view_if_needed()
    page.wait_for_function(f"({TABLE_ROWS})({index}) >= {at_least}", timeout=30_000)
    return page.evaluate(f"({TABLE_ROWS})({index})")


def test_teaching_panel_lists_every_value_and_explains_symmetric_mode(page, app_url: str) -> None:
    # the course's 3x3 tensor, symmetric per-tensor: one block, all 9 values listed
    page.goto(f"{app_url}/?src=example&ex=course_3x3&bits=8&mode=symmetric&gran=tensor")
    wait_for_charts(page, 4)
    wait_idle(page)
    page.wait_for_selector(".katex", timeout=90_000)
    assert page.locator(".katex-error").count() == 0
    text = page.locator('[data-testid="stMainBlockContainer"]').inner_text()
    assert "Showing the whole tensor" in text
    assert "Symbols:" in text and "*s*" not in text  # markdown rendered, every symbol named
    for symbol in ("an original value of the block", "the block's scale", "the code stored"):
        assert symbol in text, symbol
    assert "not on the lowest code" in text  # why min(r) is not at qmin in symmetric mode
    worked = page.locator(".st-key-worked .qlab-table")
    worked.wait_for(timeout=30_000)
    assert worked.locator("tr").count() == 10  # the header and every one of the 9 values
    assert worked.locator("th").all_inner_texts()[:2] == ["index in block", "r"]


def test_teaching_panel_shows_every_per_channel_scale(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=example&ex=course_3x3&bits=8&mode=asymmetric&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    text = page.locator('[data-testid="stMainBlockContainer"]').inner_text()
    assert "Row (channel) 0" in text and "one of 3 blocks" in text
    assert "Every block's scale" in text
    assert table_rows(page, 0, 4) == 4  # the header and the 3 channels' scales at once


def test_zoom_has_colour_bars_and_labels_that_do_not_overlap(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=256&cols=256&bits=4&mode=asymmetric&zs=64")
    wait_for_charts(page, 6)
    wait_idle(page)
    zoom = page.locator(".st-key-zoom")
    zoom.scroll_into_view_if_needed()
    assert zoom.locator(".qlab-bar").count() == 4  # one per panel
    overlaps = page.evaluate(
        """() => {
        const zoom = document.querySelector('.st-key-zoom .qlab-zoom');
        const frame = zoom.getBoundingClientRect();
        const out = [];
        const apart = (a, b) => a.right <= b.left + 0.5 || b.right <= a.left + 0.5
          || a.bottom <= b.top + 0.5 || b.bottom <= a.top + 0.5;
        const boxes = (sel) => Array.from(zoom.querySelectorAll(sel))
          .map(t => t.getBoundingClientRect()).filter(b => b.width > 0);
        // tick labels of each axis, apart from each other and inside the chart
        for (const axis of zoom.querySelectorAll('.qlab-xaxis, .qlab-yaxis')) {
          const ticks = Array.from(axis.querySelectorAll('span'))
            .map(t => t.getBoundingClientRect());
          if (ticks.length < 2) out.push(['few ticks', ticks.length]);
          for (let i = 1; i < ticks.length; i++) {
            if (!apart(ticks[i - 1], ticks[i])) out.push(['ticks', axis.className, i]);
          }
          for (const t of ticks) {
            if (t.left < frame.left - 0.5 || t.right > frame.right + 0.5) out.push(['cut', t.left]);
          }
        }
        // the four colour bar notes (convention, limits, count beyond) side by side, apart
        const notes = boxes('.qlab-note');
        if (notes.length !== 4) out.push(['notes', notes.length]);
        for (let i = 0; i < notes.length; i++) {
          for (let j = i + 1; j < notes.length; j++) {
            if (!apart(notes[i], notes[j])) out.push(['note', i, j]);
          }
        }
        // four square panels, side by side
        const panels = boxes('canvas');
        if (panels.length !== 4) out.push(['panels', panels.length]);
        for (const p of panels) {
          if (Math.abs(p.width - p.height) > 1 || p.width < 100) {
            out.push(['panel', p.width, p.height]);
          }
        }
        return out;
      }"""
    )
    assert overlaps == [], overlaps
    ARTIFACTS.mkdir(exist_ok=True)
    zoom.screenshot(path=str(ARTIFACTS / "zoom.png"))


def test_histogram_hover_names_a_bin_and_drag_zooms_into_values(page, app_url: str) -> None:
    from dashboard.services.explorer.explore import explore
    from dashboard.services.explorer.histogram import histogram_view
    from dashboard.services.sources.examples import Example, example_tensor
    from quant_core import QuantConfig

    page.goto(f"{app_url}/?src=example&ex=course_3x3&bits=2&mode=asymmetric&gran=tensor")
    wait_for_charts(page, 6)
    wait_idle(page)
    hist = page.locator(".st-key-histogram .qlab-histogram")
    hist.scroll_into_view_if_needed()
    text = hist.inner_text()
    assert "9 values, 4 of 4 codes used" in text and "4 quantization levels" in text
    canvas = hist.locator("canvas")
    box = canvas.bounding_box()
    full = canvas.screenshot()
    # the course tensor's largest value, 728.6, is in the last bin, at the right of the plot
    page.mouse.move(box["x"] + box["width"] * 0.96, box["y"] + box["height"] * 0.9)
    hover = hist.locator(".qlab-hover")
    hover.wait_for(state="visible", timeout=30_000)
    view = histogram_view(explore(example_tensor(Example.COURSE_3X3), QuantConfig(2)), 0)
    last = f"{view.counts[-1]} values"
    assert last in hover.inner_text() and "to 728.6)" in hover.inner_text()
    # drag across the left half: a narrower range of values fills the plot; double-click: all
    y = box["y"] + box["height"] * 0.5
    page.mouse.move(box["x"] + box["width"] * 0.1, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.4, y, steps=4)
    page.mouse.up()
    page.mouse.move(0, 0)  # away: no hover box over the plot
    assert canvas.screenshot() != full
    page.mouse.dblclick(box["x"] + box["width"] * 0.5, y)
    page.mouse.move(0, 0)
    assert canvas.screenshot() == full


def test_a_link_value_the_page_changes_is_warned(page, app_url: str) -> None:
    # group=100 does not divide 256 columns: the page picks a group size that does, and says
    page.goto(f"{app_url}/?src=synthetic&rows=64&cols=256&bits=4&gran=group&group=100")
    wait_for_charts(page, 4)
    wait_idle(page)
    warnings = page.locator('[data-testid="stAlert"]').all_inner_texts()
    assert any("group" in w.lower() and "100" in w for w in warnings), warnings
    assert "group=100" not in page.url


def test_a_page_load_asks_only_the_app_server(page, app_url: str) -> None:
    """Everything the page loads (scripts, fonts, icons, maps) comes from the app's own
    server: it works offline and tells no third party who opened it."""
    asked: list[str] = []
    failed: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: failed.append(f"{r.failure} {r.url}"))
    page.goto(f"{app_url}/?src=synthetic&rows=512&cols=512&bits=4")
    wait_for_charts(page, 4)
    wait_idle(page)
    page.wait_for_timeout(500)
    assert asked
    outside = [u for u in asked if not u.startswith((app_url, "data:", "blob:"))]
    assert not outside, outside
    # Every request answered, the launcher's preloads (dashboard.preload) included.
    assert not failed, failed
    assert any("/static/js/BidiComponent." in u for u in asked)
