"""A/B's two schemes: each side a config picker and an algorithm picker, seeded from the
URL's ``a.``/``b.`` keys when the address is new to the session; a link value the page
had to change is warned about beside its picker."""

from __future__ import annotations

import streamlit as st

from dashboard.components import persist, url
from dashboard.components.algorithm import algorithm_picker
from dashboard.components.config import apply_config, config_picker
from dashboard.services.compare.weights import offered_algorithms
from dashboard.services.display.text import literal
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.compare import AB_PREFIXES, side_from_query
from dashboard.services.state.link_fixes import link_fixes
from quant_core import QuantConfig

__all__ = ["ab_side", "seed_ab_from_url"]

_LINK = "_ab_link_"
_SIDES = dict(zip(AB_PREFIXES, ("a_", "b_"), strict=True))  # URL prefix -> widget prefix


def seed_ab_from_url() -> None:
    """Put the link's schemes into both sides' widgets (each bad part warns and keeps
    what the widgets hold)."""
    if not url.first_run("ab"):
        return
    params = url.query_snapshot()
    for prefix, p in _SIDES.items():
        q = side_from_query(params, prefix)
        for problem in q.problems:
            url.add_warning(f"Ignored the link's {problem}.")
        if q.config is not None:
            apply_config(q.config, p)
            st.session_state[_LINK + p] = q.config
        if q.algorithm is not None:
            persist.set_values(
                {
                    f"{p}a_algo": q.algorithm.algorithm,
                    f"{p}a_damp": float(q.algorithm.gptq_damp),
                    f"{p}a_actord": q.algorithm.act_order,
                    f"{p}a_custom": False,
                }
            )
            if params.get(prefix + "calib") == "custom":
                url.add_warning(
                    f"Scheme {p[0].upper()} was calibrated on its author's own sentences, "
                    "which links do not carry: calibrating on the bundled sentences."
                )


def ab_side(
    cols: int, prefix: str, default: QuantConfig, layer: str | None
) -> tuple[QuantConfig, AlgorithmChoice]:
    """One side's pickers in the current container (``prefix`` ``"a_"`` or ``"b_"``);
    ``layer``: the bundled-model layer the tensor is (GPTQ/AWQ offered), else ``None``."""
    cfg = config_picker(cols, prefix=prefix, default=default)
    wanted = st.session_state.pop(_LINK + prefix, None)
    if isinstance(wanted, QuantConfig):
        key_prefix = next(k for k, p in _SIDES.items() if p == prefix)  # "a_" -> "a."
        for text in link_fixes(wanted, cfg, cols, key_prefix):
            st.warning(f"Link: {literal(text)}.", icon="⚠️")
    choice = algorithm_picker(
        cfg, prefix=prefix, has_calibration=layer is not None, offered=offered_algorithms(layer)
    )
    return cfg, choice
