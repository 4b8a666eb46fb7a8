"""The Mixed precision page in a real browser: the bundled MiniLM's sensitivity table for two
GGUF candidates, a budget typed in the sidebar, the allocation it gives and the recipe to
take away (the llama.cpp ``--tensor-type`` file and the JSON recipe's download; MiniLM's
tensors are renamed as llama.cpp names them; three get no line, and the page says why)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from quant_core.mixed import candidate_named

from .conftest import ARTIFACTS
from .locators import widget

pytestmark = pytest.mark.browser

# Two shipped GGUF types (so that the allocation has --tensor-type lines): 4.5 and 8.5 bits
# per weight; a budget of 6 lies between them, so the allocation mixes them.
CANDIDATES = ("Q4_0", "Q8_0")
BUDGET = 6.0
TABLE_TIMEOUT = 300_000  # first visit: the model, its importance and the table (2 cores)


def wait_idle(page) -> None:
    """Until Streamlit's status widget says the script finished."""
    page.wait_for_function(
        "!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=TABLE_TIMEOUT
    )


def metric_value(page, label: str):
    """The value of the metric labelled exactly ``label``."""
    return (
        page.locator('[data-testid="stMetric"]')
        .filter(has=page.get_by_text(label, exact=True))
        .locator('[data-testid="stMetricValue"]')
    )


def test_table_budget_allocation_and_recipe(page, app_url: str) -> None:
    page.goto(f"{app_url}/mixed?mx.cands={','.join(CANDIDATES)}&mx.budget=5bpw")
    # the two candidates from the link, and nothing else (each tag has its Remove button)
    tags = page.locator(".st-key-mx_cands").get_by_role("group", name="Selected values")
    expect(tags.get_by_role("button")).to_have_count(2, timeout=TABLE_TIMEOUT)
    for name in CANDIDATES:
        label = candidate_named(name).label
        expect(tags.get_by_role("button", name=f"Remove {label}", exact=True)).to_have_count(1)
    bits = metric_value(page, "Bits per weight")
    expect(bits).to_have_count(1, timeout=TABLE_TIMEOUT)
    wait_idle(page)
    first = float(bits.inner_text())
    assert 4.5 <= first <= 5.0
    # the JSON recipe of this allocation (a download does not rerun the page)
    with page.expect_download(timeout=60_000) as info:
        page.locator(".st-key-mx_dl_json").get_by_role(
            "button", name="Recipe (JSON)", exact=True
        ).click()
    recipe = json.loads(info.value.path().read_text(encoding="utf-8"))
    assert recipe["budget"] == "5 bpw"
    assert recipe["bits_per_weight"] == pytest.approx(first, abs=5e-4)  # the metric's 3 places
    assert sorted(recipe["schemes"]) == sorted(CANDIDATES)  # a mix of both
    assert set(recipe["tensors"].values()) <= {*CANDIDATES, "stored"}

    # a new budget, typed: the allocation follows it (the table is kept, not measured again),
    # and so does the JSON recipe, once its button is this run's (not the previous run's,
    # which Streamlit keeps on the page, marked stale, until the script reaches it again)
    budget = widget(page, "mx_value", "spinbutton")
    budget.fill(f"{BUDGET:g}")
    budget.press("Enter")
    caption = page.get_by_text(re.compile(rf"^Budget {BUDGET:g} bpw = "))
    expect(caption).to_be_visible(timeout=TABLE_TIMEOUT)
    wait_idle(page)
    value = float(bits.inner_text())
    assert 5.0 < value <= BUDGET
    json_button = page.locator(".st-key-mx_dl_json")
    expect(json_button).to_have_attribute("data-stale", "false", timeout=TABLE_TIMEOUT)
    with page.expect_download(timeout=60_000) as info:
        json_button.get_by_role("button", name="Recipe (JSON)", exact=True).click()
    assert info.value.suggested_filename == f"recipe-{BUDGET:g}bpw.json"
    recipe = json.loads(info.value.path().read_text(encoding="utf-8"))
    assert recipe["budget"] == f"{BUDGET:g} bpw"
    assert recipe["bits_per_weight"] == pytest.approx(value, abs=5e-4)

    # the allocation's table, the llama.cpp export and the downloads
    # (a keyed dataframe without selections has no key class: the page's one dataframe)
    expect(page.get_by_role("heading", name="Allocation", exact=True)).to_be_visible()
    expect(page.locator("[data-testid='stDataFrame']")).to_have_count(1)
    expect(page.locator("[data-testid='stDataFrame']")).to_be_visible()
    # MiniLM's BERT names renamed as llama.cpp's converter does: lines for 37 tensors; the
    # position and token-type embeddings and the pooler get none, and the page says why
    expect(
        page.get_by_text(re.compile(r"^3 of 40 tensors have no --tensor-type line"))
    ).to_be_visible()
    expect(page.get_by_text(re.compile(r"--tensor-type '\^token_embd"))).to_be_visible()
    for key, name in (
        ("mx_dl_types", "llama.cpp --tensor-type file"),
        ("mx_dl_json", "Recipe (JSON)"),
        ("mx_dl_csv", "Table (CSV)"),
    ):
        button = page.locator(f".st-key-{key}").get_by_role("button", name=name, exact=True)
        expect(button).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "mixed.png"), full_page=True)
