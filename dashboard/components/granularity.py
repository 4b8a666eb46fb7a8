"""The scheme picker's granularity widgets: per tensor / channel / group for a weight, per
tensor / token / feature for an activation matrix ``[tokens, features]``."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from dashboard.components.fitted import fit_choice, forget_fitted
from dashboard.components.persist import PERSIST
from dashboard.services.state.group_size import nearest_size
from quant_core import Granularity, PerChannel, PerGroup, PerTensor

__all__ = [
    "activation_granularity",
    "activation_kind",
    "divisors",
    "forget_fitted_group",
    "weight_granularity",
]

# The options' labels are the same whatever the tensor: the browser keeps a radio's choice
# as its label, so options renamed under the same key (a weight, then an activation source)
# showed nothing selected and then fell back to the first option. The widget's own label
# names the activation terms instead.
_GRAN_LABELS = {"tensor": "Per tensor", "channel": "Per channel", "group": "Per group"}
_AXIS_LABELS = ("0: one scale per row", "1: one per column")
# An activation matrix is [tokens, features]: a row is one token, a column one feature, so
# per-token is PerChannel(0) and per-feature PerChannel(1).
_ACT_GRAN_LABELS = {
    "tensor": "Per tensor",
    "token": "Per token (one scale per row)",
    "feature": "Per feature (one scale per column)",
}
_ACT_GRANULARITY = {"tensor": PerTensor(), "token": PerChannel(0), "feature": PerChannel(1)}


def divisors(n: int) -> list[int]:
    """All divisors of ``n`` ascending: the group sizes a row of ``n`` values allows."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def activation_kind(gran: Granularity) -> str:
    """The activation radio's value for ``gran``; a per-group scheme has no activation
    option and shows as per tensor."""
    if isinstance(gran, PerChannel):
        return "token" if gran.axis % 2 == 0 else "feature"
    return "tensor"


def activation_granularity(p: str) -> Granularity:
    """Per tensor, per token (rows) or per feature (columns) of ``[tokens, features]``."""
    kind = st.radio(
        "Granularity",
        list(_ACT_GRAN_LABELS),
        format_func=_ACT_GRAN_LABELS.__getitem__,
        key=f"{p}q_agran",
        persist_state=PERSIST,
        horizontal=True,
    )
    return _ACT_GRANULARITY[kind]


def weight_granularity(
    p: str, cols: int, group_sizes: Sequence[int] | None, activation_terms: bool = False
) -> Granularity:
    """Per tensor, per channel (with its axis) or per group (a size that divides ``cols``,
    or one of ``group_sizes``). ``activation_terms``: the matrix is an activation
    ``[tokens, features]``, so the widgets' labels name the channels per token (axis 0) and
    per feature (axis 1); the choices, their labels and their keys are the same."""
    kind = st.radio(
        "Granularity (a channel: a token or a feature)" if activation_terms else "Granularity",
        list(_GRAN_LABELS),
        format_func=_GRAN_LABELS.__getitem__,
        key=f"{p}q_gran",
        persist_state=PERSIST,
        horizontal=True,
    )
    if kind == "channel":
        axis = st.radio(
            "Scale per token (rows, 0) or per feature (columns, 1)"
            if activation_terms
            else "Channel axis (keeps its own scale)",
            [0, 1],
            format_func=lambda a: _AXIS_LABELS[a],
            key=f"{p}q_axis",
            persist_state=PERSIST,
            horizontal=True,
        )
        return PerChannel(axis=int(axis))
    if kind == "group":
        options = sorted(group_sizes) if group_sizes else divisors(cols)
        _fit_group(p, options)
        group = st.select_slider(
            "Group size" if group_sizes else f"Group size (divisors of {cols})",
            options,
            key=f"{p}q_group",
            persist_state=PERSIST,
        )
        return PerGroup(group_size=int(group))
    return PerTensor()


def forget_fitted_group(p: str = "") -> None:
    """The picker with prefix ``p`` is given a scheme (a link, Back, a preset's button): its
    group size is that scheme's choice, even when it equals a size set for a narrower
    tensor before."""
    forget_fitted(f"{p}q_group")


def _fit_group(p: str, options: Sequence[int]) -> None:
    """Put the group size into ``options`` before the slider is drawn: the one the visitor
    (or a link) chose when it is offered, else the option nearest to it (the smaller on a
    tie); the choice survives a visit to a narrower tensor (see ``fitted``)."""
    fit_choice(f"{p}q_group", int, lambda chosen: nearest_size(chosen, options))
