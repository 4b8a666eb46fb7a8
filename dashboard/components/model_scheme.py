"""The whole-model page's scheme: activations (none, a preset or custom), the weight
scheme, activation ranges and the algorithm. Returns a ``ModelScheme``; its widgets are
seeded from the ``m.`` URL keys when the address is new to the session."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from dashboard.components import persist, url
from dashboard.components.algorithm import algorithm_picker
from dashboard.components.config import apply_config, config_picker, remember_link_config
from dashboard.components.persist import PERSIST
from dashboard.services.display.labels import scheme_label
from dashboard.services.display.text import literal
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.model import (
    ACTIVATION_PREFIX,
    PREFIX,
    ActivationChoice,
    ModelScheme,
    RangeKind,
    model_scheme_from_query,
)
from quant_core import QuantConfig, SchemePreset

__all__ = ["model_scheme_picker", "preset_notice", "seed_model_scheme_from_url"]

_PICKED = "_m_weight_picked"  # the weight scheme last picked, named when a preset replaces it

_A8 = SchemePreset.W8A8.scheme.activation
_RANGE_LABELS = {
    RangeKind.DYNAMIC: "dynamic (each sentence batch's own ranges)",
    RangeKind.STATIC: "static (calibrated on the calibration sentences)",
}


def preset_notice(label: str, preset_weight: QuantConfig | None, picked: QuantConfig) -> str:
    """What choosing the preset ``label`` did to the weights, in one Markdown line: the
    preset's weight scheme replaces the one picked (``picked``), or keeps it in float."""
    if preset_weight is None:
        return f"Preset {label} keeps the weights in float (your weight scheme is not used)."
    if preset_weight == picked:
        return f"Preset {label} quantizes the weights as {scheme_label(picked)}, as you had."
    return (
        f"Preset {label} sets the weights too: **{scheme_label(preset_weight)}** replaces "
        f"your **{scheme_label(picked)}** (kept: choose none or custom activations to get "
        "it back)."
    )


def _apply_algorithm(choice: AlgorithmChoice) -> None:
    persist.set_values(
        {
            "m_a_algo": choice.algorithm,
            "m_a_damp": float(choice.gptq_damp),
            "m_a_actord": choice.act_order,
        }
    )


def seed_model_scheme_from_url() -> None:
    """Put the link's ``m.`` scheme into the widgets (each bad part warns and keeps its
    default)."""
    parsed = model_scheme_from_query(url.query_snapshot())
    if parsed.empty:
        return
    for problem in parsed.problems:
        url.add_warning(f"Ignored the link's {problem}.")
    if parsed.choice is not None:
        persist.set_values({"m_act": parsed.choice})
    # The pickers drawn in this run warn about each value they change; a preset draws no
    # picker (it fixes both sides), so nothing is remembered for one to warn about later.
    preset = parsed.choice is not None and parsed.choice.preset is not None
    if parsed.weight is not None:
        apply_config(parsed.weight, "m_")
        if not preset:
            remember_link_config(parsed.weight, "m_", PREFIX)
    if parsed.activation is not None:
        apply_config(parsed.activation, "ma_")
        if parsed.choice is ActivationChoice.CUSTOM:
            remember_link_config(parsed.activation, "ma_", ACTIVATION_PREFIX)
    if parsed.ranges is not None:
        persist.set_values({"m_ranges": parsed.ranges})
    if parsed.algorithm is not None:
        _apply_algorithm(parsed.algorithm)


def model_scheme_picker(
    cols: int, group_sizes: Sequence[int], default_weight, *, bundled: bool
) -> ModelScheme:
    """Draw the scheme widgets in the current container. ``bundled``: the model's code is
    at hand (the bundled MiniLM), so activations can be quantized and GPTQ/AWQ calibrated;
    otherwise only the weights and a data-free algorithm."""
    persist.defaults({"m_act": ActivationChoice.NONE, "m_ranges": RangeKind.DYNAMIC})
    choice = ActivationChoice.NONE
    if bundled:
        choice = st.selectbox(
            "Activations (the linear layers' inputs)",
            list(ActivationChoice),
            format_func=lambda c: c.label,
            key="m_act",
            persist_state=PERSIST,
            help="A preset fixes weights and activations together (W8A16: the course's "
            "W8A16LinearLayer; W8A8: int8 per-token inputs). Custom: pick both.",
        )
    preset = choice.preset
    if preset is None:
        st.subheader("Weights")
        weight = config_picker(cols, prefix="m_", default=default_weight, group_sizes=group_sizes)
        st.session_state[_PICKED] = weight
    else:
        weight = preset.scheme.weight
        picked = st.session_state.get(_PICKED, default_weight)
        st.info(preset_notice(preset.label, weight, picked), icon="ℹ️")
    activation = preset.scheme.activation if preset is not None else None
    if choice is ActivationChoice.CUSTOM:
        st.subheader("Activations")
        activation = config_picker(cols, prefix="ma_", default=_A8, activation=True)
    ranges = RangeKind.DYNAMIC
    if activation is not None:
        ranges = st.radio(
            "Activation ranges",
            list(RangeKind),
            format_func=_RANGE_LABELS.__getitem__,
            key="m_ranges",
            persist_state=PERSIST,
        )
    st.subheader("Algorithm")
    algorithm = algorithm_picker(weight, prefix="m_", has_calibration=bundled)
    try:
        return ModelScheme.of(
            choice, weight=weight, activation=activation, ranges=ranges, algorithm=algorithm
        )
    except ValueError as exc:
        # the radio's value is the URL's m.ranges: name it, as the link warnings do
        st.warning(literal(f"Using dynamic ranges, not {PREFIX}ranges=static: {exc}."))
        return ModelScheme.of(choice, weight=weight, activation=activation, algorithm=algorithm)
