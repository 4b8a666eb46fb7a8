"""A ``QuantConfig`` as URL query parameters: plain, validated strings both ways.

``config_to_query`` writes one string per key; ``config_from_query`` parses them back and
raises ``ValueError`` naming the key and value for anything it does not accept. Nothing is
evaluated or unpickled: every value must match a fixed pattern or an enum's value.

Keys (``QUERY_KEYS``), with the values they take:

=========  =====================================================  ==========================
key        value                                                  QuantConfig field
=========  =====================================================  ==========================
bits       integer 2..16 (the format's own width for non-INT)     ``bits``
mode       ``symmetric`` | ``asymmetric``                         ``mode``
gran       ``tensor`` | ``channel`` | ``group``                   ``granularity`` kind
axis       integer -64..63; only with ``gran=channel``            ``PerChannel.axis``
group      integer 1..1048576; only with ``gran=group``           ``PerGroup.group_size``
fmt        ``int`` | ``nf4`` | ``fp4_e2m1`` | ``fp8_e4m3`` | ...  ``format``
range      ``minmax`` | ``percentile`` | ``mse``                  ``range_method``
pct        decimal in [90, 100], e.g. ``99.9``                    ``percentile``
round      ``nearest`` | ``stochastic``                           ``rounding``
seed       integer 0..2^31-1                                      ``seed``
sdtype     ``fp32`` | ``fp16`` | ``bf16``                         ``scale_dtype``
zp         ``include_zero`` | ``float_min`` | ``course_clamp``;   ``zero_point``
           only with ``fmt=int&mode=asymmetric``
tile       ``RxC`` (e.g. ``128x128``); only with ``gran=block``   ``PerBlock(R, C)``
sfmt       ``float`` | ``e8m0`` | ``fp8`` | ``e4m3`` | ``super``  ``scale_format`` kind
           | ``dq`` (``e4m3``: ``fp8`` without the tensor scale)
sbits      integer 2..8; only with ``sfmt=super`` (default 6)     ``SuperBlockScales.bits``
ssigned    ``0`` | ``1``; only with ``sfmt=super``                ``SuperBlockScales.signed``
sblock     integer 2..65536; with ``sfmt=super`` (default 256)    ``super_block`` / ``block``
           or ``sfmt=dq`` (default 256)
recipe     ``lab`` | ``llama_cpp``                                ``recipe``
preset     a shipped format's name (``Q4_K``, ``MXFP4``, ...)     the whole config
           or the picker's label (``NF4 + double quant``), any
           case; alone, no other scheme key
=========  =====================================================  ==========================

Keys from ``tile`` on are written only when they differ from the defaults (``sfmt=float``,
``recipe=lab``), so the links of one-level schemes keep their old form; a named config
(``QuantConfig.name`` in the registry of shipped formats) is written as ``preset`` alone.

Example: ``int4 asym g32`` is
``bits=4&mode=asymmetric&gran=group&group=32&fmt=int&range=minmax&pct=99.9&round=nearest&seed=0&sdtype=fp32``.

Keys missing from the mapping take ``QuantConfig``'s defaults (``axis`` 0, ``group`` 128,
``zp`` ``include_zero``), except ``sdtype``: the pages' ``DEFAULT_SCALE_DTYPE`` (fp16), so an
old link without it opens as every page starts;
keys outside ``QUERY_KEYS`` are ignored (a page's URL carries other state too). A key that
contradicts another (``group`` without ``gran=group``, ``bits=8`` with ``fmt=nf4``,
``zp=float_min`` on a symmetric scheme) is rejected rather than silently dropped.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import TypeVar
from urllib.parse import urlencode

from quant_core import (
    MAX_INT_BITS,
    MIN_INT_BITS,
    DoubleQuantScales,
    FloatScales,
    Format,
    FP8Scales,
    Granularity,
    Mode,
    PerBlock,
    PerChannel,
    PerGroup,
    PerTensor,
    PowerOfTwoScales,
    QuantConfig,
    RangeMethod,
    Recipe,
    Rounding,
    ScaleDtype,
    ScaleFormat,
    SuperBlockScales,
    ZeroPoint,
    preset_names,
)

from ..display.labels import format_key, scheme_label
from .query import member
from .scale_storage import DEFAULT_SCALE_DTYPE

__all__ = [
    "AXIS_RANGE",
    "GROUP_RANGE",
    "MAX_VALUE_LENGTH",
    "PERCENTILE_RANGE",
    "QUERY_KEYS",
    "SEED_RANGE",
    "GranularityKind",
    "ScaleFormatKind",
    "config_from_query",
    "config_from_scheme_id",
    "config_to_query",
    "scheme_id",
]

QUERY_KEYS: tuple[str, ...] = (
    "bits",
    "mode",
    "gran",
    "axis",
    "group",
    "fmt",
    "range",
    "pct",
    "round",
    "seed",
    "sdtype",
    "zp",
    "tile",
    "sfmt",
    "sbits",
    "ssigned",
    "sblock",
    "recipe",
    "preset",
)
MAX_VALUE_LENGTH = 32
AXIS_RANGE = (-64, 63)
GROUP_RANGE = (1, 1 << 20)
# The ranges of the values the scheme picker's widgets take: a link, a scheme id and a
# widget all accept exactly these, so a value one accepts can never break another.
PERCENTILE_RANGE = (90.0, 100.0)
SEED_RANGE = (0, (1 << 31) - 1)

_E = TypeVar("_E", bound=enum.Enum)
_T = TypeVar("_T")

_INT_RE = re.compile(r"0|-?[1-9][0-9]{0,19}")
_TILE_RE = re.compile(r"([1-9][0-9]{0,4})x([1-9][0-9]{0,4})")
_SBLOCK_RANGE = (2, 1 << 16)
_SBITS_RANGE = (2, 8)


class ScaleFormatKind(enum.Enum):
    """The URL's ``sfmt`` value: which family of ``ScaleFormat`` stores the block scales."""

    FLOAT = "float"
    E8M0 = "e8m0"
    FP8 = "fp8"
    E4M3 = "e4m3"  # FP8 E4M3 block scales without the fp32 tensor scale (GGUF's NVFP4)
    SUPER = "super"
    DQ = "dq"

    @classmethod
    def of(cls, sf: ScaleFormat) -> ScaleFormatKind:
        if isinstance(sf, FP8Scales) and not sf.tensor_scale:
            return cls.E4M3
        return _SCALE_FORMAT_KINDS[type(sf)]


