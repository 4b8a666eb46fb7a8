"""Value objects that describe a quantization scheme.

Every choice is an enum or a tiny frozen dataclass, so a scheme is hashable (it keys
caches in the dashboard) and cannot be built in an invalid state: all checks happen in
``__post_init__`` and raise ``ValueError``/``TypeError`` naming the bad value.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TypeVar

__all__ = [
    "MAX_INT_BITS",
    "MAX_SEED",
    "MIN_INT_BITS",
    "DoubleQuantScales",
    "FP8Scales",
    "FloatScales",
    "Format",
    "Granularity",
    "Mode",
    "PerBlock",
    "PerChannel",
    "PerGroup",
    "PerTensor",
    "PowerOfTwoScales",
    "QuantConfig",
    "RangeMethod",
    "Recipe",
    "Rounding",
    "ScaleDtype",
    "ScaleFormat",
    "SuperBlockScales",
    "ZeroPoint",
    "coerce_enum",
    "int_range",
]

MIN_INT_BITS = 2
MAX_INT_BITS = 16
MAX_SEED = 2**64 - 1
"""The largest ``QuantConfig.seed``: ``torch.Generator.manual_seed`` takes ``0..2^64-1``."""


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
    FP4_BNB: bitsandbytes' FP4 (``quant_type="fp4"``), not OCP E2M1 scaled: its table is
    ``(0, 0.0625, 8, 12, 4, 6, 2, 3) / 12`` and negatives, by code, scaled by absmax.
    FP6_E3M2 / FP6_E2M3: the OCP microscaling 6-bit floats (no Inf/NaN; largest 28 and 7.5).
    FP8_E4M3 / FP8_E5M2: ``torch.float8_e4m3fn`` / ``torch.float8_e5m2`` after absmax scaling.
    IQ4_NL: llama.cpp's 16 non-linear levels ``-127, -104, -83, -65, -49, -35, -22, -10, 1,
    13, 25, 38, 53, 69, 89, 113`` (IQ4_NL, IQ4_XS), a scale times a level.
    TERNARY: ``-1, 0, 1`` (BitNet b1.58, GGUF TQ2_0), code ``c`` holds ``c - 1`` in 2 bits.
    TERNARY_PACKED: the same values, five codes per byte in base 3 (``3^5 = 243 <= 256``),
    1.6 bits each (GGUF TQ1_0).
    BINARY: ``-1, +1`` in one bit, code ``c`` holds ``2c - 1`` (GGUF Q1_0): a scale times a
    sign; ``0`` rounds to ``+1``.
    """

    INT = "int"
    NF4 = "nf4"
    FP4_E2M1 = "fp4_e2m1"
    FP4_BNB = "fp4_bnb"
    FP6_E3M2 = "fp6_e3m2"
    FP6_E2M3 = "fp6_e2m3"
    FP8_E4M3 = "fp8_e4m3"
    FP8_E5M2 = "fp8_e5m2"
    IQ4_NL = "iq4_nl"
    TERNARY = "ternary"
    TERNARY_PACKED = "ternary_packed"
    BINARY = "binary"

    @property
    def bits(self) -> int | None:
        """Width of one code; ``None`` for INT, whose width is a config choice."""
        return _FORMAT_BITS[self]

    @property
    def storage_bits(self) -> Fraction | None:
        """Bits one code takes in storage: ``bits``, but ``8/5`` for ``TERNARY_PACKED``
        (a block's codes then take ``ceil(n/5)`` bytes); ``None`` for INT."""
        if self is Format.TERNARY_PACKED:
            return Fraction(8, 5)
        return None if self.bits is None else Fraction(self.bits)

    @property
    def is_linear(self) -> bool:
        return self is Format.INT

    @property
    def is_float(self) -> bool:
        """A floating-point element format (FP4/FP6/FP8): ties round to the even code."""
        return self in _FLOAT_FORMATS

    @property
    def max_exponent(self) -> int:
        """``emax``: the exponent of the format's largest power of two (FP4 E2M1: 2, as
        ``6 = 1.5 * 2^2``; FP6 E3M2: 4; FP6 E2M3: 2; FP8 E4M3: 8; FP8 E5M2: 15; an INT
        element of MX is ``q * 2^-(b-2)``, so 0). A power-of-two (E8M0) scale is
        ``2^(floor(log2 amax) - emax)``, as the OCP microscaling spec defines it."""
        if self not in _EMAX:
            raise ValueError(f"format {self.value} has no power-of-two element scaling")
        return _EMAX[self]


