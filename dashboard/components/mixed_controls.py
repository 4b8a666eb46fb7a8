"""The mixed-precision page's sidebar: candidate schemes, the budget, the rules and the
importance switch, seeded from the URL; and the Ray address the server is set to."""

from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError

from dashboard.components import url
from dashboard.components.model_source import model_query
from dashboard.services.display.text import literal
from dashboard.services.mixed.runner import RAY_ENV, RAY_SECRET, ray_address_setting
from dashboard.services.mixed.state import budget_step, mixed_from_query, mixed_to_query
from quant_core.mixed import ALL_CANDIDATES, Budget, BudgetUnit, Candidate

__all__ = ["CANDIDATES", "MixedControls", "mixed_controls", "ray_address"]

CANDIDATES = {c.name: c for c in ALL_CANDIDATES}
_UNITS = {
    BudgetUnit.BITS_PER_WEIGHT: "bits per weight",
    BudgetUnit.MEGABYTES: "MB",
    BudgetUnit.GIGABYTES: "GB",
}


@dataclass(frozen=True)
class MixedControls:
    """What the sidebar holds: ``candidates`` (possibly empty), ``budget``, ``floor`` (a
    candidate name or ``None``), ``pins_text`` (as typed) and ``weigh`` (use input
    importance)."""

    candidates: tuple[Candidate, ...]
    budget: Budget
    floor: str | None
    pins_text: str
    weigh: bool

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.candidates)


_UNIT_WAS = "_mx_unit_was"
_TYPED = "_mx_typed"
"""Session key: a ``_Typed``, so that switching units and back gives the typed value again,
not its rounded conversion (4.281 bpw read 4.282 after GB and MB)."""


@dataclass(frozen=True)
class _Typed:
    """The budget as the user last typed it (``value`` in ``unit``) and the value the box
    shows for it now, converted to another unit."""

    unit: BudgetUnit
    value: float
    shown: float
_FLOOR_WANTED = "_mx_floor_wanted"
"""Session key: the floor's scheme while it is not a candidate (``_keep_floor``)."""
N_WEIGHTS = "_mx_n_weights"
"""Session key: how many weights the page's model has (set by the page once it knows), so
that a change of the budget's unit keeps the same size."""
MIN_BUDGET = 1e-9
"""The box's least value in any unit: a tiny folder's budget in GB is some 1e-6."""


def _in_unit(value: float, was: BudgetUnit, now: BudgetUnit, n: int) -> float:
    """``value`` in ``was`` as a value in ``now`` of the same size, to 4 significant
    digits (4.5 bits per weight of MiniLM's 22.7M weights is 12.77 MB)."""
    if was is now:
        return value
    bits = Budget(float(value), was).total_bits(n)
    per = {BudgetUnit.BITS_PER_WEIGHT: n, BudgetUnit.MEGABYTES: 8e6, BudgetUnit.GIGABYTES: 8e9}
    return max(float(f"{bits / per[now]:.4g}"), MIN_BUDGET)


def _convert_budget() -> None:
    """``mx_unit``'s callback: the budget's value in the new unit, the same size. Without
    it the number stayed and meant another size: "4.5 MB", below anything the candidates
    reach. Converted from the value as typed (``_TYPED``) while the box still shows its
    conversion, so a round trip through other units ends where it began."""
    ss = st.session_state
    was, now, n = ss.get(_UNIT_WAS), ss.get("mx_unit"), ss.get(N_WEIGHTS)
    value = ss.get("mx_value")
    if not isinstance(was, BudgetUnit) or not isinstance(now, BudgetUnit) or was is now:
        return
    if not isinstance(n, int) or n <= 0 or not isinstance(value, int | float) or value <= 0:
        return
    typed = ss.get(_TYPED)
    if not (isinstance(typed, _Typed) and typed.shown == value):  # typed anew since
        typed = _Typed(was, float(value), float(value))
    shown = _in_unit(typed.value, typed.unit, now, n)
    ss["mx_value"] = shown
    ss[_TYPED] = _Typed(typed.unit, typed.value, shown)