_SCALE_FORMAT_KINDS: dict[type, ScaleFormatKind] = {
    FloatScales: ScaleFormatKind.FLOAT,
    PowerOfTwoScales: ScaleFormatKind.E8M0,
    FP8Scales: ScaleFormatKind.FP8,
    SuperBlockScales: ScaleFormatKind.SUPER,
    DoubleQuantScales: ScaleFormatKind.DQ,
}
_PCT_RE = re.compile(r"[1-9][0-9]{0,2}(\.[0-9]{1,20})?")


class GranularityKind(enum.Enum):
    """Which granularity family a scheme uses; its value is the URL's ``gran`` value."""

    TENSOR = "tensor"
    CHANNEL = "channel"
    GROUP = "group"
    BLOCK = "block"

    @classmethod
    def of(cls, granularity: Granularity) -> GranularityKind:
        if isinstance(granularity, PerTensor):
            return cls.TENSOR
        if isinstance(granularity, PerChannel):
            return cls.CHANNEL
        if isinstance(granularity, PerGroup):
            return cls.GROUP
        if isinstance(granularity, PerBlock):
            return cls.BLOCK
        raise ValueError(f"unknown granularity {granularity!r}")


def _check_in(key: str, value: int, bounds: tuple[int, int]) -> int:
    lo, hi = bounds
    if not lo <= value <= hi:
        raise ValueError(f"{key}={value} is outside the range {lo}..{hi}")
    return value


