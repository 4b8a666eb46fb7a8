"""AppTest: defects of the Mixed precision page found by a user's hunt (defects4)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from quant_core.mixed import BudgetUnit


def _controls() -> None:
    import streamlit as st

    from dashboard.components.mixed_controls import N_WEIGHTS, mixed_controls

    st.session_state[N_WEIGHTS] = 22_700_000  # MiniLM's weights, about
    st.text(mixed_controls().budget.describe())


def test_the_budget_steps_by_a_size_that_suits_its_unit() -> None:
    """The +/- step was 0.25 in every unit: one click on MiniLM's 0.01277 GB budget made
    it 0.26 GB, twenty times the model; now a step is 0.25 bits per weight's worth."""
    at = AppTest.from_function(_controls, default_timeout=60).run()
    assert not at.exception
    assert at.number_input(key="mx_value").step == 0.25
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    assert at.number_input(key="mx_value").step == 0.5  # 0.71 MB rounded down to 1-2-5
    at.radio(key="mx_unit").set_value(BudgetUnit.GIGABYTES).run()
    box = at.number_input(key="mx_value")
    assert box.step == 0.0005
    box.increment().run()
    assert [t.value for t in at.text] == ["0.01327 GB"]  # 0.01277 + 0.0005


def test_a_budget_survives_a_round_trip_through_the_units() -> None:
    """Each change of unit rounded the converted value to 4 digits, and the next one
    converted that: 4.281 bpw came back from GB and MB as 4.282."""
    at = AppTest.from_function(_controls, default_timeout=60)
    at.query_params["mx.budget"] = "4.281bpw"
    at.run()
    for unit in (BudgetUnit.GIGABYTES, BudgetUnit.MEGABYTES, BudgetUnit.BITS_PER_WEIGHT):
        at.radio(key="mx_unit").set_value(unit).run()
    assert not at.exception
    assert [t.value for t in at.text] == ["4.281 bpw"]
    # a value typed in MB is the one a round trip returns to, not the bpw before it
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    at.number_input(key="mx_value").set_value(12.34).run()
    at.radio(key="mx_unit").set_value(BudgetUnit.GIGABYTES).run()
    at.radio(key="mx_unit").set_value(BudgetUnit.BITS_PER_WEIGHT).run()
    at.radio(key="mx_unit").set_value(BudgetUnit.MEGABYTES).run()
    assert [t.value for t in at.text] == ["12.34 MB"]
    assert at.number_input(key="mx_value").value == pytest.approx(12.34, abs=0)
