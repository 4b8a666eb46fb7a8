"""A GGUF in a model folder opened in a real browser: the picker lists its tensors with
stored type, shape and bytes, and the explorer draws the scale map the file stores (Q4_K's
6-bit block scales once the lab decodes K-quant bytes; until then MXFP4's E8M0 exponents,
another two-level GGUF type the lab already decodes)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import gguf
import numpy as np
import pytest
import torch
from playwright.sync_api import expect

from dashboard.services.display.sizes import compact_bytes
from quant_core import quantize
from quant_core.files import open_quantized
from quant_core.files.gguf_file import lab_decodes
from quant_core.formats.gguf_types import ggml_type

from .conftest import ARTIFACTS, ROOT, _free_port, _wait_healthy
from .locators import choose_option
from .test_explorer_browser import wait_idle

pytestmark = pytest.mark.browser

TYPE = "Q4_K" if lab_decodes("Q4_K") else "MXFP4"
SCALE_MAP = "sc" if TYPE == "Q4_K" else "e"  # dashboard.services.explorer.stored.scale_maps


def _blocks(x: torch.Tensor) -> np.ndarray:
    """``x`` quantized to ``TYPE`` by the lab (llama.cpp's recipe), as GGUF block bytes."""
    qt = quantize(x, ggml_type(TYPE).config)
    return np.frombuffer(qt.to_ggml_bytes(), dtype=np.uint8).reshape(x.shape[0], -1)


@pytest.fixture(scope="module")
def served_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An app server whose model roots hold one GGUF file."""
    root = tmp_path_factory.mktemp("roots")
    x = torch.randn(256, 512, generator=torch.Generator().manual_seed(0))
    writer = gguf.GGUFWriter(root / "tiny.gguf", "llama")
    writer.add_block_count(1)
    writer.add_tensor("blk.0.ffn_up.weight", _blocks(x), raw_dtype=gguf.GGMLQuantizationType[TYPE])
    writer.add_tensor("output_norm.weight", np.ones(512, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "QLAB_MODEL_ROOTS": str(root)}
    ARTIFACTS.mkdir(exist_ok=True)
    with (ARTIFACTS / "streamlit-quantized-file-test.log").open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dashboard",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.headless",
                "true",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_healthy(base, proc)
            yield base, root
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_a_gguf_in_a_model_folder_shows_its_stored_scale_map(page, served_root) -> None:
    base, root = served_root
    path = quote(str(root / "tiny.gguf"), safe="")
    page.goto(f"{base}/?src=folder&folder={path}&tensor=blk.0.ffn_up.weight")
    page.locator(f".st-key-scale_map_{SCALE_MAP} [data-testid='stPlotlyChart']").wait_for(
        timeout=120_000
    )
    wait_idle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    metric = page.locator('[data-testid="stMetric"]').filter(
        has=page.get_by_text("Stored type", exact=True)
    )
    assert metric.locator('[data-testid="stMetricValue"]').inner_text() == TYPE
    assert page.get_by_text("Stored scales: what each level holds", exact=True).is_visible()
    # the picker lists every tensor of the file with its stored type
    nbytes = open_quantized(root / "tiny.gguf").nbytes
    label = f"Tensor (2 in GGUF (llama.cpp), {compact_bytes(nbytes, 1)})"
    sidebar.get_by_role("combobox", name=label, exact=True).click()
    options = [" ".join(o.inner_text().split()) for o in page.get_by_role("option").all()]
    assert options == [f"blk.0.ffn_up.weight {TYPE}", "output_norm.weight F32"], options
    page.keyboard.press("Escape")
    # the picked one's whole line under the box: its shape and bytes (the box cut them off)
    caption = sidebar.get_by_text(f"blk.0.ffn_up.weight · {TYPE} · [256, 512] · ")
    assert caption.is_visible()


def test_an_uploaded_gguf_shows_what_it_stores_and_a_hostile_one_is_refused(
    page, app_url: str, tmp_path: Path
) -> None:
    good = tmp_path / "small.gguf"
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(1))
    writer = gguf.GGUFWriter(good, "llama")
    blocks = gguf.quants.quantize(x.numpy(), gguf.GGMLQuantizationType.Q4_0)
    writer.add_tensor("blk.0.ffn_down.weight", blocks, raw_dtype=gguf.GGMLQuantizationType.Q4_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    evil = tmp_path / "evil.gguf"
    evil.write_bytes(b"GGUF\x03\0\0\0" + (2**40).to_bytes(8, "little") + b"\0" * 64)

    page.goto(app_url)
    wait_idle(page)
    choose_option(page, "src_kind", "Upload a file")
    wait_idle(page)
    uploader = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
    uploader.set_input_files(str(good))
    value = page.locator('[data-testid="stMetric"]').filter(
        has=page.get_by_text("Stored type", exact=True)
    )
    value.locator('[data-testid="stMetricValue"]').get_by_text("Q4_0", exact=True).wait_for()
    wait_idle(page)

    uploader.set_input_files(str(evil))
    error = page.locator('[data-testid="stAlertContentError"]').first
    error.wait_for()
    assert "evil.gguf" in error.inner_text() and "claims" in error.inner_text()
    expect(page.get_by_text("Still showing the previous tensor")).to_have_count(1)
    # retrying: the main area may still be redrawing when the sidebar's note shows
    expect(value.locator('[data-testid="stMetricValue"]')).to_have_text("Q4_0", timeout=90_000)
