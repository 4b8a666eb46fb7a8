"""Widget values that survive page switches.

Streamlit forgets a widget's value once a run does not draw it (another page ran), unless
the widget is created with ``persist_state="session"`` (``PERSIST``): every component
widget is, so a tensor or scheme picked on one page is still there on the next. Defaults
and programmatic values (from the URL, or "open in explorer") go through session state
before the widgets are drawn, never through ``value=`` as well.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import streamlit as st

from dashboard.components import url
from dashboard.services.display.options import option_labels
from dashboard.services.display.text import literal

PERSIST = "session"


def defaults(values: Mapping[str, object]) -> None:
    """Give each key its default unless it already has a value."""
    for key, value in values.items():
        st.session_state.setdefault(key, value)


def set_values(values: Mapping[str, object]) -> None:
    """Set widget values before the widgets are drawn in this run."""
    for key, value in values.items():
        st.session_state[key] = value


def name_picker(
    label: str,
    names: Sequence[str],
    key: str,
    default: str,
    detail: Callable[[str], str],
    stale: Callable[[str], str] | None = None,
    owner: str | None = None,
    tag: Callable[[str], str] | None = None,
) -> str:
    """A selectbox over ``names`` (tensors, layers) whose state may hold a name that is not
    among them (a link's, or one kept from another model): it falls back to ``default``
    (the first name when ``default`` is not among them) and, when ``stale`` is given, adds
    ``stale(name)`` to the page's link warnings. ``owner`` names what ``names`` belong to
    (a file's or folder's path): a name left from another owner the user switched away
    from falls back silently, since nobody asked for it here. Returns the picked name.

    The options are the names shortened to fit the sidebar (``option_labels``: an ellipsis
    where something is left out, ``tag(name)`` such as a stored type kept whole after it);
    ``detail(name)``, the picked name's whole line (name, shape, type, bytes), is the
    caption under the box, so nothing is cut off unseen."""
    owner_key = f"_{key}_owner"
    previous = st.session_state.get(owner_key)
    current = st.session_state.get(key)
    if current not in names:
        switched = owner is not None and previous is not None and previous != owner
        if current is not None and stale is not None and not switched:
            url.add_warning(stale(current))
        st.session_state[key] = default if default in names else names[0]
    if owner is not None:
        st.session_state[owner_key] = owner
    labels = option_labels(names, tag)
    picked = st.selectbox(
        label, list(names), format_func=labels.__getitem__, key=key, persist_state=PERSIST
    )
    st.caption(literal(detail(picked)))
    return picked
