"""AppTest: defects of the Mixed precision page's sidebar found by a user's hunt
(defects3)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from quant_core.mixed import BudgetUnit


def _controls() -> None:
    import streamlit as st

    from dashboard.components.mixed_controls import N_WEIGHTS, mixed_controls

    st.session_state[N_WEIGHTS] = 22_700_000  # MiniLM's weights, about
    st.text(mixed_controls().budget.describe())


def shown(at: AppTest) -> str:
    """The budget box's text: its value under its printf format (the frontend's sprintf
    writes ``%0.2f`` and ``%.6g`` as Python does)."""
    box = at.number_input(key="mx_value")
    return box.proto.format % box.value


def test_the_budget_box_shows_the_budget_the_page_allocates_for() -> None:
    """The box's default format, ``%0.2f``, showed a link's 4.281 bpw as "4.28" (the page
    allocated for 4.281), and 4.5 bpw turned into GB (0.01215 GB) as "0.01"."""
    at = AppTest.from_function(_controls, default_timeout=60)
    at.query_params["mx.budget"] = "4.281bpw"
    at.run()
    assert not at.exception
    assert [t.value for t in at.text] == ["4.281 bpw"]
    assert shown(at) == "4.281"
    at.radio(key="mx_unit").set_value(BudgetUnit.GIGABYTES).run()
    assert [t.value for t in at.text] == ["0.01215 GB"]
    assert shown(at) == "0.01215"
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    assert shown(at) == f"{at.number_input(key='mx_value').value:g}" == "12.15"
