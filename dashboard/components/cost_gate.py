"""Heavy work a link restored waits for a click (issue 29: a shared link could start
minutes of CPU or gigabytes of memory on load).

A page calls ``link_restored(scope)`` when it seeds its widgets from the address, and
``allow(scope, key, cost)`` just before its work. The first work key after seeding is the
link's; while the page would run that key and its estimate is heavy
(``LIMITS.heavy``), it shows the cost and a button ("Run: ~N s, ~M MB") instead. Anything
the visitor changes gives another key, which runs as usual: interactive use is unchanged.
"""

from __future__ import annotations

import streamlit as st

from dashboard.services.cost import LIMITS, WorkCost
from dashboard.services.display.counts import counted

__all__ = ["allow", "link_restored", "visitor_asked"]

_LINK = "_cost_link_"
_PENDING = "_pending"  # no work key starts with "_"
_CONFIRMED = "_cost_confirmed"
_ASKED = "_cost_asked_"


def visitor_asked(scope: str) -> None:
    """The visitor's own click is about to open ``scope`` from an address (e.g. "Open in
    the explorer"): its next seeding from that address is no link to hold back."""
    st.session_state[_ASKED + scope] = True


def link_restored(scope: str) -> None:
    """The page's widgets were just seeded from a link: its next work is the link's."""
    if st.session_state.pop(_ASKED + scope, False):
        return
    st.session_state[_LINK + scope] = _PENDING


def allow(scope: str, key: str, cost: WorkCost, what: str = "this") -> bool:
    """Whether the page may run the work named ``key`` now. False (with the estimate, the
    session's limits and a "Run" button drawn) while ``key`` is the one a link restored,
    its ``cost`` is heavy and the visitor has not pressed the button; ``what`` names the
    work in the message ("this sweep")."""
    ss = st.session_state
    if ss.get(_LINK + scope) is _PENDING:
        ss[_LINK + scope] = key
    confirmed: set[str] = ss.setdefault(_CONFIRMED, set())
    if ss.get(_LINK + scope) != key or key in confirmed or not LIMITS.heavy(cost):
        return True
    st.info(
        f"The link restored {what}: about {cost.elements:,} elements × "
        f"{counted(cost.schemes, 'scheme')}, estimated {cost.label()}. It runs when you ask for it."
    )
    if scope != "sweep":  # the sweep page states them under its form
        st.caption(LIMITS.describe())
    if st.button(f"Run: {cost.label()}", key=f"cost_run_{scope}", type="primary"):
        confirmed.add(key)
        return True
    return False
