"""Value objects that describe a quantization scheme.

Every choice is an enum or a tiny frozen dataclass, so a scheme is hashable (it keys
caches in the dashboard) and cannot be built in an invalid state: all checks happen in
``__post_init__`` and raise ``ValueError``/``TypeError`` naming the bad value.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "MAX_INT_BITS",
    "MIN_INT_BITS",
    "Format",
    "Granularity",
    "Mode",
    "PerChannel",
    "PerGroup",
    "PerTensor",
    "QuantConfig",
    "RangeMethod",
    "Rounding",
    "ScaleDtype",
    "ZeroPoint",
    "int_range",
]

MIN_INT_BITS = 2
MAX_INT_BITS = 16


class Mode(enum.Enum):
    """How the real range maps onto the integer range ``[qmin, qmax]``.

    SYMMETRIC: ``s = max|r| / qmax``, ``z = 0``. Example, 8 bits, r in [-2.0, 1.0]:
    ``s = 2/127 = 0.015748``; ``r = 1.0`` gives ``q = round(63.5) = 64`` (half to even).

    ASYMMETRIC: ``s = (r_max - r_min) / (qmax - qmin)``, ``z = qmin - round(r_min / s)``,
    under the config's ``ZeroPoint`` convention, by default ``INCLUDE_ZERO``: the range is
    first widened to contain 0 (``r_min <= 0 <= r_max``), so ``z`` is never clamped and 0
    is exact. Example, 8 bits, r in [-2.0, 1.0] (contains 0, so every convention agrees):
    ``s = 3/255 = 0.011765``, ``z = -128 - round(-170) = 42``; ``r = 1.0`` gives
    ``q = round(85 + 42) = 127``. A range without 0: see ``ZeroPoint``.
    """

    SYMMETRIC = "symmetric"
    ASYMMETRIC = "asymmetric"


class ZeroPoint(enum.Enum):
    """Where an asymmetric block's grid sits; they differ only for a range without 0.

    Example, 2 bits (codes -2..1, 3 steps), a block with range [1.0, 4.0]:

    INCLUDE_ZERO (the default, as PyTorch's observers and torchao do): widen the range to
    contain 0, ``[min(lo, 0), max(hi, 0)] = [0, 4]``; ``s = 4/3``, ``z = qmin - round(0/s)
    = -2``, levels ``s (q - z) = 0, 4/3, 8/3, 4``. ``z`` is an integer in ``[qmin, qmax]``
    that is never clamped, and 0 is exactly representable.

    FLOAT_MIN (as tinygemm and GGUF Q4_1 store it): ``x_hat = s q + m`` with a float
    offset ``m``, stored in the scale dtype, the value of code 0: ``s = (hi - lo)/(qmax -
    qmin) = 1``, ``m = lo - s qmin = 3``, levels ``1, 2, 3, 4``: the block's own extremes.
    (GGUF's "min" is the value of the lowest code, ``m + s qmin``.) 0 need not be a level.

    COURSE_CLAMP (the course's convention, kept to follow its lessons): ``s = 1``,
    ``z = clamp(round(qmin - lo/s), qmin, qmax) = clamp(-3) = -2``, levels ``0, 1, 2, 3``:
    the grid covers ``[0, hi - lo]`` instead of ``[lo, hi]``, and 4.0 saturates at 3.0.

    Symmetric and codebook formats have no zero point (their grids always contain 0); a
    config with one of them always holds ``INCLUDE_ZERO``.
    """

    INCLUDE_ZERO = "include_zero"
    FLOAT_MIN = "float_min"
    COURSE_CLAMP = "course_clamp"


class Format(enum.Enum):
    """The value set a code indexes.

    INT: the linear (affine) integer grid, any width from 2 to 16 bits.
    NF4: the 16 normal-float values of QLoRA/bitsandbytes, scaled by absmax.
    FP4_E2M1: the 16 values of 4-bit float (``0, 0.5, 1, 1.5, 2, 3, 4, 6`` and negatives).
    FP8_E4M3 / FP8_E5M2: ``torch.float8_e4m3fn`` / ``torch.float8_e5m2`` after absmax scaling.
    """

    INT = "int"
    NF4 = "nf4"
    FP4_E2M1 = "fp4_e2m1"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"

    @property
    def bits(self) -> int | None:
        """Storage bits of one code; ``None`` for INT, whose width is a config choice."""
        return _FORMAT_BITS[self]

    @property
    def is_linear(self) -> bool:
        return self is Format.INT


_FORMAT_BITS: dict[Format, int | None] = {
    Format.INT: None,
    Format.NF4: 4,
    Format.FP4_E2M1: 4,
    Format.FP8_E4M3: 8,
    Format.FP8_E5M2: 8,
}


class RangeMethod(enum.Enum):
    """How the range ``[r_min, r_max]`` (or ``max|r|``) of each block is chosen.

    MINMAX: the block's own extremes; nothing is clipped.
    PERCENTILE: the ``percentile``-th and ``(100 - percentile)``-th percentiles (of ``|r|``
    in symmetric mode); values outside are clipped to the range's ends.
    MSE: the clipping ratio ``alpha`` in ``(0, 1]`` that minimises the block's
    quantization MSE, searched over a grid; the range becomes ``alpha * [r_min, r_max]``.
    """

    MINMAX = "minmax"
    PERCENTILE = "percentile"
    MSE = "mse"


class Rounding(enum.Enum):
    """NEAREST: ``torch.round`` (half to even). STOCHASTIC: ``floor(v + u)``, ``u ~ U[0, 1)``,
    so ``E[q] = v``; reproducible through the config's ``seed`` or a passed ``torch.Generator``."""

    NEAREST = "nearest"
    STOCHASTIC = "stochastic"


class ScaleDtype(enum.Enum):
    """The dtype scales are stored in. Scales are rounded to it before use, so the error
    shown is the error of what would be stored, and storage accounting is honest."""

    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"

    @property
    def bits(self) -> int:
        return 32 if self is ScaleDtype.FP32 else 16


@dataclass(frozen=True)
class PerTensor:
    """One scale for the whole tensor: ``x`` of shape ``[4, 6]`` has a scale of shape ``[]``."""


@dataclass(frozen=True)
class PerChannel:
    """One scale per index along ``axis``: the axis that keeps its own scale.

    ``x`` of shape ``[4, 6]``: ``PerChannel(axis=0)`` gives a scale of shape ``[4]`` (one
    per row, the output channels of a linear weight); ``PerChannel(axis=1)`` or
    ``axis=-1`` gives shape ``[6]``.
    """

    axis: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.axis, bool) or not isinstance(self.axis, int):
            raise TypeError(f"PerChannel axis must be an int, got {self.axis!r}")


@dataclass(frozen=True)
class PerGroup:
    """Runs of ``group_size`` consecutive elements along the last dimension share a scale.

    ``x`` of shape ``[4, 6]`` with ``group_size=3`` has ``4 * 6/3 = 8`` groups and a scale of
    shape ``[4, 2]``, listed row by row by ``.flatten()``. ``group_size`` must divide the
    last dimension.
    """

    group_size: int = 128

    def __post_init__(self) -> None:
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int):
            raise TypeError(f"PerGroup group_size must be an int, got {self.group_size!r}")
        if self.group_size < 1:
            raise ValueError(f"PerGroup group_size must be >= 1, got {self.group_size}")


Granularity = PerTensor | PerChannel | PerGroup


def int_range(bits: int) -> tuple[int, int]:
    """``(qmin, qmax) = (-2^(b-1), 2^(b-1) - 1)``: the signed code range, both modes."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _coerce_enum(value: object, enum_type: type[enum.Enum], name: str) -> enum.Enum:
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type(value.lower())
        except ValueError:
            allowed = ", ".join(m.value for m in enum_type)
            raise ValueError(f"unknown {name} {value!r}; expected one of: {allowed}") from None
    raise TypeError(f"{name} must be a {enum_type.__name__} or str, got {type(value).__name__}")


@dataclass(frozen=True)
class QuantConfig:
    """A complete quantization scheme.

    ``bits``: code width, 2..16 for ``Format.INT``; for the other formats it is the
    format's own width (4 for NF4/FP4, 8 for FP8) and is set to it.
    ``mode``: only ``Mode.SYMMETRIC`` (absmax scaling) for the non-linear formats.
    ``percentile``: used by ``RangeMethod.PERCENTILE``, in ``(50, 100]``: 99.9 keeps the
    range between the 0.1st and 99.9th percentiles.
    ``seed``: seeds stochastic rounding when no generator is passed to ``quantize``.
    ``zero_point``: the asymmetric zero-point convention (see ``ZeroPoint``); set to
    ``INCLUDE_ZERO`` for symmetric and codebook schemes, which have no zero point.
    """

    bits: int = 8
    mode: Mode = Mode.SYMMETRIC
    granularity: Granularity = field(default_factory=PerTensor)
    format: Format = Format.INT
    range_method: RangeMethod = RangeMethod.MINMAX
    percentile: float = 99.9
    rounding: Rounding = Rounding.NEAREST
    seed: int = 0
    scale_dtype: ScaleDtype = ScaleDtype.FP32
    zero_point: ZeroPoint = ZeroPoint.INCLUDE_ZERO

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "mode", _coerce_enum(self.mode, Mode, "mode"))
        set_(self, "format", _coerce_enum(self.format, Format, "format"))
        set_(self, "range_method", _coerce_enum(self.range_method, RangeMethod, "range_method"))
        set_(self, "rounding", _coerce_enum(self.rounding, Rounding, "rounding"))
        set_(self, "scale_dtype", _coerce_enum(self.scale_dtype, ScaleDtype, "scale_dtype"))
        set_(self, "zero_point", _coerce_enum(self.zero_point, ZeroPoint, "zero_point"))
        if not isinstance(self.granularity, PerTensor | PerChannel | PerGroup):
            raise TypeError(
                "granularity must be PerTensor(), PerChannel(axis) or PerGroup(group_size), "
                f"got {self.granularity!r}"
            )
        if isinstance(self.bits, bool) or not isinstance(self.bits, int):
            raise TypeError(f"bits must be an int, got {self.bits!r}")
        fmt_bits = self.format.bits
        if fmt_bits is None:
            if not MIN_INT_BITS <= self.bits <= MAX_INT_BITS:
                raise ValueError(
                    f"bits={self.bits} is outside the supported range "
                    f"{MIN_INT_BITS}..{MAX_INT_BITS} for integer formats"
                )
        else:
            set_(self, "bits", fmt_bits)
            if self.mode is not Mode.SYMMETRIC:
                raise ValueError(
                    f"format {self.format.value} uses absmax (symmetric) scaling; "
                    f"mode={self.mode.value} is not supported for it"
                )
        if isinstance(self.percentile, bool) or not isinstance(self.percentile, int | float):
            raise TypeError(f"percentile must be a number, got {self.percentile!r}")
        if not 50.0 < float(self.percentile) <= 100.0:
            raise ValueError(f"percentile={self.percentile} must be in (50, 100]")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"seed must be an int, got {self.seed!r}")
        if not self.has_zero_point:
            # one spelling per scheme: the convention means nothing without a zero point
            set_(self, "zero_point", ZeroPoint.INCLUDE_ZERO)

    @property
    def qmin(self) -> int:
        return int_range(self.bits)[0]

    @property
    def qmax(self) -> int:
        return int_range(self.bits)[1]

    @property
    def has_zero_point(self) -> bool:
        """Asymmetric integer schemes: each block stores an offset besides its scale (an
        integer ``z``, or the float ``m`` under ``ZeroPoint.FLOAT_MIN``)."""
        return self.format is Format.INT and self.mode is Mode.ASYMMETRIC

    @property
    def float_offset(self) -> bool:
        """``x_hat = s q + m`` with a float ``m`` per block (``ZeroPoint.FLOAT_MIN``)."""
        return self.has_zero_point and self.zero_point is ZeroPoint.FLOAT_MIN

    def describe(self) -> str:
        """A short human label, e.g. ``int4 asym g32``, ``int4 asym g32 float-min`` or
        ``nf4 per-channel(0)`` (the default ``INCLUDE_ZERO`` convention is not named)."""
        gran = self.granularity
        if isinstance(gran, PerTensor):
            g = "per-tensor"
        elif isinstance(gran, PerChannel):
            g = f"per-channel({gran.axis})"
        else:
            g = f"g{gran.group_size}"
        if self.format is Format.INT:
            head = f"int{self.bits} {'sym' if self.mode is Mode.SYMMETRIC else 'asym'}"
        else:
            head = self.format.value
        extras = []
        if self.range_method is RangeMethod.PERCENTILE:
            extras.append(f"p{self.percentile:g}")
        elif self.range_method is RangeMethod.MSE:
            extras.append("mse-clip")
        if self.has_zero_point and self.zero_point is not ZeroPoint.INCLUDE_ZERO:
            extras.append("float-min" if self.float_offset else "clamped-z")
        if self.rounding is Rounding.STOCHASTIC:
            extras.append("stoch")
        if self.scale_dtype is not ScaleDtype.FP32:
            extras.append(f"s:{self.scale_dtype.value}")
        return " ".join([head, g, *extras])
