"""Unusual values in a real browser: an upload holding NaN and Inf is explained, quantized on
its finite values only and drawn with the non-finite cells on magenta; a float16
safetensors file with two tensors shows the one picked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from playwright.sync_api import expect
from safetensors.torch import save_file

from .conftest import ARTIFACTS
from .locators import choose_option, widget
from .test_explorer_browser import metric_values, wait_for_charts, wait_idle
from .test_upload_browser import choose_upload_source

pytestmark = pytest.mark.browser

MAGENTA_FILL = "rgb(255, 0, 255)"


def nonfinite_matrix() -> np.ndarray:
    """A smooth 12 x 16 ramp with 3 NaN and 2 Inf cells placed apart."""
    rows, cols = np.mgrid[0:12, 0:16].astype(np.float32)
    a = np.sin(rows / 3) + np.cos(cols / 4)
    a[0, 2] = np.nan
    a[5, 9] = np.nan
    a[11, 15] = np.nan
    a[3, 12] = np.inf
    a[8, 4] = -np.inf
    return a


def upload(page, path: Path) -> None:
    page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))


def test_nonfinite_upload_then_float16_pick(page, app_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "with_nan.npy"
    np.save(bad, nonfinite_matrix())
    half = tmp_path / "two_half.safetensors"
    g = torch.Generator().manual_seed(0)
    save_file(
        {
            "first": torch.randn(4, 6, generator=g).half(),
            "second": torch.randn(5, 7, generator=g).half(),
        },
        str(half),
    )

    page.goto(app_url)
    wait_for_charts(page, 4)
    choose_upload_source(page)
    upload(page, bad)
    page.get_by_text("shape [12, 16]").first.wait_for()
    wait_for_charts(page, 4)
    wait_idle(page)

    warning = page.locator('[data-testid="stAlertContentWarning"]').filter(has_text="NaN and")
    text = warning.first.inner_text()
    assert "3 NaN and 2 Inf among 192 values" in text
    assert "first at (0, 2), (3, 12), (5, 9), (8, 4), (11, 15)" in text
    box = page.get_by_role("checkbox", name="Quantize the finite values only", exact=True)
    assert box.is_checked()

    charts = page.locator('[data-testid="stPlotlyChart"]')
    assert charts.count() >= 4
    for i in range(4):  # original, codes, dequantized, error: all on magenta
        fill = charts.nth(i).locator("rect.bg").first.evaluate("e => getComputedStyle(e).fill")
        assert fill == MAGENTA_FILL, (i, fill)
    values = metric_values(page)
    assert len(values) >= 12
    assert not any("nan" in v.lower() for v in values), values
    assert not page.locator('[data-testid="stException"]').count()

    ARTIFACTS.mkdir(exist_ok=True)
    charts.first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "nonfinite.png"), full_page=True)

    upload(page, half)
    picker = widget(page, "src_upload_tensor", "combobox")
    picker.wait_for()
    expect(picker).to_have_accessible_name("Tensor (2 in file)")
    wait_idle(page)
    choose_option(page, "src_upload_tensor", "second")  # its dtype and shape: the caption
    page.get_by_text("shape [5, 7]").first.wait_for()
    wait_for_charts(page, 4)
    wait_idle(page)
    caption = page.get_by_text("shape [5, 7]").first.inner_text()
    assert "two_half.safetensors · second" in caption and "float16" in caption
    # Retrying assertions: stale elements of the previous run leave when the run ends.
    expect(page.get_by_text("Stored as float16; kept as it is.")).to_have_count(1)
    nan_warning = page.locator('[data-testid="stAlertContentWarning"]').filter(has_text="NaN")
    expect(nan_warning).to_have_count(0)
    assert not any("nan" in v.lower() for v in metric_values(page))
    assert not page.locator('[data-testid="stException"]').count()
