"""The layer page's sidebar: layer, scheme (a preset or two pickers), activation ranges,
evaluation sentences and SmoothQuant. Returns ``LayerSettings``."""

from __future__ import annotations

import streamlit as st

from dashboard.components import persist, url
from dashboard.components.config import apply_config, config_picker, remember_link_config
from dashboard.components.persist import PERSIST
from dashboard.services.activations.layer import EvalSplit, LayerSettings, SchemeChoice
from dashboard.services.activations.sentences import RangeMode
from dashboard.services.display.labels import scheme_text
from dashboard.services.state.layer import PREFIX, layer_from_query, layer_to_query
from dashboard.services.state.scheme import preset_names
from quant_core import ActivationGranularity, LayerScheme, SchemePreset

DEFAULT_LAYER = "encoder.layer.0.intermediate.dense"
_W8A8 = SchemePreset.W8A8.scheme

DEFAULTS: dict[str, object] = {
    "l_scheme": SchemeChoice.W8A8,
    "l_ranges": RangeMode.DYNAMIC,
    "l_split": EvalSplit.CALIBRATION,
    "l_sq": False,
    "l_alpha": 0.5,
    "lw_on": True,
    "la_on": True,
}

_A_PRESET = f"{PREFIX}a.preset"


def seed_layer_from_url() -> None:
    """Put the link's ``l.`` choices into the widgets (each bad part warns and keeps its
    default; a layer the model lacks warns when the picker draws)."""
    params = url.query_snapshot()
    parsed = layer_from_query(params)
    if parsed.empty:
        return
    for problem in parsed.problems:
        url.add_warning(f"Ignored the link's {problem}.")
    values: dict[str, object] = {}
    sides = [
        side
        for side, cfg, float_ in (
            ("l.w", parsed.weight, parsed.weight_float),
            ("l.a", parsed.activation, parsed.activation_float),
        )
        if cfg is not None or float_
    ]
    if sides and parsed.choice is None:
        # the sides' keys mean the two pickers: a link trimmed of l.scheme=custom ran W8A8
        # and said nothing
        values["l_scheme"] = SchemeChoice.CUSTOM
    elif sides and parsed.choice is not SchemeChoice.CUSTOM:
        keys = " and ".join(f"{s}.*" for s in sides)
        url.add_warning(
            f"Ignored the link's {keys}: {PREFIX}scheme={parsed.choice.value} fixes both "
            f"sides (for the two pickers link {PREFIX}scheme=custom)."
        )
    for key, value in (
        ("l_layer", parsed.layer),
        ("l_scheme", parsed.choice),
        ("l_ranges", parsed.ranges),
        ("l_split", parsed.split),
    ):
        if value is not None:
            values[key] = value
    if parsed.alpha is not None:
        values |= {"l_sq": True, "l_alpha": parsed.alpha}
    elif f"{PREFIX}alpha" not in params:  # the page's link without α: no smoothing
        values["l_sq"] = False
    for on, prefix, cfg, float_ in (
        ("lw_on", "lw_", parsed.weight, parsed.weight_float),
        ("la_on", "la_", parsed.activation, parsed.activation_float),
    ):
        if float_:
            values[on] = False
        elif cfg is not None and prefix == "la_" and cfg.name in preset_names():
            # The activation picker builds its scheme field by field: a shipped format's
            # blocks (MXFP4's 32) are no activation granularity, and the picker's warnings
            # would name keys the link never held ("bits=(none)").
            url.add_warning(
                f"Ignored the link's {_A_PRESET}={cfg.name}: the activation picker offers no "
                "shipped formats (they are weight formats); the activations keep their "
                "default."
            )
        elif cfg is not None:
            values[on] = True
            apply_config(cfg, prefix)
            # the picker warns about what it changes, naming the link's keys (l.a.gran)
            remember_link_config(cfg, prefix, f"{PREFIX}{prefix[1]}.")
    persist.set_values(values)


