"""The quantization scheme picker: returns a validated ``QuantConfig`` (or, with
``research=True``, a ``ResearchScheme`` when a research format is picked)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

import streamlit as st

from dashboard.components import persist, url
from dashboard.components.granularity import (
    activation_granularity,
    activation_kind,
    divisors,
    forget_fitted_group,
    weight_granularity,
)
from dashboard.components.persist import PERSIST
from dashboard.components.research_scheme import apply_research, research_options
from dashboard.services.display.options import OPTION_CHARS
from dashboard.services.display.text import literal
from dashboard.services.state.link_fixes import link_fixes
from dashboard.services.state.research import (
    ExplorerScheme,
    ResearchFormat,
    ResearchScheme,
    has_scheme_keys,
    scheme_from_query,
)
from dashboard.services.state.scale_storage import (
    DEFAULT_SCALE_DTYPE,
    SCALE_STORAGES,
    float_storage,
    scale_storage_of,
    storage_by_key,
)
from dashboard.services.state.scheme import (
    PERCENTILE_RANGE,
    QUERY_KEYS,
    SEED_RANGE,
    config_from_query,
)
from quant_core import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    Rounding,
    ZeroPoint,
    presets,
)

__all__ = [
    "DEFAULT_CONFIG",
    "apply_config",
    "config_picker",
    "divisors",
    "remember_link_config",
    "seed_from_url",
    "use_preset",
]

DEFAULT_CONFIG = QuantConfig(
    bits=4, mode=Mode.SYMMETRIC, granularity=PerChannel(axis=0), scale_dtype=DEFAULT_SCALE_DTYPE
)
_FORMAT_LABELS = {
    Format.INT: "Integer (linear)",
    Format.NF4: "NF4 (normal float, 4 bit)",
    Format.FP4_E2M1: "FP4 E2M1",
    Format.FP4_BNB: "FP4 (bitsandbytes' table)",
    Format.FP6_E3M2: "FP6 E3M2",
    Format.FP6_E2M3: "FP6 E2M3",
    Format.FP8_E4M3: "FP8 E4M3",
    Format.FP8_E5M2: "FP8 E5M2",
    Format.IQ4_NL: "IQ4_NL (llama.cpp, 4 bit)",
    Format.TERNARY: "Ternary −1 / 0 / 1",
    Format.TERNARY_PACKED: "Ternary, 5 per byte",
    Format.BINARY: "Binary −1 / +1 (1 bit)",
}
# The element formats the custom picker offers (ternary's base-3 packing comes with TQ1_0).
_PICKER_FORMATS = [f for f in Format if f is not Format.TERNARY_PACKED]
_CUSTOM = "custom"
_PRESET_HELP = (
    "The formats models ship in, each one click: llama.cpp's GGUF types (legacy Q4_0…Q8_0, "
    "the K-quants with 256-value super-blocks, IQ4, ternary TQ), the OCP microscaling "
    "formats (MXFP4/6/8, MXINT8: blocks of 32 sharing a power-of-two scale), NVIDIA's "
    "NVFP4 (blocks of 16, FP8 scales under a tensor scale), DeepSeek's 128×128 block FP8, "
    "BitNet's ternary and bitsandbytes' NF4 with double-quantized scales. **Custom** "
    "builds a scheme from its parts below."
)


def _preset_label(name: str) -> str:
    if name == _CUSTOM:
        return "Custom: build your own"
    preset = _PRESETS[name]
    full = f"{preset.label} · {preset.family}"
    # the family left out where it would not fit the sidebar (it is in the caption then)
    return full if len(full) <= OPTION_CHARS else preset.label


_PRESETS = {p.name: p for p in presets()}
_ZP_LABELS = {
    ZeroPoint.INCLUDE_ZERO: "Include zero",
    ZeroPoint.FLOAT_MIN: "Float min",
    ZeroPoint.COURSE_CLAMP: "Course clamp",
}
_ZP_HELP = (
    "Where an asymmetric block's grid sits. The three agree for every block whose range "
    "contains 0; they differ only for blocks whose values are all positive or all negative "
    "(frequent at small group sizes).  \n"
    "**Include zero** (default, as PyTorch and torchao): widen the range to contain 0; the "
    "integer zero point is never clamped and 0 is exact.  \n"
    "**Float min** (tinygemm, GGUF Q4_1): x̂ = s·q + m with a float offset m per block, "
    "stored in the scale dtype (counted in bits/element); the grid spans the block's own "
    "min..max.  \n"
    "**Course clamp** (the course's lessons): z = clamp(round(qmin − min/s)); a block "
    "without 0 gets a grid over [0, max − min] and loses its values."
)
_STORAGE_HELP = (
    "What each block's scale costs and how exact it is. **fp32/fp16/bf16**: a float per "
    "block. The others quantize the scales too: **E8M0** stores only a power of two (8 "
    "bits, MX formats); **FP8 E4M3** stores an 8-bit float under one fp32 scale per tensor "
    "(NVFP4), or alone, no tensor scale (GGUF's NVFP4: a scale of 2^-9 at the least); "
    "**k-bit ints per 256 values** store each block's scale (and min) as a small "
    "integer times one fp16 scale per 256-value super-block (llama.cpp's K-quants); "
    "**double quantized** stores 8-bit codes of the scales with one fp32 per 256 scales "
    "(QLoRA). The bits per value count every level."
)
_RANGE_LABELS = {
    RangeMethod.MINMAX: "Min-max",
    RangeMethod.PERCENTILE: "Percentile clipping",
    RangeMethod.MSE: "MSE-optimal clipping",
    RangeMethod.ABSMEAN: "Absmean (BitNet)",
}


def _state_from_config(cfg: QuantConfig, p: str) -> dict[str, object]:
    gran = cfg.granularity
    kind = "tensor" if isinstance(gran, PerTensor) else "channel"
    if isinstance(gran, PerGroup):
        kind = "group"
    storage = scale_storage_of(cfg)
    fmt = Format.TERNARY if cfg.format is Format.TERNARY_PACKED else cfg.format
    return {
        f"{p}q_preset": cfg.name if cfg.name in _PRESETS else _CUSTOM,
        f"{p}q_sstore": (storage or float_storage(cfg.scale_dtype)).key,
        f"{p}q_fmt": fmt,
        f"{p}q_wide": cfg.format is Format.INT and cfg.bits > 8,
        f"{p}q_bits": cfg.bits if cfg.format is Format.INT else 4,
        f"{p}q_mode": cfg.mode,
        f"{p}q_gran": kind,
        f"{p}q_agran": activation_kind(gran),
        f"{p}q_axis": gran.axis % 2 if isinstance(gran, PerChannel) else 0,
        f"{p}q_group": gran.group_size if isinstance(gran, PerGroup) else 32,
        f"{p}q_range": cfg.range_method,
        f"{p}q_pct": float(cfg.percentile),
        f"{p}q_round": cfg.rounding,
        f"{p}q_seed": cfg.seed,
        f"{p}q_zp": cfg.zero_point,
    }


def use_preset(name: str, prefix: str = "") -> None:
    """Pick the shipped format ``name`` (a button's callback: runs before the widgets)."""
    st.session_state[f"{prefix}q_preset"] = name


def apply_config(cfg: QuantConfig, prefix: str = "") -> None:
    """Set the picker's widgets to ``cfg`` (before they are drawn in this run)."""
    persist.set_values(_state_from_config(cfg, prefix))
    forget_fitted_group(prefix)


_LINK_SCHEME = "_link_scheme_"


def seed_from_url(prefix: str = "", research: bool = False) -> None:
    """When the URL is new to the session (``url.first_run``), put its scheme into the
    widgets of the picker with ``prefix`` (or warn). The picker's next draw compares what
    it shows with what the link asked for and warns about each value it had to change.
    ``research``: the picker offers the research formats (``fmt=dorefa`` and its keys)."""
    params = url.query_snapshot()
    if not (has_scheme_keys(params) if research else any(k in params for k in QUERY_KEYS)):
        return
    try:
        scheme = scheme_from_query(params) if research else config_from_query(params)
    except ValueError as exc:
        url.add_warning(f"Ignored the link's scheme ({exc}); using the defaults.")
        return
    if isinstance(scheme, ResearchScheme):
        apply_research(scheme, prefix)
        return
    apply_config(scheme, prefix)
    remember_link_config(scheme, prefix)


def remember_link_config(cfg: QuantConfig, prefix: str = "", key_prefix: str = "") -> None:
    """Remember ``cfg`` as what a link asked of the picker with ``prefix``: its next draw
    warns about each value it had to change (a group size that does not fit, ...), naming
    the link's keys with ``key_prefix`` (``"m."`` on the whole-model page)."""
    st.session_state[_LINK_SCHEME + prefix] = (cfg, key_prefix)


def _warn_link_fixes(p: str, got: QuantConfig, cols: int) -> None:
    """Warn (once, beside the picker) for each value of the link's scheme the picker changed."""
    remembered = st.session_state.pop(_LINK_SCHEME + p, None)
    if not isinstance(remembered, tuple) or not isinstance(remembered[0], QuantConfig):
        return
    wanted, key_prefix = remembered
    for text in link_fixes(wanted, got, cols, key_prefix):
        st.warning(f"Link: {literal(text)}.", icon="⚠️")


@overload
def config_picker(
    cols: int,
    prefix: str = ...,
    default: QuantConfig = ...,
    group_sizes: Sequence[int] | None = ...,
    activation: bool = ...,
    research: Literal[False] = ...,
    activation_terms: bool = ...,
) -> QuantConfig: ...
@overload
def config_picker(
    cols: int,
    prefix: str = ...,
    default: QuantConfig = ...,
    group_sizes: Sequence[int] | None = ...,
    activation: bool = ...,
    *,
    research: Literal[True],
    activation_terms: bool = ...,
) -> ExplorerScheme: ...
def config_picker(
    cols: int,
    prefix: str = "",
    default: QuantConfig = DEFAULT_CONFIG,
    group_sizes: Sequence[int] | None = None,
    activation: bool = False,
    research: bool = False,
    activation_terms: bool = False,
) -> ExplorerScheme:
    """Draw the scheme widgets (in the current container) for a matrix with ``cols``
    columns; ``prefix`` keeps two pickers on one page apart; ``group_sizes`` replaces the
    divisors of ``cols`` as the group sizes offered.

    ``activation=True`` is for an activation matrix ``[tokens, features]``: the granularity
    radio offers per tensor, per token (``PerChannel(0)``, one scale per row) and per
    feature (``PerChannel(1)``, one scale per column) instead of the weight choices.
    ``research=True`` (the explorer) adds the research formats (min-max levels, DoReFa) to
    the format choice; picking one returns a ``ResearchScheme`` (``research_options``).
    ``activation_terms=True`` (the explorer on an activation source) keeps every weight
    choice, per-group included, and names the channels per token and per feature."""
    p = prefix
    defaults = _state_from_config(default, p)
    persist.defaults(defaults)
    ss = st.session_state
    # Activation pickers build their scheme: the shipped formats are weight formats (and
    # llama.cpp's recipe has no static ranges).
    name = _CUSTOM
    if not activation:
        name = st.selectbox(
            "Shipped format",
            [_CUSTOM, *_PRESETS],
            format_func=_preset_label,
            key=f"{p}q_preset",
            persist_state=PERSIST,
            help=_PRESET_HELP,
        )
    if name != _CUSTOM:
        preset = _PRESETS[name]
        family = "" if _preset_label(name).endswith(preset.family) else f"{preset.family}: "
        st.caption(f"{family}{preset.summary}.")
        _warn_link_fixes(p, preset.config, cols)
        return preset.config
    formats: list[Format | ResearchFormat] = list(_PICKER_FORMATS)
    if research:
        formats += list(ResearchFormat)
    elif ss[f"{p}q_fmt"] not in formats:
        ss[f"{p}q_fmt"] = Format.INT
    fmt = st.selectbox(
        "Format",
        formats,
        format_func=lambda f: f.label if isinstance(f, ResearchFormat) else _FORMAT_LABELS[f],
        key=f"{p}q_fmt",
        persist_state=PERSIST,
    )
    if isinstance(fmt, ResearchFormat):
        return research_options(fmt, p)
    if fmt is Format.INT:
        wide = st.checkbox("Allow 9 to 16 bits", key=f"{p}q_wide", persist_state=PERSIST)
        top = 16 if wide else 8
        if int(ss[f"{p}q_bits"]) > top:
            # Only when it must change: a value set through session state is sent back to
            # the browser as the slider's value, overwriting an arrow press made meanwhile
            # (quick presses lost steps, and the slider then disagreed with the URL).
            ss[f"{p}q_bits"] = top
        bits = st.slider("Bit width", 2, top, key=f"{p}q_bits", persist_state=PERSIST)
        mode = st.radio(
            "Mode",
            list(Mode),
            format_func=lambda m: m.value.capitalize(),
            key=f"{p}q_mode",
            persist_state=PERSIST,
            horizontal=True,
        )
        zero_point = ZeroPoint.INCLUDE_ZERO
        if mode is Mode.ASYMMETRIC:
            zero_point = st.radio(
                "Zero point",
                list(ZeroPoint),
                format_func=_ZP_LABELS.__getitem__,
                key=f"{p}q_zp",
                persist_state=PERSIST,
                horizontal=True,
                help=_ZP_HELP,
            )
    else:
        bits = fmt.bits or 4
        mode = Mode.SYMMETRIC
        zero_point = ZeroPoint.INCLUDE_ZERO
        st.caption(f"{fmt.value.upper()}: {bits} bits, absmax (symmetric) scaling.")

    if activation:
        granularity = activation_granularity(p)
    else:
        granularity = weight_granularity(p, cols, group_sizes, activation_terms)

    ranges = [m for m in RangeMethod if m is not RangeMethod.ABSMEAN or mode is Mode.SYMMETRIC]
    if ss[f"{p}q_range"] not in ranges:
        ss[f"{p}q_range"] = RangeMethod.MINMAX
    range_method = st.selectbox(
        "Range",
        ranges,
        format_func=_RANGE_LABELS.__getitem__,
        key=f"{p}q_range",
        persist_state=PERSIST,
    )
    percentile = float(ss[f"{p}q_pct"])
    if range_method is RangeMethod.PERCENTILE:
        percentile = st.slider(
            "Percentile kept", *PERCENTILE_RANGE, step=0.1, key=f"{p}q_pct", persist_state=PERSIST
        )
    rounding = st.radio(
        "Rounding",
        list(Rounding),
        format_func=lambda r: r.value.capitalize(),
        key=f"{p}q_round",
        persist_state=PERSIST,
        horizontal=True,
    )
    seed = int(ss[f"{p}q_seed"])
    if rounding is Rounding.STOCHASTIC:
        seed = int(
            st.number_input(
                "Rounding seed",
                min_value=SEED_RANGE[0],
                max_value=SEED_RANGE[1],
                key=f"{p}q_seed",
                persist_state=PERSIST,
            )
        )
    storage = storage_by_key(
        st.selectbox(
            "Scales stored as",
            [s.key for s in SCALE_STORAGES],
            format_func=lambda k: storage_by_key(k).option,
            key=f"{p}q_sstore",
            persist_state=PERSIST,
            help=_STORAGE_HELP,
        )
    )
    if storage.option != storage.label:  # the option is cut short: the whole of it
        st.caption(storage.label)
    fields = {
        "bits": int(bits),
        "mode": mode,
        "granularity": granularity,
        "format": fmt,
        "range_method": range_method,
        "percentile": percentile,
        "rounding": rounding,
        "seed": seed,
        "zero_point": zero_point,
    }
    try:
        cfg = QuantConfig(
            **fields, scale_format=storage.scale_format, scale_dtype=storage.scale_dtype
        )
    except ValueError as exc:
        # a scale storage that does not fit the rest: say why and store the default's
        st.warning(
            f"{storage.label}: {exc}. Using {DEFAULT_SCALE_DTYPE.value} scales instead.",
            icon="⚠️",
        )
        cfg = QuantConfig(**fields, scale_dtype=DEFAULT_SCALE_DTYPE)
    _warn_link_fixes(p, cfg, cols)
    return cfg