def config_to_query(cfg: QuantConfig) -> dict[str, str]:
    """``cfg`` as query parameters, keys in ``QUERY_KEYS`` order.

    ``axis`` is present only for per-channel schemes, ``group`` only for per-group ones and
    ``zp`` only for schemes with a zero point (integer, asymmetric).
    Raises ``ValueError`` for a config outside what a URL may carry (an axis beyond
    ``AXIS_RANGE``, a group size beyond ``GROUP_RANGE``, a percentile beyond
    ``PERCENTILE_RANGE``, a seed beyond ``SEED_RANGE``).
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    if cfg.name in preset_names():
        return {"preset": cfg.name}
    gran = cfg.granularity
    out = {
        "bits": str(cfg.bits),
        "mode": cfg.mode.value,
        "gran": GranularityKind.of(gran).value,
    }
    if isinstance(gran, PerChannel):
        out["axis"] = str(_check_in("axis", gran.axis, AXIS_RANGE))
    elif isinstance(gran, PerGroup):
        out["group"] = str(_check_in("group", gran.group_size, GROUP_RANGE))
    out["fmt"] = cfg.format.value
    out["range"] = cfg.range_method.value
    lo, hi = PERCENTILE_RANGE
    if not lo <= cfg.percentile <= hi:
        raise ValueError(f"pct={cfg.percentile:g} is outside the range {lo:g}..{hi:g}")
    out["pct"] = repr(float(cfg.percentile))
    out["round"] = cfg.rounding.value
    out["seed"] = str(_check_in("seed", cfg.seed, SEED_RANGE))
    out["sdtype"] = cfg.scale_dtype.value
    if cfg.has_zero_point:
        out["zp"] = cfg.zero_point.value
    if isinstance(gran, PerBlock):
        out["tile"] = f"{gran.rows}x{gran.cols}"
    sf = cfg.scale_format
    if not isinstance(sf, FloatScales):
        out["sfmt"] = ScaleFormatKind.of(sf).value
    if isinstance(sf, SuperBlockScales):
        out["sbits"] = str(sf.bits)
        out["ssigned"] = "1" if sf.signed else "0"
        out["sblock"] = str(_check_in("sblock", sf.super_block, _SBLOCK_RANGE))
    elif isinstance(sf, DoubleQuantScales):
        out["sblock"] = str(_check_in("sblock", sf.block, _SBLOCK_RANGE))
    if cfg.recipe is not Recipe.LAB:
        out["recipe"] = cfg.recipe.value
    return out


def scheme_id(cfg: QuantConfig) -> str:
    """A stable identifier of ``cfg``: its query parameters as one URL-encoded string.

    Two configs have the same id exactly when they are equal; ``config_from_scheme_id``
    inverts it.
    """
    return urlencode(config_to_query(cfg))


def config_from_scheme_id(sid: str) -> QuantConfig:
    """The config whose ``scheme_id`` is ``sid``; ``ValueError`` for anything else."""
    if not isinstance(sid, str):
        raise ValueError(f"scheme id must be a str, got {type(sid).__name__}")
    if len(sid) > len(QUERY_KEYS) * MAX_VALUE_LENGTH:
        raise ValueError(f"scheme id is too long ({len(sid)} characters)")
    params: dict[str, str] = {}
    for part in sid.split("&"):
        key, sep, value = part.partition("=")
        if not sep or key not in QUERY_KEYS:
            raise ValueError(f"scheme id part {part!r} is not a known key=value pair")
        if key in params:
            raise ValueError(f"scheme id repeats key {key!r}")
        params[key] = value
    cfg = config_from_query(params)
    if scheme_id(cfg) != sid:
        raise ValueError(f"scheme id {sid!r} is not in canonical form")
    return cfg


def _raw(params: Mapping[str, str], key: str) -> str | None:
    if key not in params:
        return None
    value = params[key]
    if not isinstance(value, str):
        raise ValueError(f"query parameter {key!r} must be a string, got {type(value).__name__}")
    if len(value) > MAX_VALUE_LENGTH:
        raise ValueError(
            f"query parameter {key!r} is too long ({len(value)} characters; "
            f"at most {MAX_VALUE_LENGTH})"
        )
    return value


def _parse_int(params: Mapping[str, str], key: str, bounds: tuple[int, int]) -> int | None:
    raw = _raw(params, key)
    if raw is None:
        return None
    if not _INT_RE.fullmatch(raw):
        raise ValueError(f"query parameter {key}={raw!r} is not an integer")
    try:
        return _check_in(key, int(raw), bounds)
    except ValueError as exc:
        raise ValueError(f"query parameter {exc}") from None


def _parse_enum(params: Mapping[str, str], key: str, enum_type: type[_E]) -> _E | None:
    raw = _raw(params, key)
    if raw is None:
        return None
    try:
        return member(key, raw, enum_type)
    except ValueError as exc:
        raise ValueError(f"query parameter {exc}") from None


def _parse_pct(params: Mapping[str, str]) -> float | None:
    raw = _raw(params, "pct")
    if raw is None:
        return None
    if not _PCT_RE.fullmatch(raw):
        raise ValueError(f"query parameter pct={raw!r} is not a decimal number such as 99.9")
    value = float(raw)
    lo, hi = PERCENTILE_RANGE
    if not lo <= value <= hi:
        raise ValueError(f"query parameter pct={raw!r} must be in [{lo:g}, {hi:g}]")
    return value


def _or(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def _granularity(params: Mapping[str, str]) -> Granularity:
    kind = _or(_parse_enum(params, "gran", GranularityKind), GranularityKind.TENSOR)
    axis = _parse_int(params, "axis", AXIS_RANGE)
    group = _parse_int(params, "group", GROUP_RANGE)
    if axis is not None and kind is not GranularityKind.CHANNEL:
        raise ValueError(f"query parameter axis={axis} needs gran=channel, got gran={kind.value}")
    if group is not None and kind is not GranularityKind.GROUP:
        raise ValueError(f"query parameter group={group} needs gran=group, got gran={kind.value}")
    tile = _raw(params, "tile")
    if tile is not None and kind is not GranularityKind.BLOCK:
        raise ValueError(f"query parameter tile={tile!r} needs gran=block, got gran={kind.value}")
    if kind is GranularityKind.BLOCK:
        match = _TILE_RE.fullmatch(tile or "128x128")
        if match is None:
            raise ValueError(f"query parameter tile={tile!r} is not rows x cols such as 128x128")
        return PerBlock(int(match.group(1)), int(match.group(2)))
    if kind is GranularityKind.CHANNEL:
        return PerChannel(axis=_or(axis, 0))
    if kind is GranularityKind.GROUP:
        return PerGroup() if group is None else PerGroup(group_size=group)
    return PerTensor()


def _scale_format(params: Mapping[str, str]) -> ScaleFormat:
    kind = _or(_parse_enum(params, "sfmt", ScaleFormatKind), ScaleFormatKind.FLOAT)
    sbits = _parse_int(params, "sbits", _SBITS_RANGE)
    signed = _raw(params, "ssigned")
    sblock = _parse_int(params, "sblock", _SBLOCK_RANGE)
    if signed is not None and signed not in ("0", "1"):
        raise ValueError(f"query parameter ssigned={signed!r} must be 0 or 1")
    if kind is not ScaleFormatKind.SUPER and (sbits is not None or signed is not None):
        raise ValueError(f"query parameters sbits and ssigned need sfmt=super, got {kind.value}")
    if sblock is not None and kind not in (ScaleFormatKind.SUPER, ScaleFormatKind.DQ):
        raise ValueError(f"query parameter sblock needs sfmt=super or sfmt=dq, got {kind.value}")
    if kind is ScaleFormatKind.SUPER:
        return SuperBlockScales(_or(sbits, 6), _or(sblock, 256), signed == "1")
    if kind is ScaleFormatKind.DQ:
        return DoubleQuantScales(_or(sblock, 256))
    if kind is ScaleFormatKind.E8M0:
        return PowerOfTwoScales()
    if kind is ScaleFormatKind.FP8:
        return FP8Scales()
    if kind is ScaleFormatKind.E4M3:
        return FP8Scales(tensor_scale=False)
    return FloatScales()


def config_from_query(params: Mapping[str, str]) -> QuantConfig:
    """Parse and validate query parameters into a ``QuantConfig``.

    Raises ``ValueError`` naming the key and value for an unknown enum value, a
    non-integer or out-of-range number, an overlong string, contradictory keys, or a
    combination ``QuantConfig`` rejects (e.g. ``fmt=nf4&mode=asymmetric``).
    """
    if not isinstance(params, Mapping):
        raise ValueError(f"query parameters must be a mapping, got {type(params).__name__}")
    preset = _raw(params, "preset")
    if preset is not None:
        others = [k for k in QUERY_KEYS if k != "preset" and k in params]
        if others:
            raise ValueError(
                f"query parameter preset names a whole scheme; it cannot be combined with "
                f"{', '.join(others)}"
            )
        key = format_key(preset)  # the picker's label too: "NF4 + double quant"
        if key is None:
            raise ValueError(
                f"query parameter preset={preset!r} is not a known format; known: "
                f"{', '.join(preset_names())}"
            )
        return QuantConfig.from_name(key)
    d = QuantConfig()
    fmt = _or(_parse_enum(params, "fmt", Format), d.format)
    # a non-integer format has its own width, from 1 bit (binary) on; bits must equal it
    bits = _parse_int(params, "bits", (MIN_INT_BITS if fmt.bits is None else 1, MAX_INT_BITS))
    if fmt.bits is not None and bits is not None and bits != fmt.bits:
        raise ValueError(
            f"query parameter bits={bits} contradicts fmt={fmt.value} ({fmt.bits} bits)"
        )
    mode = _or(_parse_enum(params, "mode", Mode), d.mode)
    granularity = _granularity(params)
    range_method = _or(_parse_enum(params, "range", RangeMethod), d.range_method)
    percentile = _or(_parse_pct(params), d.percentile)
    rounding = _or(_parse_enum(params, "round", Rounding), d.rounding)
    seed = _or(_parse_int(params, "seed", SEED_RANGE), d.seed)
    scale_dtype = _or(_parse_enum(params, "sdtype", ScaleDtype), DEFAULT_SCALE_DTYPE)
    zero_point = _parse_enum(params, "zp", ZeroPoint)
    has_zero_point = fmt is Format.INT and mode is Mode.ASYMMETRIC
    if zero_point is not None and not has_zero_point:
        raise ValueError(
            f"query parameter zp={zero_point.value} needs fmt=int&mode=asymmetric, "
            f"got fmt={fmt.value}&mode={mode.value}"
        )
    scale_format = _scale_format(params)
    recipe = _or(_parse_enum(params, "recipe", Recipe), d.recipe)
    # QuantConfig's own messages speak to Python callers (reprs, field names): the
    # combinations a link can get wrong are said here in the link's keys first.
    if isinstance(scale_format, SuperBlockScales) and not isinstance(granularity, PerGroup):
        gran = _or(_parse_enum(params, "gran", GranularityKind), GranularityKind.TENSOR)
        raise ValueError(
            "query parameter sfmt=super needs gran=group (super-block scales group the "
            f"scales of groups), got gran={gran.value}"
        )
    llama = recipe is Recipe.LLAMA_CPP
    if llama and (range_method is not RangeMethod.MINMAX or rounding is not Rounding.NEAREST):
        raise ValueError(
            "query parameter recipe=llama_cpp chooses its own scales and rounds to nearest: "
            f"it needs range=minmax and round=nearest, got range={range_method.value} and "
            f"round={rounding.value}"
        )
    fields = {
        "bits": _or(bits, d.bits if fmt.bits is None else fmt.bits),
        "mode": mode,
        "granularity": granularity,
        "format": fmt,
        "range_method": range_method,
        "percentile": percentile,
        "rounding": rounding,
        "seed": seed,
        "scale_dtype": scale_dtype,
        "zero_point": _or(zero_point, d.zero_point),
        "scale_format": scale_format,
    }
    try:
        return QuantConfig(**fields, recipe=recipe)
    except (TypeError, ValueError) as exc:
        lab = _lab_config(fields) if llama else None
        if lab is not None:  # valid but for the recipe: llama.cpp has no type of its layout
            raise ValueError(
                "query parameter recipe=llama_cpp needs a scheme that llama.cpp has a GGUF "
                f"type for, and '{scheme_label(lab)}' has none (link a shipped format "
                "instead, such as preset=Q4_K or preset=Q8_0)"
            ) from None
        raise ValueError(f"query parameters do not form a valid scheme: {exc}") from None


def _lab_config(fields: Mapping[str, object]) -> QuantConfig | None:
    """The config of ``fields`` with the lab's recipe, ``None`` where that too is invalid."""
    try:
        return QuantConfig(**fields, recipe=Recipe.LAB)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
