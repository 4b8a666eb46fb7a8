"""The explorer in a real browser: four heatmaps, a slider move, metrics that follow."""

from __future__ import annotations

import pytest

from .conftest import ARTIFACTS

pytestmark = pytest.mark.browser


def metric_values(page) -> list[str]:
    return page.locator('[data-testid="stMetricValue"]').all_inner_texts()


def wait_for_charts(page, n: int) -> None:
    page.wait_for_function(
        f"document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .main-svg').length >= {n}",
        timeout=90_000,
    )


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


HEATMAP_IMAGES = """() => Array.from(document.querySelectorAll(
    '[data-testid="stPlotlyChart"]')).slice(0, 4).map(
    c => (c.querySelector('.imagelayer image') || c.querySelector('.heatmaplayer image') || {})
      .href?.baseVal ?? '')"""


def heatmap_images(page) -> list[str]:
    """The drawn image of each overview map: a small tensor's heatmap (plotly draws it as
    one image) or a larger tensor's PNG (an image trace)."""
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
    page.wait_for_function(f"({HEATMAP_IMAGES})()[1] !== {before[1]!r}", timeout=90_000)
    after = heatmap_images(page)
    names = ("original", "codes", "dequantized", "error")
    changed = {n for n, b, a in zip(names, before, after, strict=True) if a != b}
    assert {"codes", "dequantized", "error"} <= changed, changed


def test_bit_width_change_leaves_a_large_tensors_original_map_alone(page, app_url: str) -> None:
    # 256x256 cells: drawn as images; the original's map is the same for every bit width,
    # so Streamlit sends only a reference to it and the browser keeps the drawn one.
    frames: list[str] = []
    page.on(
        "websocket",
        lambda ws: ws.on(
            "framereceived",
            lambda f: frames.append(f.decode("latin-1") if isinstance(f, bytes) else f),
        ),
    )
    page.goto(f"{app_url}/?src=synthetic&rows=256&cols=256&bits=4&mode=asymmetric")
    wait_for_charts(page, 4)
    wait_idle(page)
    before = heatmap_images(page)
    assert all(src.startswith("data:image/png;base64,") for src in before), before
    frames.clear()
    page.evaluate(
        """() => { const plot = document.querySelector(
              '[data-testid="stPlotlyChart"] .js-plotly-plot');
            window.__original = plot; window.__originalMutations = 0;
            new MutationObserver(() => window.__originalMutations++)
              .observe(plot, {subtree: true, childList: true, attributes: true}); }"""
    )
    slider = page.get_by_role("slider", name="Bit width")
    slider.focus()
    slider.press("ArrowRight")
    page.wait_for_url("**bits=5&**", timeout=90_000)
    wait_idle(page)
    page.wait_for_function(f"({HEATMAP_IMAGES})()[1] !== {before[1]!r}", timeout=90_000)
    after = heatmap_images(page)
    assert after[0] == before[0]
    assert after[1] != before[1] and after[2] != before[2] and after[3] != before[3]
    assert page.evaluate("window.__original.isConnected && window.__originalMutations === 0")
    # the new maps came over the websocket, the original's did not (each map's hover names
    # what it shows)
    sent = "".join(frames)
    assert "code: see the colour bar" in sent and "error: see the colour bar" in sent
    assert "original: see the colour bar" not in sent


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
    zoom = page.locator('[data-testid="stPlotlyChart"]').nth(4)
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


def test_metrics_fit_at_laptop_width(browser, app_url: str) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
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
        assert cut == [], f"metric values cut off at 1280 px: {cut}"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "explorer-1280.png"))
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
