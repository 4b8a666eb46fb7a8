"""AppTest: links the pages change say so (issue 29, item 12), the Layer outputs page keeps
its choices in its URL, and heavy links wait for a click (item 11)."""

from __future__ import annotations

import resource

import pytest
from markdown_text import plain
from page_runs import open_page
from streamlit.testing.v1 import AppTest

from dashboard.services.activations.layer import SchemeChoice

pytestmark = pytest.mark.slow



def no_errors(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [plain(e.value) for e in at.error]


def warnings(at: AppTest) -> str:
    return " ".join(plain(w.value) for w in at.warning)


def query(at: AppTest, key: str) -> str | None:
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) else value


@pytest.mark.parametrize(("asked", "used"), [("7", "6"), ("1048576", "1536")])
def test_whole_model_warns_when_it_changes_the_links_group_size(asked: str, used: str) -> None:
    at = open_page("model.py", **{"m.gran": "group", "m.group": asked, "m.bits": "4"})
    no_errors(at)
    assert at.select_slider(key="m_q_group").value == int(used)
    text = warnings(at)
    assert f"m.group={asked} does not fit" in text and f"using {used}" in text, text
    assert query(at, "m.group") == used


# --- heavy links wait for a click (item 11) --------------------------------------------------


def _big_grid_query() -> dict[str, str]:
    from dashboard.services.compare.sweep import SchemeGrid, expand_grid
    from dashboard.services.state.compare import sweep_to_query
    from dashboard.services.state.scheme import GranularityKind
    from quant_core import Format, Mode, QuantConfig, ZeroPoint

    grid = SchemeGrid(
        bits=tuple(range(2, 17)),
        modes=tuple(Mode),
        kinds=tuple(GranularityKind),
        group_sizes=(16, 32, 64, 128, 256),
        formats=(Format.INT,),
        base=QuantConfig(),
        zero_points=tuple(ZeroPoint),
    )
    assert len(expand_grid(grid, (128, 256), has_calibration=False).schemes) >= 400
    return sweep_to_query(grid)


def _button(at: AppTest, key: str):
    found = [b for b in at.button if b.key == key]
    return found[0] if found else None


def test_a_heavy_sweep_link_runs_only_when_asked(monkeypatch) -> None:
    from dashboard.components import sweep_grid

    calls: list[int] = []
    monkeypatch.setattr(sweep_grid, "run_schemes", lambda *a, **k: calls.append(1) / 0)
    at = open_page("sweep.py", **_big_grid_query())
    assert not at.exception, [e.value for e in at.exception]
    assert calls == []  # nothing ran on load
    button = _button(at, "cost_run_sweep")
    assert button is not None and button.label.startswith("Run: ~")
    text = " ".join(plain(i.value) for i in at.info) + " ".join(plain(c.value) for c in at.caption)
    assert "Limits of a session" in text and "schemes, estimated" in text


def test_a_heavy_sweep_link_runs_after_the_click(monkeypatch) -> None:
    from dashboard.components import cost_gate, sweep_grid
    from dashboard.services.cost import SessionLimits

    real = sweep_grid.run_schemes
    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_grid, "run_schemes", counted)
    monkeypatch.setattr(cost_gate, "LIMITS", SessionLimits(link_seconds=0.0))
    small = {
        "sw.bits": "4",
        "sw.modes": "symmetric",
        "sw.gran": "channel",
        "sw.fmt": "int",
        "sw.algo": "rtn",
    }
    at = open_page("sweep.py", **small)
    assert calls == [] and _button(at, "cost_run_sweep") is not None
    _button(at, "cost_run_sweep").click().run()
    no_errors(at)
    assert calls == [1]
    assert at.get("plotly_chart")
    # the results stay: the next run (any widget) does not ask again nor rerun the sweep
    at.run()
    assert calls == [1] and _button(at, "cost_run_sweep") is None


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _explored(at: AppTest) -> bool:
    """Whether the explorer drew its maps (it ran the exploration)."""
    return bool(at.get("plotly_chart")) or bool(at.get("image"))


def test_a_big_explorer_link_does_not_allocate_until_clicked() -> None:
    before = _peak_rss_bytes()
    at = open_page(
        "explorer.py",
        src="synthetic",
        rows="8000",
        cols="8000",
        bits="4",
        gran="group",
        group="1",
    )
    no_errors(at)
    button = _button(at, "cost_run_explorer")
    assert button is not None and button.label.startswith("Run: ~")
    assert not _explored(at)
    # the 8000 x 8000 float32 tensor itself is 256 MB; its exploration would be ~6 GB
    assert _peak_rss_bytes() - before < 1.5e9
    assert query(at, "rows") == "8000" and query(at, "group") == "1"  # the link stays


