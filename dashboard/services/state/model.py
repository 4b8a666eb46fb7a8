"""The whole-model page's scheme (weights, algorithm, activations) as one frozen value, and
its URL keys.

URL keys, every one prefixed ``m.`` so they never meet the explorer's:

==============  ================================================  =======================
key             value                                             field
==============  ================================================  =======================
``m.act``       ``none`` | ``w8a16`` | ``w8a8`` | ``w4a16_g128``  ``choice``
                | ``w4a8`` | ``custom``
``m.<k>``       the weight config, ``config_to_query`` keys        ``weight`` (not with a
                (``m.bits``, ``m.mode``, ``m.gran``, ...)          preset: it fixes them)
``m.a.<k>``     the custom activation config, same keys           ``activation``
``m.ranges``    ``dynamic`` | ``static``                          ``ranges``
``m.algo`` ...  ``algorithm_to_query`` keys (algo, damp, actord,  ``algorithm``
                calib)
==============  ================================================  =======================

``model_scheme_from_query`` parses each part on its own, so one bad value loses only its
part; every problem comes back as a sentence for the page to show.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from quant_core import ActivationGranularity, LayerScheme, QuantConfig, SchemePreset

from ..display.labels import scheme_label
from .algorithm import ALGORITHM_KEYS, AlgorithmChoice, algorithm_from_query, algorithm_to_query
from .query import link_keys, member
from .scheme import QUERY_KEYS, config_from_query, config_to_query

__all__ = [
    "ACTIVATION_PREFIX",
    "PREFIX",
    "ActivationChoice",
    "ModelQuery",
    "ModelScheme",
    "RangeKind",
    "model_scheme_from_query",
    "model_scheme_to_query",
]

PREFIX = "m."
ACTIVATION_PREFIX = "m.a."


class ActivationChoice(enum.Enum):
    """What the linear layers' inputs become: float, a named preset (which also fixes the
    weights), or a custom activation config."""

    NONE = "none"
    W8A16 = "w8a16"
    W8A8 = "w8a8"
    W4A16_G128 = "w4a16_g128"
    W4A8 = "w4a8"
    CUSTOM = "custom"

    @property
    def preset(self) -> SchemePreset | None:
        """The ``SchemePreset`` of the same value, ``None`` for ``NONE`` and ``CUSTOM``."""
        try:
            return SchemePreset(self.value)
        except ValueError:
            return None

    @property
    def label(self) -> str:
        if self is ActivationChoice.NONE:
            return "none (float)"
        if self is ActivationChoice.CUSTOM:
            return "custom activation config"
        preset = self.preset
        return f"preset {preset.label}" if preset is not None else self.value


class RangeKind(enum.Enum):
    """Dynamic: each batch's activation ranges from itself. Static: ranges calibrated once
    on ``CALIBRATION_SENTENCES`` and applied to the page's sentences (values beyond clip)."""

    DYNAMIC = "dynamic"
    STATIC = "static"


