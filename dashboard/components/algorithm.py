"""The algorithm picker: RTN, GPTQ, AWQ or HQQ, GPTQ's dampening and act-order, and the
calibration sentences GPTQ/AWQ learn from. Returns an ``AlgorithmChoice``; its widgets are
seeded from the URL's ``algo``/``damp``/``actord``/``calib`` keys (``seed_from_url``)."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dashboard.components import persist, url
from dashboard.components.persist import PERSIST
from dashboard.services.display.text import literal
from dashboard.services.state.algorithm import (
    DAMP_RANGE,
    DEFAULT_DAMP,
    AlgorithmChoice,
    algorithm_from_query,
    parse_sentences,
)
from quant_core import CALIBRATION_SENTENCES, Algorithm, QuantConfig

__all__ = ["algorithm_picker", "seed_from_url"]


def seed_from_url(prefix: str = "") -> None:
    """When the URL is new to the session, put its algorithm keys into the picker's widgets
    (a bad value warns and keeps the defaults; ``calib=custom`` warns that links do not
    carry the sentences). An address without them means RTN (its URL form is no key), so
    Back to such an address restores RTN; a bare address changes nothing."""
    params = url.query_snapshot()
    if not params:
        return
    try:
        choice = algorithm_from_query(params)
    except ValueError as exc:
        url.add_warning(f"Ignored the link's algorithm ({exc}); using RTN.")
        return
    persist.set_values(
        {
            f"{prefix}a_algo": choice.algorithm,
            f"{prefix}a_damp": float(choice.gptq_damp),
            f"{prefix}a_actord": choice.act_order,
            f"{prefix}a_custom": False,
        }
    )
    if params.get("calib") == "custom" and choice.algorithm.needs_calibration:
        url.add_warning(
            "The link was made with its author's own calibration sentences, which links do "
            "not carry: calibrating on the bundled sentences."
        )


_HELP = {
    Algorithm.RTN: "Round to nearest on the scheme's grid.",
    Algorithm.GPTQ: "Rounds columns one by one and pushes each error onto the columns not "
    "yet rounded, through the inverse Hessian of the layer's calibration inputs.",
    Algorithm.AWQ: "Scales input channels by mean|X_j|^α before rounding (α searched on the "
    "calibration output error); the inverse is folded into the input.",
    Algorithm.HQQ: "Data-free: a half-quadratic solver refits each block's zero point "
    "(or scale).",
}


def algorithm_picker(
    cfg: QuantConfig,
    *,
    prefix: str = "",
    has_calibration: bool = True,
    offered: Sequence[Algorithm] | None = None,
    notice: DeltaGenerator | None = None,
) -> AlgorithmChoice:
    """Draw the algorithm widgets in the current container.

    ``has_calibration``: whether the tensor at hand is a layer of the bundled model (so
    GPTQ/AWQ can capture its inputs). ``offered``: the algorithms for this tensor (all by
    default); the selectbox lists those that can run under ``cfg``, and a caption names
    the others with the reason (``Algorithm.unavailable_reason``). An algorithm the state
    asks for that cannot run (a format just changed to one it cannot handle, a link's
    ``algo=gptq`` on an uploaded tensor) is replaced by RTN in the selectbox itself, so it
    never shows one algorithm while the page computes another, and explained in
    ``notice`` (a container near the top of the page; default: the current one).
    """
    p = prefix
    options = list(Algorithm) if offered is None else list(offered)
    if Algorithm.RTN not in options:
        raise ValueError(f"offered must include RTN, got {[a.value for a in options]}")
    persist.defaults(
        {
            f"{p}a_algo": Algorithm.RTN,
            f"{p}a_damp": DEFAULT_DAMP,
            f"{p}a_actord": True,
            f"{p}a_custom": False,
            f"{p}a_text": "\n".join(CALIBRATION_SENTENCES),
        }
    )
    reasons = {a: a.unavailable_reason(cfg, has_calibration=has_calibration) for a in options}
    runnable = [a for a in options if reasons[a] is None]
    wanted = st.session_state[f"{p}a_algo"]
    if wanted not in runnable:
        st.session_state[f"{p}a_algo"] = Algorithm.RTN
        if isinstance(wanted, Algorithm):
            reason = reasons.get(wanted) or (
                wanted.unavailable_reason(cfg, has_calibration=False)
                or f"{wanted.label} is not offered for this tensor"
            )
            others = [a.label for a in runnable if a is not Algorithm.RTN]
            also = f" ({' and '.join(others)} can run here too)" if others else ""
            (notice or st).warning(f"{reason}: showing RTN{also}.")
    algorithm = st.selectbox(
        "Algorithm",
        runnable,
        format_func=lambda a: a.label,
        key=f"{p}a_algo",
        persist_state=PERSIST,
        help=" ".join(f"{a.label}: {h}" for a, h in _HELP.items() if a in runnable),
    )
    # Those the tensor rules out (GPTQ/AWQ without a model) are not in ``options``: the
    # page's caption says why. Those this scheme rules out are named here.
    for reason in reasons.values():
        if reason is not None:
            st.caption(f"Not offered for this scheme: {reason}.")
    damp, act_order = DEFAULT_DAMP, True
    if algorithm is Algorithm.GPTQ:
        damp = st.slider(
            "GPTQ dampening (fraction of mean diag H)",
            *DAMP_RANGE,
            step=0.01,
            key=f"{p}a_damp",
            persist_state=PERSIST,
            help="The paper uses 0.01; with a few hundred calibration tokens 0.1-0.3 "
            "generalises better to held-out text.",
        )
        act_order = st.checkbox("Act-order", key=f"{p}a_actord", persist_state=PERSIST)
    calibration, custom = CALIBRATION_SENTENCES, False
    if algorithm.needs_calibration:
        custom = st.checkbox(
            "My own calibration sentences", key=f"{p}a_custom", persist_state=PERSIST
        )
        if custom:
            text = st.text_area(
                "Calibration sentences (one per line)",
                key=f"{p}a_text",
                height=120,
                persist_state=PERSIST,
            )
            try:
                calibration = parse_sentences(text)
            except ValueError as exc:
                st.error(f"Calibration text: {literal(exc)}. Using the bundled sentences.")
                calibration, custom = CALIBRATION_SENTENCES, False
        else:
            st.caption(f"Calibrated on the {len(CALIBRATION_SENTENCES)} bundled sentences.")
    return AlgorithmChoice(
        algorithm=algorithm,
        gptq_damp=float(damp),
        act_order=bool(act_order),
        calibration=calibration,
        custom_calibration=custom,
    )