def test_a_big_explorer_link_runs_after_the_click(monkeypatch) -> None:
    from dashboard.components import cost_gate
    from dashboard.services.cost import SessionLimits

    monkeypatch.setattr(cost_gate, "LIMITS", SessionLimits(link_bytes=1))
    at = open_page("explorer.py", src="synthetic", rows="64", cols="64", bits="4")
    assert not _explored(at) and _button(at, "cost_run_explorer") is not None
    _button(at, "cost_run_explorer").click().run()
    no_errors(at)
    assert _explored(at)
    # interactive changes are not held back
    at.slider(key="q_bits").set_value(5).run()
    no_errors(at)
    assert _explored(at) and _button(at, "cost_run_explorer") is None


# --- the Layer outputs page: its choices in its URL, link warnings, an export ---------------

LAYER = "encoder.layer.0.intermediate.dense"


def test_layer_page_shows_the_links_warnings() -> None:
    at = open_page("layer.py", **{"l.layer": "encoder.nope", "l.scheme": "w3a3"})
    no_errors(at)
    text = warnings(at)
    assert "encoder.nope" in text and "w3a3" in text, text
    # the page runs on the defaults, and the URL says what it shows
    assert query(at, "l.layer") == LAYER and query(at, "l.scheme") == "w8a8"


def test_layer_page_link_preset_selects_it() -> None:
    """``l.preset`` was dropped in silence; a preset it names is now selected and written
    back as ``l.scheme``."""
    at = open_page("layer.py", **{"l.preset": "W4A16 g128"})
    no_errors(at)
    assert not at.warning, warnings(at)
    assert at.selectbox(key="l_scheme").value is SchemeChoice.W4A16_G128
    assert query(at, "l.scheme") == "w4a16_g128" and query(at, "l.preset") is None


@pytest.mark.parametrize("raw", ["Q4_K", "w3a3"])
def test_layer_page_warns_about_a_preset_it_cannot_use(raw: str) -> None:
    at = open_page("layer.py", **{"l.preset": raw, "l.split": "held_out"})
    no_errors(at)
    text = warnings(at)
    assert f"l.preset='{raw}'" in text and "w8a16, w8a8, w4a16_g128, w4a8" in text, text
    # the rest of the link still applies, the page runs on the default scheme
    assert query(at, "l.split") == "held_out" and query(at, "l.scheme") == "w8a8"
    assert at.get("plotly_chart")


def test_layer_page_choices_round_trip_through_the_link() -> None:
    link = {
        "l.layer": "encoder.layer.1.attention.self.key",
        "l.scheme": "custom",
        "l.w.bits": "4",
        "l.w.mode": "symmetric",
        "l.w.gran": "group",
        "l.w.group": "64",
        "l.a": "none",
        "l.ranges": "dynamic",
        "l.split": "held_out",
        "l.alpha": "0.35",
    }
    at = open_page("layer.py", **link)
    no_errors(at)
    assert not at.warning, warnings(at)
    assert at.selectbox(key="l_layer").value == link["l.layer"]
    assert at.select_slider(key="lw_q_group").value == 64
    assert at.checkbox(key="la_on").value is False
    assert at.slider(key="l_alpha").value == pytest.approx(0.35)
    for key, value in link.items():
        assert query(at, key) == value, key
    button = at.get("download_button")
    assert button and "CSV" in button[0].proto.label


def test_layer_page_warns_when_it_changes_the_links_group_size() -> None:
    at = open_page(
        "layer.py",
        **{"l.scheme": "custom", "l.w.gran": "group", "l.w.group": "7", "l.alpha": "0.33"},
    )
    no_errors(at)
    text = warnings(at)
    assert "group=7" in text and "using 6" in text, text
    assert "0.33" in text  # not a step of the α slider: ignored, said so
    assert query(at, "l.w.group") == "6"


@pytest.mark.parametrize("key", ["l.layer", "l.scheme", "l.split", "l.alpha", "l.w.bits"])
def test_layer_page_shows_hostile_link_values_literally(key: str) -> None:
    from hostile import HOSTILE, unsafe

    at = open_page("layer.py", **{"l.scheme": "custom", key: HOSTILE})
    assert not at.exception, [e.value for e in at.exception]
    assert unsafe(at) == []
    assert at.warning  # each bad value is said