_FORMAT_BITS: dict[Format, int | None] = {
    Format.INT: None,
    Format.NF4: 4,
    Format.FP4_E2M1: 4,
    Format.FP4_BNB: 4,
    Format.FP6_E3M2: 6,
    Format.FP6_E2M3: 6,
    Format.FP8_E4M3: 8,
    Format.FP8_E5M2: 8,
    Format.IQ4_NL: 4,
    Format.TERNARY: 2,
    Format.TERNARY_PACKED: 2,
    Format.BINARY: 1,
}
_FLOAT_FORMATS = frozenset(
    {Format.FP4_E2M1, Format.FP6_E3M2, Format.FP6_E2M3, Format.FP8_E4M3, Format.FP8_E5M2}
)
_EMAX = {
    Format.INT: 0,
    Format.FP4_E2M1: 2,
    Format.FP6_E3M2: 4,
    Format.FP6_E2M3: 2,
    Format.FP8_E4M3: 8,
    Format.FP8_E5M2: 15,
}


class RangeMethod(enum.Enum):
    """How the range ``[r_min, r_max]`` (or ``max|r|``) of each block is chosen.

    MINMAX: the block's own extremes; nothing is clipped.
    PERCENTILE: the ``percentile``-th and ``(100 - percentile)``-th percentiles (of ``|r|``
    in symmetric mode); values outside are clipped to the range's ends.
    MSE: the clipping ratio ``alpha`` in ``(0, 1]`` that minimises the block's
    quantization MSE, searched over a grid; the range becomes ``alpha * [r_min, r_max]``.
    ABSMEAN: ``[-a, a]`` with ``a = mean|r|`` (BitNet b1.58's absmean: with ternary codes
    the scale is the mean magnitude and everything beyond ``+-a`` rounds to ``+-1``);
    symmetric mode only.
    """

    MINMAX = "minmax"
    PERCENTILE = "percentile"
    MSE = "mse"
    ABSMEAN = "absmean"


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


@dataclass(frozen=True)
class PerBlock:
    """One scale per ``rows x cols`` tile of a 2-D tensor (DeepSeek-V3's block-wise FP8
    uses 128 x 128 weight tiles).

    ``x`` of shape ``[256, 384]`` with ``PerBlock(128, 128)`` has ``2 * 3 = 6`` tiles and a
    scale of shape ``[2, 3]``, listed row by row by ``.flatten()``; both dimensions must be
    multiples of the tile's.
    """

    rows: int = 128
    cols: int = 128

    def __post_init__(self) -> None:
        for name in ("rows", "cols"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"PerBlock {name} must be an int, got {v!r}")
            if v < 1:
                raise ValueError(f"PerBlock {name} must be >= 1, got {v}")


Granularity = PerTensor | PerChannel | PerGroup | PerBlock


# -- how block scales are stored: the second level of a two-level format ----------------------


@dataclass(frozen=True)
class FloatScales:
    """Each block's scale (and float offset) is stored as a float of the config's
    ``scale_dtype``: ``s = fp16(absmax / qmax)`` for int4 with fp16 scales (GGUF Q4_0's
    ``d``), 16 bits per block."""


@dataclass(frozen=True)
class PowerOfTwoScales:
    """E8M0 (OCP microscaling): each block stores an 8-bit biased exponent ``e``, the scale
    is ``2^(e - 127)``: ``e = clamp(floor(log2 amax) - emax + 127, 0, 254)`` with ``emax``
    the element format's largest exponent (``Format.max_exponent``). Example, MXFP4, a block
    with ``amax = 5.0``: ``floor(log2 5) = 2``, ``emax = 2``, scale ``2^0 = 1``, and 5.0
    rounds to the FP4 level 4 or 6. 8 bits per block; symmetric formats only."""


