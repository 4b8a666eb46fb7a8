"""The sweep's grid of schemes: formats x granularities x modes x bits x algorithms, and
its expansion for one tensor into the schemes that can run and those that cannot (why).

    grid = SchemeGrid(bits=(4, 8), kinds=(GranularityKind.GROUP,), group_sizes=(32, 128),
                      algorithms=(Algorithm.RTN, Algorithm.GPTQ))
    exp = expand_grid(grid, w.shape, has_calibration=True)   # a layer of the bundled model
    exp.schemes        # WeightScheme per config x algorithm that can run
    exp.skipped        # the others, each with the reason
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

import torch

from quant_core import (
    Algorithm,
    Format,
    Granularity,
    Mode,
    PerBlock,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    ZeroPoint,
    storage_cost,
)

from ..state.scheme import GranularityKind
from .weights import WeightScheme

__all__ = ["FittedGrid", "GridExpansion", "SchemeGrid", "SkippedScheme", "expand_grid", "fit_grid"]


@dataclass(frozen=True)
class SchemeGrid:
    """A grid of schemes: every combination of the chosen values, deduplicated.

    ``bits`` and ``modes`` apply to ``Format.INT`` only: the other formats have a fixed
    width and always use absmax (symmetric) scaling, so they yield one scheme per
    granularity whatever ``bits``/``modes`` hold. ``group_sizes`` apply to
    ``GranularityKind.GROUP`` only; ``axis`` to ``GranularityKind.CHANNEL`` only.
    ``algorithms`` pick the codes of every config (GPTQ with ``SWEEP_GPTQ``'s options).
    ``zero_points``: the zero-point conventions of the asymmetric integer configs (each
    asymmetric config once per convention; symmetric and codebook configs have none).
    ``base`` supplies every other field (range method, percentile, rounding, seed,
    scale dtype). ``presets``: names of shipped formats (``QuantConfig.from_name``), each
    one whole scheme added after the grid's.

    Example: ``bits=(4, 8)``, both modes, ``kinds=(TENSOR, GROUP)``, ``group_sizes=(32, 64)``,
    ``formats=(INT, NF4)`` gives ``2*2*(1+2) = 12`` INT schemes and ``1+2 = 3`` NF4 ones;
    with ``algorithms=(RTN, HQQ)`` the 12 INT configs run twice (HQQ needs an integer grid,
    so NF4 runs RTN only): 27 schemes.
    """

    bits: tuple[int, ...] = (4, 8)
    modes: tuple[Mode, ...] = (Mode.SYMMETRIC,)
    kinds: tuple[GranularityKind, ...] = (GranularityKind.TENSOR,)
    group_sizes: tuple[int, ...] = (128,)
    formats: tuple[Format, ...] = (Format.INT,)
    axis: int = 0
    base: QuantConfig = field(default_factory=QuantConfig)
    algorithms: tuple[Algorithm, ...] = (Algorithm.RTN,)
    zero_points: tuple[ZeroPoint, ...] = (ZeroPoint.INCLUDE_ZERO,)
    presets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = (
            "bits",
            "modes",
            "kinds",
            "group_sizes",
            "formats",
            "algorithms",
            "zero_points",
            "presets",
        )
        for name in names:
            value = getattr(self, name)
            if not isinstance(value, tuple):
                raise TypeError(f"SchemeGrid.{name} must be a tuple, got {type(value).__name__}")
        _check_members("modes", self.modes, Mode)
        _check_members("kinds", self.kinds, GranularityKind)
        _check_members("formats", self.formats, Format)
        _check_members("algorithms", self.algorithms, Algorithm)
        _check_members("zero_points", self.zero_points, ZeroPoint)
        if not self.zero_points:
            raise ValueError("SchemeGrid.zero_points is empty; name at least one convention")
        for b in self.bits:
            QuantConfig(bits=b)  # raises naming the bad width
        for g in self.group_sizes:
            PerGroup(g)  # raises naming the bad size
        PerChannel(self.axis)
        for name in self.presets:
            QuantConfig.from_name(name)  # raises naming the known names
        if not isinstance(self.base, QuantConfig):
            raise TypeError(f"SchemeGrid.base must be a QuantConfig, got {self.base!r}")
        if self.base.range_method is RangeMethod.ABSMEAN:
            raise ValueError("the sweep's base range cannot be absmean (symmetric-only)")


def _check_members(name: str, values: tuple[object, ...], kind: type[enum.Enum]) -> None:
    for v in values:
        if not isinstance(v, kind):
            raise TypeError(f"SchemeGrid.{name} must hold {kind.__name__} values, got {v!r}")


@dataclass(frozen=True)
class SkippedScheme:
    """A scheme left out of a sweep and why (the message of the error it raised, or the
    algorithm's ``unavailable_reason``)."""

    config: QuantConfig
    reason: str
    algorithm: Algorithm = Algorithm.RTN

    @property
    def scheme(self) -> WeightScheme:
        return WeightScheme(self.config, self.algorithm)

    @property
    def label(self) -> str:
        """``scheme_label(config)``, with the algorithm unless RTN (``WeightScheme.label``)."""
        return self.scheme.label


@dataclass(frozen=True)
class GridExpansion:
    """A grid for one shape, in grid order: ``configs`` that fit it, ``schemes`` (each
    fitting config under each algorithm that can run it) and ``skipped``."""

    configs: tuple[QuantConfig, ...]
    skipped: tuple[SkippedScheme, ...]
    schemes: tuple[WeightScheme, ...] = ()


def _granularities(grid: SchemeGrid) -> list[Granularity]:
    out: list[Granularity] = []
    for kind in grid.kinds:
        if kind is GranularityKind.TENSOR:
            out.append(PerTensor())
        elif kind is GranularityKind.CHANNEL:
            out.append(PerChannel(grid.axis))
        elif kind is GranularityKind.BLOCK:
            out.append(PerBlock(128, 128))  # DeepSeek-V3's weight tiles
        else:
            out.extend(PerGroup(g) for g in grid.group_sizes)
    return out


def _distinct_configs(grid: SchemeGrid) -> list[QuantConfig]:
    seen: dict[QuantConfig, None] = {}
    for fmt in grid.formats:
        for gran in _granularities(grid):
            if fmt is Format.INT:
                for mode in grid.modes:
                    zps = grid.zero_points if mode is Mode.ASYMMETRIC else (ZeroPoint.INCLUDE_ZERO,)
                    for zp in zps:
                        for b in grid.bits:
                            cfg = replace(
                                grid.base,
                                format=fmt,
                                granularity=gran,
                                mode=mode,
                                bits=b,
                                zero_point=zp,
                            )
                            seen.setdefault(cfg, None)
            else:
                cfg = replace(
                    grid.base, format=fmt, granularity=gran, mode=Mode.SYMMETRIC, bits=fmt.bits
                )
                seen.setdefault(cfg, None)
    for name in grid.presets:  # a shipped format is a whole scheme: not crossed with the grid
        seen.setdefault(QuantConfig.from_name(name), None)
    return list(seen)


def expand_grid(
    grid: SchemeGrid, shape: tuple[int, ...] | torch.Size, *, has_calibration: bool = False
) -> GridExpansion:
    """Every distinct scheme of ``grid``, split by whether it can run on a tensor of
    ``shape``.

    Order: format, then granularity, then mode, then bits (each in the grid's order), and
    each config's algorithms next to each other. A config whose granularity does not fit
    (a group size that does not divide the last dimension, an axis out of range) goes to
    ``skipped`` once with ``layout_for``'s message; an algorithm that cannot run a fitting
    config (``Algorithm.unavailable_reason``: GPTQ/AWQ without ``has_calibration``, GPTQ/HQQ
    on a codebook format, stochastic rounding) goes there with its reason.
    """
    shape = tuple(int(d) for d in shape)
    configs: list[QuantConfig] = []
    schemes: list[WeightScheme] = []
    skipped: list[SkippedScheme] = []
    for cfg in _distinct_configs(grid):
        try:
            storage_cost(shape, cfg)  # the layout and a format's super-blocks fit the shape
        except ValueError as exc:
            skipped.append(SkippedScheme(cfg, str(exc)))
            continue
        configs.append(cfg)
        for algorithm in dict.fromkeys(grid.algorithms):
            reason = algorithm.unavailable_reason(cfg, has_calibration=has_calibration)
            if reason is None and algorithm.needs_calibration and len(shape) != 2:
                reason = f"{algorithm.label} needs a 2-D [out, in] weight, got shape {shape}"
            if reason is None:
                schemes.append(WeightScheme(cfg, algorithm))
            else:
                skipped.append(SkippedScheme(cfg, reason, algorithm))
    return GridExpansion(tuple(configs), tuple(skipped), tuple(schemes))


@dataclass(frozen=True)
class FittedGrid:
    """A grid with the values a tensor cannot use taken out, and one sentence per change."""

    grid: SchemeGrid
    fixes: tuple[str, ...]


def fit_grid(
    grid: SchemeGrid,
    cols: int,
    offered: tuple[Algorithm, ...],
    default_group_sizes: tuple[int, ...],
) -> FittedGrid:
    """``grid`` for a matrix of ``cols`` columns whose offered algorithms are ``offered``
    (``weights.offered_algorithms``): group sizes that do not divide ``cols`` and
    algorithms not offered are left out, each with a sentence saying why; an emptied list
    falls back (group sizes to ``default_group_sizes``, algorithms to RTN) and says so.

    E.g. group sizes ``(100, 128)`` on 384 columns give ``(128,)`` and "group size 100
    does not divide the 384 columns; left out".
    """
    if cols < 1:
        raise ValueError(f"cols={cols} must be >= 1")
    fixes: list[str] = []
    groups = tuple(g for g in grid.group_sizes if cols % g == 0)
    for g in grid.group_sizes:
        if cols % g:
            fixes.append(f"group size {g} does not divide the {cols} columns; left out")
    if not groups:
        groups = default_group_sizes
        if GranularityKind.GROUP in grid.kinds:
            fixes.append(f"no group size fits; using {', '.join(map(str, groups))}")
    algorithms = tuple(a for a in grid.algorithms if a in offered)
    for a in grid.algorithms:
        if a not in offered:
            reason = a.unavailable_reason(QuantConfig(), has_calibration=False)
            fixes.append(f"{reason or a.label + ' is not offered here'}; left out")
    if not algorithms:
        algorithms = (Algorithm.RTN,)
        fixes.append("no algorithm of the link runs here; using RTN")
    return FittedGrid(replace(grid, group_sizes=groups, algorithms=algorithms), tuple(fixes))