def layer_query(settings: LayerSettings) -> dict[str, str]:
    """The URL keys of what the controls drew (``settings``, the scheme menu's choice)."""
    return layer_to_query(settings, st.session_state["l_scheme"])


def _custom_scheme(in_features: int) -> LayerScheme:
    st.subheader("Weights")
    weight = None
    if st.checkbox("Quantize the weights (off: none, float)", key="lw_on", persist_state=PERSIST):
        weight = config_picker(in_features, prefix="lw_", default=_W8A8.weight)
    st.subheader("Activations")
    activation = None
    if st.checkbox(
        "Quantize the activations (off: none, float)", key="la_on", persist_state=PERSIST
    ):
        activation = config_picker(
            in_features, prefix="la_", default=_W8A8.activation, activation=True
        )
    return LayerScheme(weight=weight, activation=activation)


def _usable_ranges(scheme: LayerScheme, ranges: RangeMode) -> RangeMode:
    """``ranges``, or DYNAMIC (with a warning in plain words) where static ranges cannot
    apply: per-token activations have no range to calibrate in advance (each token's scale
    comes from that token), and float activations have no ranges at all."""
    if ranges is not RangeMode.STATIC:
        return ranges
    if scheme.activation is None:
        st.caption("The activations stay in float: there are no ranges to calibrate.")
        return RangeMode.DYNAMIC
    if ActivationGranularity.of(scheme.activation.granularity).allows_static:
        return ranges
    st.warning(
        "Static ranges are calibrated once, per tensor or per input feature, and then reused. "
        "This scheme scales each token by its own range (per-token), which exists only once "
        "that token arrives, so there is nothing to calibrate: showing dynamic ranges. For "
        "static ranges pick Custom with per-tensor or per-feature activations."
    )
    return RangeMode.DYNAMIC


def layer_controls(layers: dict[str, tuple[int, int]]) -> LayerSettings:
    """Draw the controls; ``layers``: name -> weight shape ``(out, in)`` in model order."""
    persist.defaults({**DEFAULTS, "l_layer": DEFAULT_LAYER})
    names = list(layers)
    layer = persist.name_picker(
        f"Layer ({len(names)} linear layers)",
        names,
        "l_layer",
        DEFAULT_LAYER,
        lambda n: f"{n} · {layers[n][1]} → {layers[n][0]} features",
        stale=lambda n: f"Layer {n!r} is not in the model.",
    )
    choice = st.selectbox(
        "Scheme",
        list(SchemeChoice),
        format_func=lambda c: c.label,
        key="l_scheme",
        persist_state=PERSIST,
    )
    preset = choice.preset
    scheme = _custom_scheme(layers[layer][1]) if preset is None else preset.scheme
    st.caption(scheme_text(scheme))
    ranges = st.radio(
        "Activation ranges",
        list(RangeMode),
        format_func=lambda r: r.label.replace("applied to held-out text", "on calibration text"),
        key="l_ranges",
        persist_state=PERSIST,
        help="Static ranges are calibrated on the calibration sentences (per-tensor or "
        "per-feature activations only).",
    )
    ranges = _usable_ranges(scheme, ranges)
    split = st.radio(
        "Evaluate on",
        list(EvalSplit),
        format_func=lambda s: s.label,
        key="l_split",
        persist_state=PERSIST,
    )
    st.subheader("SmoothQuant")
    alpha = None
    if st.checkbox("Smooth (X ← X / s, W ← W · s)", key="l_sq", persist_state=PERSIST):
        alpha = float(
            st.slider(
                "α (migration strength)",
                0.0,
                1.0,
                step=0.05,
                key="l_alpha",
                persist_state=PERSIST,
                help="s_j = max|X_j|^α / max|W_j|^(1−α), from the calibration sentences",
            )
        )
    return LayerSettings(layer=layer, scheme=scheme, ranges=ranges, split=split, alpha=alpha)
