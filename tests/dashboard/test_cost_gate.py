"""The gate that holds a heavy link's work until the visitor clicks (issue 29, item 11)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _page() -> None:
    import streamlit as st

    from dashboard.components import cost_gate
    from dashboard.services.cost import estimate

    mode = st.session_state.get("mode", "link")
    if not st.session_state.get("seeded"):  # the first run: seeded from the address
        st.session_state["seeded"] = True
        if mode == "asked":
            cost_gate.visitor_asked("t")
        cost_gate.link_restored("t")
    key = st.session_state.get("work", "heavy")
    cost = estimate(8000 * 8000 if key.startswith("heavy") else 100)
    st.session_state["ran"] = cost_gate.allow("t", key, cost, "this test")


def _run(**state) -> AppTest:
    at = AppTest.from_function(_page, default_timeout=30)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def test_a_heavy_link_waits_and_runs_after_the_click() -> None:
    at = _run()
    assert at.session_state["ran"] is False
    (button,) = at.button
    assert button.label == "Run: ~128 s, ~6,144 MB"
    button.click().run()
    assert at.session_state["ran"] is True
    at.run()  # confirmed: later runs of the same work are not asked again
    assert at.session_state["ran"] is True and not at.button


def test_other_work_than_the_links_runs_at_once() -> None:
    at = _run()
    assert at.session_state["ran"] is False
    at.session_state["work"] = "heavy but another key"
    at.run()
    assert at.session_state["ran"] is True and not at.button


def test_light_links_and_the_visitors_own_clicks_run_at_once() -> None:
    assert _run(work="light").session_state["ran"] is True
    at = _run(mode="asked")
    assert at.session_state["ran"] is True and not at.button
