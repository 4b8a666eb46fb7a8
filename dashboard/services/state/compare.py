"""URL state of the comparison pages: the sweep's grid and plot axis, and A/B's two schemes.

Sweep keys, prefixed ``sw.`` (lists are comma-separated, in the grid's order):

=============  =====================================================  ======================
key            value                                                  ``SchemeGrid`` field
=============  =====================================================  ======================
``sw.bits``    integers 2..16, e.g. ``2,4,8``                         ``bits``
``sw.modes``   ``symmetric`` | ``asymmetric``                         ``modes``
``sw.gran``    ``tensor`` | ``channel`` | ``group``                   ``kinds``
``sw.groups``  integers 1..1048576                                    ``group_sizes``
``sw.fmt``     ``int`` | ``nf4`` | ``fp4_e2m1`` | ``fp8_e4m3`` | ...  ``formats``
``sw.algo``    ``rtn`` | ``gptq`` | ``awq`` | ``hqq``                 ``algorithms``
``sw.zp``      ``include_zero`` | ``float_min`` | ``course_clamp``     ``zero_points``
``sw.range``   ``minmax`` | ``percentile`` | ``mse``                  ``base.range_method``
``sw.sdtype``  ``fp32`` | ``fp16`` | ``bf16``                         ``base.scale_dtype``
``sw.calib``   ``custom`` (own calibration sentences; text not carried)
``sw.y``       ``mse`` | ``sqnr_db`` | ``output_mse``: the plot's error axis
=============  =====================================================  ======================

A/B keys: scheme A's config and algorithm under ``a.`` (``a.bits``, ``a.mode``, ...,
``a.algo``, ``a.damp``, ``a.actord``, ``a.calib``: the keys of ``config_to_query`` and
``algorithm_to_query``), scheme B's under ``b.``.

Parsing never raises for bad values: each unusable part is ``None`` with one sentence in
``problems``, so one bad value loses only its part. Nothing is evaluated or unpickled.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TypeVar

from quant_core import (
    Algorithm,
    Format,
    Mode,
    QuantConfig,
    RangeMethod,
    ScaleDtype,
    ZeroPoint,
    preset_names,
)

from ..compare.frontier import ErrorAxis
from ..compare.grid import SchemeGrid
from .algorithm import ALGORITHM_KEYS, AlgorithmChoice, algorithm_from_query, algorithm_to_query
from .query import link_keys, member
from .scheme import GROUP_RANGE, QUERY_KEYS, GranularityKind, config_from_query, config_to_query

__all__ = [
    "AB_PREFIXES",
    "SWEEP_PREFIX",
    "SideQuery",
    "SweepQuery",
    "ab_to_query",
    "side_from_query",
    "sweep_from_query",
    "sweep_to_query",
]

SWEEP_PREFIX = "sw."
AB_PREFIXES = ("a.", "b.")
MAX_LIST_LENGTH = 200
_INT_ITEM = re.compile(r"[1-9][0-9]{0,6}")
_E = TypeVar("_E", bound=enum.Enum)
_T = TypeVar("_T")


_GRID_PARTS = (
    "bits",
    "modes",
    "kinds",
    "group_sizes",
    "formats",
    "algorithms",
    "zero_points",
    "presets",
)


@dataclass(frozen=True)
class SweepQuery:
    """What a link said about the sweep, part by part: ``None`` where it said nothing or
    something unusable (then ``problems`` says what, one sentence each)."""

    bits: tuple[int, ...] | None = None
    modes: tuple[Mode, ...] | None = None
    kinds: tuple[GranularityKind, ...] | None = None
    group_sizes: tuple[int, ...] | None = None
    formats: tuple[Format, ...] | None = None
    algorithms: tuple[Algorithm, ...] | None = None
    zero_points: tuple[ZeroPoint, ...] | None = None
    presets: tuple[str, ...] | None = None
    range_method: RangeMethod | None = None
    scale_dtype: ScaleDtype | None = None
    custom_calibration: bool = False
    axis: ErrorAxis | None = None
    problems: tuple[str, ...] = ()

    @property
    def has_grid(self) -> bool:
        """Whether the link carries a grid: at least one grid part parsed (the others
        then take the page's defaults)."""
        parts = (*_GRID_PARTS, "range_method", "scale_dtype")
        return any(getattr(self, p) is not None for p in parts)

    def grid(self, defaults: SchemeGrid) -> SchemeGrid:
        """The link's grid, each part it lacks taken from ``defaults``."""

        def pick(name: str) -> object:
            value = getattr(self, name)
            return getattr(defaults, name) if value is None else value

        base = QuantConfig(
            range_method=self.range_method or defaults.base.range_method,
            scale_dtype=self.scale_dtype or defaults.base.scale_dtype,
        )
        return SchemeGrid(**{p: pick(p) for p in _GRID_PARTS}, base=base)  # type: ignore[arg-type]


def _base_fields_carried(base: QuantConfig) -> None:
    """``ValueError`` when ``base`` differs from the defaults in a field no link carries."""
    carried = QuantConfig(range_method=base.range_method, scale_dtype=base.scale_dtype)
    for f in fields(QuantConfig):
        if getattr(base, f.name) != getattr(carried, f.name):
            raise ValueError(
                f"a sweep link carries the base scheme's range and scale dtype only, not "
                f"{f.name}={getattr(base, f.name)!r}"
            )


def sweep_to_query(
    grid: SchemeGrid, custom_calibration: bool = False, axis: ErrorAxis | None = None
) -> dict[str, str]:
    """``grid`` (and the calibration source and the plot's axis) as ``sw.`` keys.
    ``ValueError`` for a grid a link cannot carry (a channel axis other than 0; base fields
    other than range method and scale dtype)."""
    if not isinstance(grid, SchemeGrid):
        raise TypeError(f"grid must be a SchemeGrid, got {type(grid).__name__}")
    if grid.axis != 0:
        raise ValueError(f"a sweep link carries channel axis 0 only, got {grid.axis}")
    _base_fields_carried(grid.base)
    p = SWEEP_PREFIX
    out = {
        p + "bits": ",".join(str(b) for b in grid.bits),
        p + "modes": ",".join(m.value for m in grid.modes),
        p + "gran": ",".join(k.value for k in grid.kinds),
        p + "groups": ",".join(str(g) for g in grid.group_sizes),
        p + "fmt": ",".join(f.value for f in grid.formats),
        p + "algo": ",".join(a.value for a in grid.algorithms),
        p + "zp": ",".join(z.value for z in grid.zero_points),
        p + "range": grid.base.range_method.value,
        p + "sdtype": grid.base.scale_dtype.value,
    }
    if grid.presets:
        out[p + "presets"] = ",".join(grid.presets)
    if custom_calibration:
        out[p + "calib"] = "custom"
    if axis is not None:
        out[p + "y"] = axis.value
    return out




def _int_item(lo: int, hi: int) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        if not _INT_ITEM.fullmatch(raw) or not lo <= int(raw) <= hi:
            raise ValueError(f"{key} holds {raw!r}, not an integer in {lo}..{hi}")
        return int(raw)

    return parse


def _enum_item(kind: type[_E]) -> Callable[[str, str], _E]:
    return lambda key, raw: member(key, raw, kind)


def _preset_item(key: str, raw: str) -> str:
    try:
        return QuantConfig.from_name(raw).name
    except ValueError:
        raise ValueError(
            f"{key} holds {raw!r}, not a shipped format ({', '.join(preset_names())})"
        ) from None


class _SweepRange(enum.Enum):
    """The range methods a sweep's base takes (absmean is symmetric-only: not in a grid of
    both modes)."""

    MINMAX = RangeMethod.MINMAX.value
    PERCENTILE = RangeMethod.PERCENTILE.value
    MSE = RangeMethod.MSE.value


def _list(key: str, raw: str, item: Callable[[str, str], _T]) -> tuple[_T, ...]:
    if len(raw) > MAX_LIST_LENGTH:
        raise ValueError(f"{key} is too long ({len(raw)} characters)")
    if not raw:
        raise ValueError(f"{key} is empty")
    values = tuple(item(key, part) for part in raw.split(","))
    if len(set(values)) != len(values):
        raise ValueError(f"{key}={raw!r} repeats a value")
    return values


_LISTS: dict[str, tuple[str, Callable[[str, str], object]]] = {
    "bits": ("bits", _int_item(2, 16)),
    "modes": ("modes", _enum_item(Mode)),
    "gran": ("kinds", _enum_item(GranularityKind)),
    "groups": ("group_sizes", _int_item(*GROUP_RANGE)),
    "fmt": ("formats", _enum_item(Format)),
    "algo": ("algorithms", _enum_item(Algorithm)),
    "zp": ("zero_points", _enum_item(ZeroPoint)),
    "presets": ("presets", _preset_item),
}
# Lists a grid of shipped formats alone writes empty (``sweep_to_query``: ``sw.fmt=`` when
# the grid has no format of its own; the form asks for granularities only beside one):
# beside ``sw.presets`` an empty one means "none", alone it names no scheme and is refused.
_EMPTY_BESIDE_PRESETS = ("fmt", "gran")
_SINGLES: dict[str, tuple[str, Callable[[str, str], object]]] = {
    "range": ("range_method", lambda k, raw: RangeMethod(member(k, raw, _SweepRange).value)),
    "sdtype": ("scale_dtype", _enum_item(ScaleDtype)),
    "y": ("axis", _enum_item(ErrorAxis)),
}


def sweep_from_query(params: Mapping[str, str]) -> SweepQuery:
    """Parse the ``sw.`` keys of ``params`` part by part; keys of other pages are
    ignored. Never raises for bad values: see ``SweepQuery``."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, got {type(params).__name__}")
    parsed: dict[str, object] = {}
    problems: list[str] = []
    items = [(k, name, lambda key, raw, f=f: _list(key, raw, f)) for k, (name, f) in _LISTS.items()]
    items += [(k, name, f) for k, (name, f) in _SINGLES.items()]
    # presets first: an empty format list means "none" only beside shipped formats that
    # parsed (a link whose every preset was refused left an empty grid, and the page said
    # "No scheme of this grid can run on this tensor (see why above)" with nothing above)
    items.sort(key=lambda item: item[0] != "presets")
    for k, name, parse in items:
        key = SWEEP_PREFIX + k
        raw = params.get(key)
        if raw is None:
            continue
        if raw == "" and parsed.get("presets") and k in _EMPTY_BESIDE_PRESETS:
            parsed[name] = ()
            continue
        try:
            parsed[name] = parse(key, str(raw))
        except ValueError as exc:
            # the page writes "Ignored the link's {problem}.": name the key first
            problems.append(f"{key} ({exc})")
    calib = params.get(SWEEP_PREFIX + "calib")
    if calib is not None and calib not in ("bundled", "custom"):
        key = SWEEP_PREFIX + "calib"
        problems.append(f"{key} ({key}={str(calib)[:40]!r} must be bundled or custom)")
    return SweepQuery(
        **parsed,  # type: ignore[arg-type]
        custom_calibration=calib == "custom",
        problems=tuple(problems),
    )


@dataclass(frozen=True)
class SideQuery:
    """What a link said about one A/B side: its config and algorithm, ``None`` where it
    said nothing or something unusable (``problems``, one sentence each)."""

    config: QuantConfig | None = None
    algorithm: AlgorithmChoice | None = None
    problems: tuple[str, ...] = ()


def _check_prefix(prefix: str) -> None:
    if prefix not in AB_PREFIXES:
        raise ValueError(f"prefix {prefix!r} is not one of {AB_PREFIXES}")


def side_to_query(prefix: str, cfg: QuantConfig, choice: AlgorithmChoice) -> dict[str, str]:
    """One side's config and algorithm under ``prefix`` (``"a."`` or ``"b."``)."""
    _check_prefix(prefix)
    both = {**config_to_query(cfg), **algorithm_to_query(choice)}
    return {prefix + k: v for k, v in both.items()}


def ab_to_query(
    cfg_a: QuantConfig, choice_a: AlgorithmChoice, cfg_b: QuantConfig, choice_b: AlgorithmChoice
) -> dict[str, str]:
    """Both sides' keys (``a.`` then ``b.``)."""
    return {**side_to_query("a.", cfg_a, choice_a), **side_to_query("b.", cfg_b, choice_b)}


def side_from_query(params: Mapping[str, str], prefix: str) -> SideQuery:
    """Parse one side's keys; never raises for bad values (see ``SideQuery``). A side the
    link mentions without algorithm keys is RTN (``algorithm_to_query`` leaves the default
    out), so Back to such an address restores RTN."""
    _check_prefix(prefix)
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, got {type(params).__name__}")
    side = "A" if prefix == "a." else "B"
    parsed: dict[str, object] = {}
    problems: list[str] = []
    mentioned = any(prefix + k in params for k in (*QUERY_KEYS, *ALGORITHM_KEYS))
    for name, keys, parse in (
        ("config", QUERY_KEYS, config_from_query),
        ("algorithm", ALGORITHM_KEYS, algorithm_from_query),
    ):
        raw = {k: params[prefix + k] for k in keys if prefix + k in params}
        if not raw and (name == "config" or not mentioned):
            continue
        try:
            parsed[name] = parse(raw)
        except ValueError as exc:
            problems.append(f"scheme {side} {name} ({link_keys(str(exc), prefix, keys)})")
    return SideQuery(**parsed, problems=tuple(problems))  # type: ignore[arg-type]