@dataclass(frozen=True)
class FP8Scales:
    """NVFP4's two levels: each block's scale is an FP8 E4M3 number under one float32
    scale per tensor, ``t = amax_tensor / (448 * max|values|)``: block scale
    ``e4m3(amax_block / max|values| / t)``, value ``t * e4m3 * v``. 8 bits per block and
    32 per tensor; symmetric formats only.

    ``tensor_scale=False``: no tensor scale (``t = 1``), the block scale is the E4M3
    number itself, ``e4m3(amax_block / max|values|)``: GGUF's NVFP4 (llama.cpp's "UE4M3",
    an E4M3 byte without a sign), 8 bits per block and nothing per tensor. Example, FP4
    values (``max|values| = 6``), a block with ``amax = 3``: scale ``e4m3(0.5) = 0.5``."""

    tensor_scale: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.tensor_scale, bool):
            raise TypeError(f"FP8Scales tensor_scale must be a bool, got {self.tensor_scale!r}")


@dataclass(frozen=True)
class SuperBlockScales:
    """llama.cpp's K-quant scales: each block's scale (and, for float-min schemes, its min)
    is a ``bits``-bit integer times one scale (and one min) per super-block of
    ``super_block`` consecutive values, stored in the config's ``scale_dtype`` (fp16 in
    GGUF). ``signed``: the integers are signed (Q3_K, Q6_K and IQ4_XS scales; Q3_K and
    IQ4_XS store them as ``sc + 32`` in 6 bits). Example, Q4_K: blocks of 32, 6-bit scale
    and min each, fp16 ``d`` and ``dmin`` per 256: ``x = d sc q - dmin m``, and
    ``4 + 12/32 + 32/256 = 4.5`` bits per value."""

    bits: int = 6
    super_block: int = 256
    signed: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int):
            raise TypeError(f"SuperBlockScales bits must be an int, got {self.bits!r}")
        if not 2 <= self.bits <= 8:
            raise ValueError(f"SuperBlockScales bits={self.bits} must be in 2..8")
        sb = self.super_block
        if isinstance(sb, bool) or not isinstance(sb, int) or sb < 2:
            raise ValueError(f"SuperBlockScales super_block must be an int >= 2, got {sb!r}")
        if not isinstance(self.signed, bool):
            raise TypeError(f"SuperBlockScales signed must be a bool, got {self.signed!r}")


@dataclass(frozen=True)
class DoubleQuantScales:
    """bitsandbytes' double quantization (QLoRA): the float32 absmax of every block is
    quantized again: minus their mean (one float32 per tensor), 8-bit codes of
    bitsandbytes' dynamic map in blocks of ``block`` scales, each with a float32 absmax.
    NF4 with blocks of 64: ``4 + 8/64 + 32/(64 * 256) = 4.127`` bits per value (plus 32
    bits per tensor) instead of ``4 + 32/64 = 4.5``."""

    block: int = 256

    def __post_init__(self) -> None:
        b = self.block
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"DoubleQuantScales block must be an int >= 1, got {b!r}")


ScaleFormat = FloatScales | PowerOfTwoScales | FP8Scales | SuperBlockScales | DoubleQuantScales


class Recipe(enum.Enum):
    """Whose algorithm chooses the scales and codes.

    LAB: the lab's: each block's range (``RangeMethod``) gives its scale, the scale is
    stored in the scale format (rounded to it), and the codes round to nearest on the
    stored scale. With microscaling and FP8-scaled formats this is the OCP spec's and
    torchao's algorithm; with ``DoubleQuantScales``, bitsandbytes'.

    LLAMA_CPP: llama.cpp's reference quantizer of the GGUF type the config describes
    (``quantize_row_*_ref``: Q4_0's signed absmax on level -8, the K-quants' weighted
    scale searches ``make_qkx2_quants``/``make_qx_quants``, IQ4's level search), so the
    bytes equal llama.cpp's. Only for configs that are a GGUF type (``QuantConfig.gguf_type``).
    """

    LAB = "lab"
    LLAMA_CPP = "llama_cpp"


