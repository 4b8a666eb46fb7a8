"""URL state: read into widget state when the URL is new to the session, written back on
every run.

The URL is new to the session on its first run, and whenever the address differs from what
this session last wrote with ``write``: Back/Forward (Streamlit reruns the page with the
history entry's query string) or a link opened in the same tab. Then every group of widgets
(``first_run(scope)``) is seeded again from the URL, so Back restores the previous state
instead of the widgets' current values overwriting the older address. Every page writes the
URL through ``write`` so this session knows what it wrote.

A rerun started by a widget can carry an older address than this session last wrote: the
browser sends its address with the widget's new value, and quick arrow presses leave before
the previous run's address has arrived. Such a run changed a widget, which Back/Forward do
not, so it is not taken for a navigation (``end_of_run`` keeps the values to compare).

Query parameters are parsed by validating services (``source_from_query``,
``config_from_query``); anything bad falls back to defaults with a warning. Nothing from the
URL is evaluated or unpickled.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import streamlit as st

from dashboard.services.display.text import literal

_WARNINGS = "_url_warnings"
_WRITTEN = "_url_written"
_EPOCH = "_url_epoch"
_WIDGETS = "_url_widgets"
_PLAIN = (int, float, str, enum.Enum, type(None))


def query_snapshot() -> dict[str, str]:
    """The current query parameters as plain strings (the last value of repeated keys)."""
    return {k: st.query_params.get(k) for k in st.query_params}


def _plain(value: object) -> bool:
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    # bools left out: a button is True in its click's run and False in the next, whatever
    # the visitor did (and bool is an int)
    return isinstance(value, _PLAIN) and not isinstance(value, bool)


def _widget_values() -> dict[str, object]:
    """The session's widget values that are plain values (numbers, text, enum members and
    lists of them); internal keys (``_...``) left out."""
    ss = st.session_state
    return {k: v for k, v in ss.items() if not str(k).startswith("_") and _plain(v)}


def _widgets_changed() -> bool:
    """Whether a widget value differs from the end of the last run: this run was started by
    the visitor changing a widget (Back/Forward change no widget). Keys on one side only do
    not count (a widget not drawn last run, a default set this run)."""
    before = st.session_state.get(_WIDGETS)
    if not isinstance(before, dict):
        return False
    now = _widget_values()
    return any(k in before and before[k] != v for k, v in now.items())


def end_of_run() -> None:
    """Entrypoint, in a ``finally`` after the page: remember the widget values this run
    ended with, to tell a widget's rerun from Back/Forward (``_epoch``)."""
    st.session_state[_WIDGETS] = _widget_values()


def _epoch() -> int:
    """How many addresses this session has been shown that it did not write itself.

    Idempotent within a run: the first call after a Back/Forward sees the address differ
    from the last one written, counts it and takes it as written, so later calls in the same
    run (other scopes) agree. An empty query string (a bare page address) carries nothing to
    restore and does not count.
    """
    ss = st.session_state
    current = query_snapshot()
    written = ss.get(_WRITTEN)
    if written is not None and current != written and current:
        if _widgets_changed():
            # A widget's rerun, sent before the browser had the address this session wrote
            # last (quick arrow presses): its stale address is no Back/Forward, and reading
            # it would put the old values back into the widgets. The run writes its own.
            return int(ss.get(_EPOCH, 0))
        ss[_EPOCH] = ss.get(_EPOCH, 0) + 1
        ss[_WRITTEN] = current
    return int(ss.get(_EPOCH, 0))


def first_run(scope: str) -> bool:
    """True when ``scope``'s widgets should be seeded from the URL: the first time this
    session asks for ``scope``, and again after the address changed without this session
    writing it (Back/Forward). Otherwise False, so the user's changes are not overwritten."""
    flag = f"_url_read_{scope}"
    epoch = _epoch()
    if st.session_state.get(flag) == epoch + 1:
        return False
    # stored as epoch + 1 so that 0 / missing means "never read"
    st.session_state[flag] = epoch + 1
    return True


def add_warning(text: str) -> None:
    """Queue ``text`` (plain text: it may quote the link's values, and is shown literally)
    for ``show_warnings``."""
    st.session_state.setdefault(_WARNINGS, []).append(text)


def show_warnings() -> None:
    """Show (once) the warnings collected while reading the URL."""
    for text in st.session_state.pop(_WARNINGS, []):
        st.warning(literal(text), icon="⚠️")


def write(params: Mapping[str, str]) -> None:
    """Make the URL hold exactly ``params`` (only when it changed, to avoid churn: each
    change is one browser history entry) and remember it as this session's own address."""
    wanted = dict(params)
    st.session_state[_WRITTEN] = wanted
    if query_snapshot() != wanted:
        st.query_params.from_dict(wanted)
