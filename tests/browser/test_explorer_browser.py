"""The explorer in a real browser: four heatmaps, a slider move, metrics that follow."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def metric_values(page) -> list[str]:
    return page.locator('[data-testid="stMetricValue"]').all_inner_texts()


DRAWN_CHARTS = """() =>
    document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg').length
    + Array.from(document.querySelectorAll('[class*="st-key-heat_"] [data-testid="stImage"] img'))
        .filter(i => i.complete && i.naturalWidth > 0).length"""


def wait_for_charts(page, n: int) -> None:
    """Until ``n`` charts are drawn: plotly charts, and the explorer's image maps (a larger
    tensor's overview maps are plain images)."""
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

    slider = page.get_by_role("slider", name="Bit width")
    # One step at a time: a key pressed while the page reruns can be dropped. The URL is
    # written at the end of a run, after the metrics, so once it names the new width the
    # metrics on the page are that width's.
    for bits in (5, 6, 7):
        slider.focus()
        slider.press("ArrowRight")
        page.wait_for_url(f"**bits={bits}&**", timeout=90_000)
    wait_idle(page)
    after = metric_values(page)
    assert after[0] != before[0]
    # 7 bits instead of 4: the MSE shown falls
    assert float(after[0]) < float(before[0])
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=True)


HEATMAP_IMAGES = """() => ['original', 'codes', 'dequantized', 'error'].map(n => {
    const box = document.querySelector('.st-key-heat_' + n);
    if (!box) return '';
    const img = box.querySelector('[data-testid="stImage"] img');
    if (img) return img.getAttribute('src') || '';
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
    slider = page.get_by_role("slider", name="Bit width")
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
        """() => { const img = document.querySelector('.st-key-heat_original img');
            window.__original = img; window.__originalMutations = 0;
            new MutationObserver(() => window.__originalMutations++)
              .observe(img, {attributes: true}); }"""
    )
    slider = page.get_by_role("slider", name="Bit width")
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
        box = page.locator(f".st-key-heat_{name}")
        text = box.inner_text()
        assert title in text, text
        img = box.locator('[data-testid="stImage"] img')
        width = img.evaluate("i => i.getBoundingClientRect().width")
        assert width > 300, width  # the image fills its column
    original = page.locator(".st-key-heat_original").inner_text()
    assert "red = positive, blue = negative" in original and "values beyond" in original
    assert "rings: cells beyond the colour range" in original
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".st-key-overview_maps").screenshot(path=str(ARTIFACTS / "image_maps.png"))


def hover_text(page, chart, x: float, y: float) -> str:
    """Hover at ``(x, y)`` (fractions of the chart's box) and read plotly's hover label."""
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    page.mouse.move(box["x"] + box["width"] * x, box["y"] + box["height"] * y)
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.hoverlayer')).some(h => h.textContent)",
        timeout=30_000,
    )
    return page.evaluate(
        "Array.from(document.querySelectorAll('.hoverlayer')).map(h => h.textContent).join(' ')"
    )


def test_zoom_hover_names_every_value_of_a_large_tensors_cell(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=256&cols=256&bits=4&mode=asymmetric")
    wait_for_charts(page, 5)
    wait_idle(page)
    zoom = page.locator('.st-key-zoom [data-testid="stPlotlyChart"], .st-key-zoom').first
    # the first of the four panels, inside its plot area
    text = hover_text(page, zoom, 0.12, 0.45)
    for name in ("original", "code", "dequantized", "error", "scale", "zero point"):
        assert name in text, text


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
    chooser = page.get_by_label("Show channel (0–63)")
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
            """() => Array.from(document.querySelectorAll('[data-testid="stMetricValue"]'))
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
    page.get_by_role("button", name="Prepare downloads").click()
    button = page.get_by_role("button", name="Quantized tensor (.safetensors")
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
    """Rows (the header included) of the page's ``index``-th table, once it has drawn at
    least ``at_least`` of them (the grid fills in as it comes into view)."""
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
    assert table_rows(page, 0, 10) == 10  # the header and every one of the 9 values


def test_teaching_panel_shows_every_per_channel_scale(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=example&ex=course_3x3&bits=8&mode=asymmetric&gran=channel&axis=0")
    wait_for_charts(page, 4)
    wait_idle(page)
    text = page.locator('[data-testid="stMainBlockContainer"]').inner_text()
    assert "Row (channel) 0" in text and "one of 3 blocks" in text
    assert "Every block's scale" in text
    assert table_rows(page, 1, 4) == 4  # the header and the 3 channels' scales at once


def test_zoom_has_colour_bars_and_labels_that_do_not_overlap(page, app_url: str) -> None:
    page.goto(f"{app_url}/?src=synthetic&rows=256&cols=256&bits=4&mode=asymmetric&zsize=64")
    wait_for_charts(page, 6)
    wait_idle(page)
    zoom = page.locator(".st-key-zoom")
    zoom.scroll_into_view_if_needed()
    assert zoom.locator(".colorbar").count() == 4  # one per panel
    overlaps = page.evaluate(
        """() => {
        const zoom = document.querySelector('.st-key-zoom');
        const out = [];
        for (const axis of zoom.querySelectorAll('.xaxislayer-above, .yaxislayer-above')) {
          const boxes = Array.from(axis.querySelectorAll('.xtick text, .ytick text'))
            .map(t => t.getBoundingClientRect()).filter(b => b.width > 0);
          for (let i = 1; i < boxes.length; i++) {
            const a = boxes[i - 1], b = boxes[i];
            const apart = a.right <= b.left + 0.5 || b.right <= a.left + 0.5
              || a.bottom <= b.top + 0.5 || b.bottom <= a.top + 0.5;
            if (!apart) out.push([a.left, a.top, b.left, b.top]);
          }
        }
        // The four colour bar titles (limits and count beyond) side by side, apart.
        const titles = Array.from(zoom.querySelectorAll('.colorbar .cbtitle'))
          .map(t => t.getBoundingClientRect()).filter(b => b.width > 0);
        if (titles.length !== 4) out.push(['titles', titles.length]);
        for (let i = 0; i < titles.length; i++) {
          for (let j = i + 1; j < titles.length; j++) {
            const a = titles[i], b = titles[j];
            if (!(a.right <= b.left || b.right <= a.left)) out.push(['title', i, j]);
          }
        }
        // Row labels inside the figure, not cut at its left edge.
        const left = zoom.querySelector('.main-svg').getBoundingClientRect().left;
        for (const t of zoom.querySelectorAll('.ytick text')) {
          const b = t.getBoundingClientRect();
          if (b.width > 0 && b.left < left) out.push(['row label cut', t.textContent]);
        }
        return out;
      }"""
    )
    assert overlaps == [], overlaps


def test_a_link_value_the_page_changes_is_warned(page, app_url: str) -> None:
    # group=100 does not divide 256 columns: the page picks a group size that does, and says
    page.goto(f"{app_url}/?src=synthetic&rows=64&cols=256&bits=4&gran=group&group=100")
    wait_for_charts(page, 4)
    wait_idle(page)
    warnings = page.locator('[data-testid="stAlert"]').all_inner_texts()
    assert any("group" in w.lower() and "100" in w for w in warnings), warnings
    assert "group=100" not in page.url
