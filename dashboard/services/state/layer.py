"""The Layer outputs page's choices as URL keys, every one prefixed ``l.`` so they never
meet another page's:

==============  ==================================================  ===================
key             value                                               field
==============  ==================================================  ===================
``l.layer``     a linear layer's name, e.g.                         ``layer``
                ``encoder.layer.0.intermediate.dense``
``l.scheme``    ``w8a16`` | ``w8a8`` | ``w4a16_g128`` | ``w4a8`` |  ``choice``
                ``custom``
``l.preset``    read only: a preset by its value or its label       ``choice``
                (``W4A16 g128``), any case; written as ``l.scheme``
``l.w.<k>``     custom weights: ``config_to_query`` keys, or         ``weight``
                ``l.w=none`` (weights stay float)
``l.a.<k>``     custom activations: the same keys, or ``l.a=none``   ``activation``
``l.ranges``    ``dynamic`` | ``static``                            ``ranges``
``l.split``     ``calibration`` | ``held_out``                      ``split``
``l.alpha``     SmoothQuant's α in ``0 .. 1`` by steps of 0.05;     ``alpha``
                absent: no smoothing
==============  ==================================================  ===================

``layer_from_query`` parses each part on its own, so one bad value loses only its part;
every problem comes back as a sentence for the page to show, and so does an ``l.`` key the
page does not know (a typo such as ``l.sheme`` would otherwise be dropped in silence).
Nothing is evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from quant_core import QuantConfig

from ..activations.layer import EvalSplit, LayerSettings, SchemeChoice
from ..activations.sentences import RangeMode
from ..display.labels import format_key
from .query import link_keys, member
from .scheme import QUERY_KEYS, config_from_query, config_to_query

__all__ = [
    "ALPHA_STEP",
    "PREFIX",
    "LayerQuery",
    "layer_from_query",
    "layer_to_query",
]

PREFIX = "l."
_W = "l.w"
_A = "l.a"
_NONE = "none"
ALPHA_STEP = 0.05
"""The α slider's step: a link's α must be a multiple of it (0.05, 0.1, ... 1)."""
_PRESET_KEY = "l.preset"
_PRESETS = tuple(c for c in SchemeChoice if c.preset is not None)
_KNOWN_KEYS = frozenset(
    {f"{PREFIX}{k}" for k in ("layer", "scheme", "preset", "ranges", "split", "alpha")}
    | {_W, _A}
    | {f"{side}.{k}" for side in (_W, _A) for k in QUERY_KEYS}
)
_KEYS_TEXT = (
    "l.layer, l.scheme, l.w.<key>, l.a.<key>, l.w=none, l.a=none, l.ranges, l.split, l.alpha"
)
_LAYER_RE = re.compile(r"[A-Za-z0-9_.]{1,200}")
_ALPHA_RE = re.compile(r"[0-9](\.[0-9]{1,6})?")


def layer_to_query(settings: LayerSettings, choice: SchemeChoice) -> dict[str, str]:
    """``settings`` (drawn with the scheme menu at ``choice``) as ``l.`` keys. A preset
    fixes both sides, so only ``custom`` writes ``l.w``/``l.a``."""
    if not isinstance(settings, LayerSettings):
        raise TypeError(f"settings must be LayerSettings, got {type(settings).__name__}")
    if not isinstance(choice, SchemeChoice):
        raise TypeError(f"choice must be a SchemeChoice, got {choice!r}")
    out = {f"{PREFIX}layer": settings.layer, f"{PREFIX}scheme": choice.value}
    if choice is SchemeChoice.CUSTOM:
        for side, cfg in ((_W, settings.scheme.weight), (_A, settings.scheme.activation)):
            if cfg is None:
                out[side] = _NONE
            else:
                out |= {f"{side}.{k}": v for k, v in config_to_query(cfg).items()}
    out[f"{PREFIX}ranges"] = settings.ranges.value
    out[f"{PREFIX}split"] = settings.split.value
    if settings.alpha is not None:
        out[f"{PREFIX}alpha"] = f"{settings.alpha:g}"
    return out


@dataclass(frozen=True)
class LayerQuery:
    """What a link said about the Layer outputs page, part by part: ``None`` where it said
    nothing or something unusable (then ``problems`` says what, one sentence each).
    ``weight_float``/``activation_float``: ``l.w=none``/``l.a=none``; ``smooth``: whether
    ``l.alpha`` was given (usable or not)."""

    layer: str | None = None
    choice: SchemeChoice | None = None
    weight: QuantConfig | None = None
    weight_float: bool = False
    activation: QuantConfig | None = None
    activation_float: bool = False
    ranges: RangeMode | None = None
    split: EvalSplit | None = None
    alpha: float | None = None
    problems: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return self == LayerQuery()


def _alpha(raw: str) -> float:
    if len(raw) > 8 or not _ALPHA_RE.fullmatch(raw):
        raise ValueError(f"{PREFIX}alpha={raw!r} is not a decimal number")
    value = float(raw)
    steps = value / ALPHA_STEP
    if not 0.0 <= value <= 1.0 or abs(steps - round(steps)) > 1e-9:
        raise ValueError(f"{PREFIX}alpha={raw} is not one of 0, 0.05, 0.1, ... 1")
    return round(steps) * ALPHA_STEP


def _preset(raw: str) -> SchemeChoice:
    """The preset ``l.preset=raw`` names: a ``SchemeChoice`` preset's value or label in any
    case (``W8A8``, ``w4a16_g128``, ``W4A16 g128``); ``ValueError`` naming the value and
    the presets otherwise, with a pointer where the value means something elsewhere (a
    shipped format, by its key or the picker's label in any case, is one side's scheme:
    the pointer names its key; ``custom`` is the two pickers)."""
    norm = raw.strip().lower().replace(" ", "_")
    for choice in _PRESETS:
        if norm == choice.value:
            return choice
    accepted = ", ".join(c.value for c in _PRESETS)
    shown = raw[:40]
    if norm == SchemeChoice.CUSTOM.value:
        raise ValueError(
            f"{_PRESET_KEY}={shown!r} is not a preset (one of: {accepted}); for two pickers "
            f"link {PREFIX}scheme=custom"
        )
    name = format_key(raw)  # by key or by the picker's label: "NF4 + double quant"
    if name is not None:
        raise ValueError(
            f"{_PRESET_KEY}={shown!r} is a format for one side, not a layer scheme (one "
            f"of: {accepted}); for {name} weights link {PREFIX}scheme=custom&{_W}.preset={name}"
        )
    raise ValueError(f"{_PRESET_KEY}={shown!r} is not one of: {accepted}")


def _side(params: Mapping[str, str], side: str) -> tuple[QuantConfig | None, bool]:
    """A custom side's config, or ``(None, True)`` for ``side=none``."""
    raw = params.get(side)
    if raw is not None:
        if raw != _NONE:
            raise ValueError(f"{side}={raw!r}: only {side}={_NONE} is known")
        return None, True
    keys = {k: params[f"{side}.{k}"] for k in QUERY_KEYS if f"{side}.{k}" in params}
    if not keys:
        return None, False
    try:
        return config_from_query(keys), False
    except ValueError as exc:  # name the keys as the link holds them (l.w.bits=99)
        raise ValueError(link_keys(str(exc), f"{side}.", QUERY_KEYS)) from None