def _keep_floor(names: list[str]) -> None:
    """Before the floor's box: a floor whose scheme left the candidates is set aside
    (``_FLOOR_WANTED``; the box shows "none" and says why) and comes back with the scheme.
    Streamlit reset the box to "none" for good: taking Q8_0 out and back lost the floor
    without a word. Picking a floor by hand forgets the one set aside."""
    ss = st.session_state
    current, wanted = ss.get("mx_floor"), ss.get(_FLOOR_WANTED)
    if isinstance(current, str) and current != "none" and current not in names:
        ss[_FLOOR_WANTED] = wanted = current
        ss["mx_floor"] = "none"
    elif current == "none" and wanted in names:
        ss["mx_floor"] = wanted
        ss.pop(_FLOOR_WANTED, None)
        wanted = None
    if wanted is not None:
        st.caption(f"No floor while {literal(wanted)} is not a candidate: it comes back with it.")


def _forget_floor() -> None:
    """The floor box's callback: a floor picked by hand replaces the one set aside."""
    st.session_state.pop(_FLOOR_WANTED, None)


def mixed_controls() -> MixedControls:
    """Draw the sidebar (keys ``mx_*``), seeded from the URL when it is new to the session,
    and write the URL back."""
    if url.first_run("mixed"):
        q = mixed_from_query(url.query_snapshot())
        st.session_state["mx_cands"] = list(q.candidates)
        st.session_state["mx_unit"] = q.budget.unit
        st.session_state["mx_value"] = float(q.budget.value)
        st.session_state["mx_floor"] = q.floor or "none"
        if q.pins is not None:
            st.session_state["mx_pins"] = q.pins
        if q.weigh is not None:
            st.session_state["mx_importance"] = q.weigh
        for problem in q.problems:
            url.add_warning(f"Ignored the link's {problem}.")
    with st.sidebar:
        st.header("Candidates and budget")
        names = st.multiselect(
            "Candidate schemes",
            list(CANDIDATES),
            key="mx_cands",
            format_func=lambda n: CANDIDATES[n].label,
        )
        unit = st.radio(
            "Budget in", list(_UNITS), key="mx_unit", format_func=_UNITS.__getitem__,
            horizontal=True, on_change=_convert_budget,
        )  # fmt: skip
        st.session_state[_UNIT_WAS] = unit
        # shown to nine significant digits (what a link carries), as the budget is used:
        # the default "%0.2f" showed a link's 4.281 bpw as 4.28, and 4.5 bpw of MiniLM
        # turned into GB as 0.01; "%.6g" showed 1234.5678 MB as 1234.57
        # the step is 0.25 bits per weight in every unit (in MB or GB rounded to 1, 2 or 5
        # times a power of ten): 0.25 GB was 20 times MiniLM's size
        value = st.number_input(
            "Budget",
            min_value=MIN_BUDGET,
            step=budget_step(unit, st.session_state.get(N_WEIGHTS)),
            format="%.9g",
            key="mx_value",
        )
        _keep_floor(names)
        floor = st.selectbox(
            "Embeddings and output head: at least",
            ["none", *names],
            key="mx_floor",
            on_change=_forget_floor,
            help="Tensors named like embed*, token_embd, wte, wpe, lm_head or output keep at least "
            "this scheme's bits per weight.",
        )
        pins_text = st.text_area(
            "Pins (one PATTERN = scheme per line)",
            key="mx_pins",
            placeholder=r"layers\.0\. = int8_pc",
            help="A regular expression searched in tensor names; the first matching line wins.",
        )
        st.session_state.setdefault("mx_importance", True)  # seeded above from the link
        weigh = st.toggle(
            "Weigh errors by input importance",
            key="mx_importance",
            help="diag(XᵀX) of each layer's inputs on calibration text, as llama.cpp's "
            "importance matrix: errors in the inputs the model uses count more.",
        )
    budget = Budget(float(value), unit)
    chosen_floor = None if floor == "none" else floor
    # the pins and the toggle too: a shared link without them allocated differently
    url.write(
        {**model_query(), **mixed_to_query(budget, names, chosen_floor, pins_text or "", weigh)}
    )
    return MixedControls(
        tuple(CANDIDATES[n] for n in names), budget, chosen_floor, pins_text or "", weigh
    )


def ray_address() -> str | None:
    """The Ray address from ``QLAB_RAY_ADDRESS`` or the ``ray_address`` secret (off:
    ``None``)."""
    try:
        secret = st.secrets.get(RAY_SECRET)
    except StreamlitSecretNotFoundError:  # no secrets.toml: the usual case
        secret = None
    return ray_address_setting(os.environ.get(RAY_ENV), secret)