@dataclass(frozen=True)
class ModelScheme:
    """Every linear layer of a model: weights under ``weight`` chosen by ``algorithm``,
    inputs under ``activation`` (``None``: float) with ``ranges``.

    ``choice`` says where the pair came from; a preset's weight and activation must be the
    preset's (``ModelScheme.of`` fills them in). Raises ``ValueError`` for an activation
    config with no activation granularity (per-group, an axis > 1), static per-token
    ranges, or static ranges with float activations.
    """

    weight: QuantConfig
    activation: QuantConfig | None = None
    ranges: RangeKind = RangeKind.DYNAMIC
    algorithm: AlgorithmChoice = field(default_factory=AlgorithmChoice)
    choice: ActivationChoice = ActivationChoice.NONE

    def __post_init__(self) -> None:
        if not isinstance(self.weight, QuantConfig):
            raise TypeError(f"weight must be a QuantConfig, got {type(self.weight).__name__}")
        if self.activation is not None and not isinstance(self.activation, QuantConfig):
            raise TypeError(
                f"activation must be a QuantConfig or None, got {type(self.activation).__name__}"
            )
        for name, value, kind in (
            ("ranges", self.ranges, RangeKind),
            ("choice", self.choice, ActivationChoice),
            ("algorithm", self.algorithm, AlgorithmChoice),
        ):
            if not isinstance(value, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, got {value!r}")
        preset = self.choice.preset
        if preset is not None and (
            preset.scheme.weight != self.weight or preset.scheme.activation != self.activation
        ):
            raise ValueError(
                f"{preset.label} is {preset.scheme.describe()}, not "
                f"{self.layer_scheme.describe()}"
            )
        if self.choice is ActivationChoice.NONE and self.activation is not None:
            raise ValueError("choice none keeps activations in float, but an activation is set")
        if self.choice is ActivationChoice.CUSTOM and self.activation is None:
            raise ValueError("choice custom needs an activation config")
        if self.activation is None:
            if self.ranges is RangeKind.STATIC:
                raise ValueError("static ranges need quantized activations")
            return
        gran = ActivationGranularity.of(self.activation.granularity)  # ValueError names it
        if self.ranges is RangeKind.STATIC and not gran.allows_static:
            raise ValueError(
                f"static ranges must be per-tensor or per-feature, not {gran.label}: a "
                "sentence has other tokens than the calibration set"
            )

    @classmethod
    def of(
        cls,
        choice: ActivationChoice,
        *,
        weight: QuantConfig,
        activation: QuantConfig | None = None,
        ranges: RangeKind = RangeKind.DYNAMIC,
        algorithm: AlgorithmChoice | None = None,
    ) -> ModelScheme:
        """The scheme for ``choice``: a preset replaces ``weight`` and ``activation`` by its
        own; ``NONE`` drops ``activation`` (and static ranges)."""
        preset = choice.preset
        if preset is not None:
            weight, activation = preset.scheme.weight or weight, preset.scheme.activation
        elif choice is ActivationChoice.NONE:
            activation = None
        if activation is None:
            ranges = RangeKind.DYNAMIC
        return cls(
            weight=weight,
            activation=activation,
            ranges=ranges,
            algorithm=AlgorithmChoice() if algorithm is None else algorithm,
            choice=choice,
        )

    @property
    def layer_scheme(self) -> LayerScheme:
        return LayerScheme(weight=self.weight, activation=self.activation)

    @property
    def static(self) -> bool:
        return self.ranges is RangeKind.STATIC

    def describe(self) -> str:
        """E.g. ``"W int8 sym per-channel(0), fp16 scales · A int8 ... (per-token) · dynamic
        ranges · GPTQ (...)"``: the weight as ``scheme_label`` names it (its scale dtype)."""
        text = self.layer_scheme.describe()
        # LayerScheme writes "W <describe()> · A ...": name the weight's scale dtype too.
        text = f"W {scheme_label(self.weight)}{text.removeprefix('W ' + self.weight.describe())}"
        if self.activation is not None:
            text += f" · {self.ranges.value} ranges"
        return f"{text} · {self.algorithm.describe()}"

    def weights_key(self) -> str:
        """A cache key of what the quantized weights depend on (config and algorithm)."""
        return f"{self.weight!r}|{self.algorithm.key()}"

    def key(self) -> str:
        """A cache key of the whole scheme."""
        return f"{self.weights_key()}|{self.activation!r}|{self.ranges.value}"


def model_scheme_to_query(scheme: ModelScheme) -> dict[str, str]:
    """``scheme`` as ``m.``-prefixed URL keys (see the module docstring)."""
    if not isinstance(scheme, ModelScheme):
        raise TypeError(f"scheme must be a ModelScheme, got {type(scheme).__name__}")
    out = {f"{PREFIX}act": scheme.choice.value}
    if scheme.choice.preset is None:
        out |= {PREFIX + k: v for k, v in config_to_query(scheme.weight).items()}
    if scheme.choice is ActivationChoice.CUSTOM and scheme.activation is not None:
        out |= {ACTIVATION_PREFIX + k: v for k, v in config_to_query(scheme.activation).items()}
    if scheme.activation is not None:
        out[f"{PREFIX}ranges"] = scheme.ranges.value
    out |= {PREFIX + k: v for k, v in algorithm_to_query(scheme.algorithm).items()}
    return out


@dataclass(frozen=True)
class ModelQuery:
    """What a link said about the whole-model scheme, part by part: ``None`` where it said
    nothing or something unusable (then ``problems`` says what, one sentence each)."""

    choice: ActivationChoice | None = None
    weight: QuantConfig | None = None
    activation: QuantConfig | None = None
    ranges: RangeKind | None = None
    algorithm: AlgorithmChoice | None = None
    problems: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return (
            self.choice is None
            and self.weight is None
            and self.activation is None
            and self.ranges is None
            and self.algorithm is None
            and not self.problems
        )


def _strip(params: Mapping[str, str], prefix: str, keys: tuple[str, ...]) -> dict[str, str]:
    return {k: params[prefix + k] for k in keys if prefix + k in params}


def _enum(params: Mapping[str, str], key: str, kind: type[enum.Enum]) -> enum.Enum | None:
    raw = params.get(PREFIX + key)
    return None if raw is None else member(PREFIX + key, raw, kind)


def _activation_preset_problem(raw: str) -> str:
    """Why ``m.a.preset`` is ignored, as the Layer page says it for ``l.a.preset``: the
    activation picker builds its scheme field by field, and a shipped format's blocks
    (MXFP4's 32) are no activation granularity."""
    try:
        shown = config_from_query({"preset": raw}).name or raw
    except ValueError:
        shown = raw[:40]
    return (
        f"{ACTIVATION_PREFIX}preset={shown}: the activation picker offers no shipped formats "
        "(they are weight formats); the activations keep their default"
    )


def _activation_granularity_problem(params: Mapping[str, str]) -> str:
    """Why a custom activation's granularity is ignored, naming the link's key
    (``m.a.axis=2`` for a channel axis, ``m.a.gran=group`` otherwise)."""
    gran = params.get(f"{ACTIVATION_PREFIX}gran", "")
    axis = params.get(f"{ACTIVATION_PREFIX}axis")
    key = f"axis={axis}" if gran == "channel" and axis is not None else f"gran={gran}"
    a = ACTIVATION_PREFIX
    return (
        f"{a}{key}: activation scales are per tensor ({a}gran=tensor), per token "
        f"({a}gran=channel&{a}axis=0) or per feature ({a}gran=channel&{a}axis=1); the "
        "activations keep their default"
    )


def model_scheme_from_query(params: Mapping[str, str]) -> ModelQuery:
    """Parse the ``m.`` keys of ``params`` part by part (choice, weight, activation,
    ranges, algorithm); keys of other pages are ignored. Never raises for bad values:
    each unusable part is ``None`` with a sentence in ``problems``."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, got {type(params).__name__}")
    problems: list[str] = []
    parsed: dict[str, object] = {}
    for name, what, parse in (
        ("choice", "activation setting", lambda: _enum(params, "act", ActivationChoice)),
        ("ranges", "activation ranges", lambda: _enum(params, "ranges", RangeKind)),
    ):
        try:
            parsed[name] = parse()
        except ValueError as exc:
            problems.append(f"{what} ({exc})")
    parts = (
        ("weight", "weight scheme", PREFIX, QUERY_KEYS, config_from_query),
        ("activation", "activation scheme", ACTIVATION_PREFIX, QUERY_KEYS, config_from_query),
        ("algorithm", "algorithm", PREFIX, ALGORITHM_KEYS, algorithm_from_query),
    )
    for name, what, prefix, keys, parse_part in parts:
        raw = _strip(params, prefix, keys)
        if not raw:
            continue
        if name == "activation" and "preset" in raw:
            problems.append(_activation_preset_problem(raw["preset"]))
            continue
        try:
            parsed[name] = parse_part(raw)
        except ValueError as exc:
            problems.append(f"{what} ({link_keys(str(exc), prefix, keys)})")
    activation = parsed.get("activation")
    if isinstance(activation, QuantConfig):
        try:
            ActivationGranularity.of(activation.granularity)
        except ValueError:
            problems.append(_activation_granularity_problem(params))
            parsed["activation"] = None
    return ModelQuery(
        choice=parsed.get("choice"),  # type: ignore[arg-type]
        weight=parsed.get("weight"),  # type: ignore[arg-type]
        activation=parsed.get("activation"),  # type: ignore[arg-type]
        ranges=parsed.get("ranges"),  # type: ignore[arg-type]
        algorithm=parsed.get("algorithm"),  # type: ignore[arg-type]
        problems=tuple(problems),
    )