def layer_from_query(params: Mapping[str, str]) -> LayerQuery:
    """Parse the ``l.`` keys of ``params`` part by part; keys of other pages are ignored.
    Never raises for bad values: each unusable part is ``None`` with a sentence in
    ``problems``. Whether ``l.layer`` names a layer of the model is the page's check."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, got {type(params).__name__}")
    problems: list[str] = []
    found: dict[str, object] = {}
    layer = params.get(f"{PREFIX}layer")
    if layer is not None:
        if _LAYER_RE.fullmatch(layer):
            found["layer"] = layer
        else:
            problems.append(f"layer ({PREFIX}layer={layer[:60]!r} is not a layer name)")
    for name, key, kind in (
        ("choice", "scheme", SchemeChoice),
        ("ranges", "ranges", RangeMode),
        ("split", "split", EvalSplit),
    ):
        raw = params.get(PREFIX + key)
        if raw is None:
            continue
        try:
            found[name] = member(PREFIX + key, raw, kind)
        except ValueError as exc:
            problems.append(f"{key} ({exc})")
    for name, side, what in (
        ("weight", _W, "weight scheme"),
        ("activation", _A, "activation scheme"),
    ):
        try:
            cfg, float_ = _side(params, side)
        except ValueError as exc:
            problems.append(f"{what} ({exc})")
            continue
        found[name] = cfg
        found[f"{name}_float"] = float_
    raw_preset = params.get(_PRESET_KEY)
    if raw_preset is not None:
        try:
            named = _preset(raw_preset)
        except ValueError as exc:
            problems.append(f"preset ({exc})")
        else:
            if found.get("choice", named) is not named:
                problems.append(
                    f"preset ({_PRESET_KEY}={raw_preset[:40]!r} disagrees with "
                    f"{PREFIX}scheme={params[PREFIX + 'scheme']}; using {PREFIX}scheme)"
                )
            else:  # also where l.scheme was unusable (that problem is said already)
                found["choice"] = named
    raw_alpha = params.get(f"{PREFIX}alpha")
    if raw_alpha is not None:
        try:
            found["alpha"] = _alpha(raw_alpha)
        except ValueError as exc:
            problems.append(f"SmoothQuant's α ({exc})")
    unknown = sorted(k for k in params if k.startswith(PREFIX) and k not in _KNOWN_KEYS)
    for key in unknown:
        problems.append(f"key {key[:60]!r} (not a key of this page; its keys: {_KEYS_TEXT})")
    return LayerQuery(**found, problems=tuple(problems))  # type: ignore[arg-type]