def int_range(bits: int) -> tuple[int, int]:
    """``(qmin, qmax) = (-2^(b-1), 2^(b-1) - 1)``: the signed code range, both modes."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


E = TypeVar("E", bound=enum.Enum)


def coerce_enum(value: object, enum_type: type[E], name: str, label: str | None = None) -> E:
    """``value`` as a member of ``enum_type``: the member itself, or a str naming its value
    (any case). ``ValueError`` "unknown <label> 'x'; expected one of: ..." for a str that
    names none (``label`` defaults to ``name``), ``TypeError`` "<name> must be a <enum> or
    str" for any other type."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type(value.lower())
        except ValueError:
            allowed = ", ".join(str(m.value) for m in enum_type)
            raise ValueError(
                f"unknown {label or name} {value!r}; expected one of: {allowed}"
            ) from None
    kind = enum_type.__name__
    article = "an" if kind[0] in "AEIOU" else "a"
    raise TypeError(f"{name} must be {article} {kind} or str, got {type(value).__name__}")


@dataclass(frozen=True)
class QuantConfig:
    """A complete quantization scheme.

    ``bits``: code width, 2..16 for ``Format.INT``; for the other formats it is the
    format's own width (4 for NF4/FP4, 8 for FP8) and is set to it.
    ``mode``: only ``Mode.SYMMETRIC`` (absmax scaling) for the non-linear formats.
    ``percentile``: used by ``RangeMethod.PERCENTILE``, in ``(50, 100]``: 99.9 keeps the
    range between the 0.1st and 99.9th percentiles.
    ``seed``: seeds stochastic rounding when no generator is passed to ``quantize`` (0..MAX_SEED).
    ``zero_point``: the asymmetric zero-point convention (see ``ZeroPoint``); set to
    ``INCLUDE_ZERO`` for symmetric and codebook schemes, which have no zero point.
    ``scale_format``: how block scales are stored (the second level of a two-level
    format: ``FloatScales`` in ``scale_dtype``, E8M0 powers of two, FP8 under a tensor
    scale, integers in a super-block, double quantization). ``scale_dtype`` is the dtype
    of what is stored as a float: the block scales under ``FloatScales``, the super-block
    scales under ``SuperBlockScales``; the other scale formats fix their own (float32 is
    kept there, unused, so each scheme has one spelling).
    ``recipe``: whose algorithm fits scales and codes (``Recipe``).

    The formats people ship are named configs: ``QuantConfig.from_name("Q4_K")``,
    ``"MXFP4"``, ``"NVFP4"`` (``quant_core.formats.registry``); ``config.name`` gives a
    named config's name back, else ``describe()``.
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
    scale_format: ScaleFormat = field(default_factory=FloatScales)
    recipe: Recipe = Recipe.LAB

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "mode", coerce_enum(self.mode, Mode, "mode"))
        set_(self, "format", coerce_enum(self.format, Format, "format"))
        set_(self, "range_method", coerce_enum(self.range_method, RangeMethod, "range_method"))
        set_(self, "rounding", coerce_enum(self.rounding, Rounding, "rounding"))
        set_(self, "scale_dtype", coerce_enum(self.scale_dtype, ScaleDtype, "scale_dtype"))
        set_(self, "zero_point", coerce_enum(self.zero_point, ZeroPoint, "zero_point"))
        set_(self, "recipe", coerce_enum(self.recipe, Recipe, "recipe"))
        if not isinstance(self.granularity, PerTensor | PerChannel | PerGroup | PerBlock):
            raise TypeError(
                "granularity must be PerTensor(), PerChannel(axis), PerGroup(group_size) or "
                f"PerBlock(rows, cols), got {self.granularity!r}"
            )
        if not isinstance(
            self.scale_format,
            FloatScales | PowerOfTwoScales | FP8Scales | SuperBlockScales | DoubleQuantScales,
        ):
            raise TypeError(
                "scale_format must be FloatScales(), PowerOfTwoScales(), FP8Scales(), "
                f"SuperBlockScales(...) or DoubleQuantScales(...), got {self.scale_format!r}"
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
        if not 0 <= self.seed <= MAX_SEED:
            # what torch.Generator.manual_seed takes (a negative seed wraps around to
            # 2^64 + seed, so two configs would draw alike): said here, not by quantize
            raise ValueError(f"seed={self.seed} is outside the range 0..2^64-1")
        if self.range_method is RangeMethod.ABSMEAN and self.mode is not Mode.SYMMETRIC:
            raise ValueError(
                "range_method=absmean gives a symmetric range [-a, a] (a = mean|x|): use it "
                "with mode=symmetric"
            )
        if not self.has_zero_point:
            # one spelling per scheme: the convention means nothing without a zero point
            set_(self, "zero_point", ZeroPoint.INCLUDE_ZERO)
        self._check_scale_format()
        if self.recipe is Recipe.LLAMA_CPP:
            self._check_llama_cpp()

    def _check_scale_format(self) -> None:
        sf = self.scale_format
        if isinstance(sf, FloatScales):
            return
        label = _SCALE_FORMAT_LABELS[type(sf)]
        if self.range_method is RangeMethod.MSE:
            raise ValueError(
                f"the MSE range search prices float scales; {label} scales store another "
                "scale than it prices: use range_method=minmax, percentile or absmean"
            )
        if isinstance(sf, SuperBlockScales):
            gran = self.granularity
            if not isinstance(gran, PerGroup):
                raise ValueError(
                    f"{label} scales group the scales of PerGroup blocks into super-blocks; "
                    f"granularity {gran!r} has no groups"
                )
            g = gran.group_size
            if sf.super_block % g or sf.super_block <= g:
                raise ValueError(
                    f"a super-block of {sf.super_block} values must hold several groups of "
                    f"{g} (a multiple of {g}, larger than it)"
                )
            if self.mode is Mode.ASYMMETRIC and self.zero_point is not ZeroPoint.FLOAT_MIN:
                raise ValueError(
                    "super-block scales store a float min per block (x = d sc q - dmin m): "
                    "use zero_point=float_min for asymmetric schemes"
                )
            if self.float_offset and sf.signed:
                raise ValueError("signed super-block scales (Q3_K, Q6_K) have no mins")
            return
        if self.mode is not Mode.SYMMETRIC:
            raise ValueError(f"{label} scales are for symmetric (absmax) schemes, not "
                             f"mode={self.mode.value}")
        if isinstance(sf, PowerOfTwoScales) and self.format not in _EMAX:
            raise ValueError(
                f"E8M0 (power-of-two) scales need an element format with a power-of-two "
                f"scale (int, FP4, FP6, FP8), not {self.format.value}"
            )
        # these formats fix the float they store: one spelling per scheme
        object.__setattr__(self, "scale_dtype", ScaleDtype.FP32)

    def _check_llama_cpp(self) -> None:
        from .formats.gguf_types import gguf_type_of

        if self.range_method is not RangeMethod.MINMAX or self.rounding is not Rounding.NEAREST:
            raise ValueError(
                "recipe=llama_cpp chooses its own scales and rounds to nearest: use "
                "range_method=minmax and rounding=nearest"
            )
        if gguf_type_of(self) is None:
            raise ValueError(
                f"llama.cpp has no GGUF type for {self.describe()!r}: recipe=llama_cpp "
                "needs the layout of one (QuantConfig.from_name('Q4_K'), 'Q8_0', ...)"
            )

    @classmethod
    def from_name(cls, name: str) -> QuantConfig:
        """The named config of a format people ship: ``"Q4_0"``, ``"Q4_K"``, ``"IQ4_XS"``,
        ``"TQ1_0"``, ``"MXFP4"``, ``"NVFP4"``, ``"FP8_BLOCK"``, ``"NF4_DQ"``, ... (the
        names of ``quant_core.formats.registry.PRESETS``; case-insensitive). Raises
        ``ValueError`` naming the known names for any other."""
        from .formats.registry import preset

        return preset(name)

    @property
    def name(self) -> str:
        """The name of this config in the registry of shipped formats (``"Q4_K"``), else
        ``describe()``."""
        from .formats.registry import name_of

        return name_of(self) or self.describe()

    @property
    def gguf_type(self) -> str | None:
        """The GGUF (ggml) type whose blocks store this config's tensors exactly (``"Q4_K"``,
        ``"MXFP4"``), or ``None``; see ``quant_core.formats.gguf_types``."""
        from .formats.gguf_types import gguf_type_of

        return gguf_type_of(self)

    @property
    def qmin(self) -> int:
        """The lowest code: ``-2^(b-1)``, but ``-qmax`` for an integer element under E8M0
        scales: the OCP MX spec's INT8 element is symmetric (codes -127..127, values at
        most ``1 63/64`` either way, as Microsoft's reference emulation clamps them)."""
        if self.format is Format.INT and isinstance(self.scale_format, PowerOfTwoScales):
            return -int_range(self.bits)[1]
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

    @property
    def two_level(self) -> bool:
        """The block scales are themselves quantized (any scale format but
        ``FloatScales``)."""
        return not isinstance(self.scale_format, FloatScales)

    def describe(self) -> str:
        """A short human label, e.g. ``int4 asym g32``, ``int4 asym g32 float-min``,
        ``nf4 per-channel(0)`` or ``fp4_e2m1 g32 s:e8m0`` (the default ``INCLUDE_ZERO``
        convention, fp32 float scales and the lab's recipe are not named)."""
        gran = self.granularity
        if isinstance(gran, PerTensor):
            g = "per-tensor"
        elif isinstance(gran, PerChannel):
            g = f"per-channel({gran.axis})"
        elif isinstance(gran, PerBlock):
            g = f"block{gran.rows}x{gran.cols}"
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
        elif self.range_method is RangeMethod.ABSMEAN:
            extras.append("absmean")
        if self.has_zero_point and self.zero_point is not ZeroPoint.INCLUDE_ZERO:
            extras.append("float-min" if self.float_offset else "clamped-z")
        if self.rounding is Rounding.STOCHASTIC:
            extras.append("stoch")
        sf = self.scale_format
        if isinstance(sf, SuperBlockScales):
            sign = "s" if sf.signed else "u"
            extras.append(f"s:{sign}{sf.bits}/{sf.super_block}:{self.scale_dtype.value}")
        elif isinstance(sf, FP8Scales) and not sf.tensor_scale:
            extras.append("s:e4m3")  # no fp32 tensor scale (GGUF's NVFP4)
        elif not isinstance(sf, FloatScales):
            extras.append(f"s:{_SCALE_FORMAT_TAGS[type(sf)]}")
            if isinstance(sf, DoubleQuantScales) and sf.block != 256:
                extras[-1] += f"/{sf.block}"
        elif self.scale_dtype is not ScaleDtype.FP32:
            extras.append(f"s:{self.scale_dtype.value}")
        if self.recipe is Recipe.LLAMA_CPP:
            extras.append("llama.cpp")
        return " ".join([head, g, *extras])


_SCALE_FORMAT_LABELS: dict[type, str] = {
    FloatScales: "float",
    PowerOfTwoScales: "E8M0 (power-of-two)",
    FP8Scales: "FP8 E4M3",
    SuperBlockScales: "super-block integer",
    DoubleQuantScales: "double-quantized",
}
_SCALE_FORMAT_TAGS: dict[type, str] = {
    PowerOfTwoScales: "e8m0",
    FP8Scales: "e4m3+fp32",
    DoubleQuantScales: "dq8",
}
