"""The GGUF (ggml) block types the lab models, as configs: one table of records.

Each record names a llama.cpp type, its ggml id, its block (values per block and bytes per
block, ``GGML_QUANT_SIZES`` in llama.cpp's ``gguf`` package) and the ``QuantConfig`` whose
quantized tensors its blocks store exactly. Bits per weight derive from the table
(``8 * type_size / block_size``), and ``storage_cost`` of each config gives the same figure
(a test checks it). The configs use ``Recipe.LLAMA_CPP``: llama.cpp's reference quantizer
of the type, and its representation of mins (``x = d q + min``, ``min`` the lowest level);
the lab's own recipe maps onto a GGUF type only where both store the same thing (MXFP4).

Types and layouts (``d``, ``dmin``: fp16; ``sc``, ``m``: the block integers):

========  =====  ======  ==============================================================
type      block  bytes   values
========  =====  ======  ==============================================================
Q4_0      32     18      ``d (q - 8)``, q 4-bit
Q4_1      32     20      ``d q + min``
Q5_0      32     22      ``d (q - 16)``, q 5-bit (4 low bits + 1 high bit)
Q5_1      32     24      ``d q + min``
Q8_0      32     34      ``d q``, q int8
Q2_K      256    84      16 blocks of 16: ``d sc q - dmin m``, 4-bit sc and m, q 2-bit
Q3_K      256    110     16 blocks of 16: ``d (sc - 32) q``, 6-bit sc, q in -4..3
Q4_K      256    144     8 blocks of 32: ``d sc q - dmin m``, 6-bit sc and m, q 4-bit
Q5_K      256    176     8 blocks of 32: as Q4_K, q 5-bit
Q6_K      256    210     16 blocks of 16: ``d sc (q - 32)``, int8 sc, q 6-bit
IQ4_NL    32     18      ``d kvalues[q]``, 16 non-linear levels
IQ4_XS    256    136     8 blocks of 32: ``d (ls - 32) kvalues[q]``, 6-bit ls
TQ1_0     256    54      ``d (t - 1)``, trits packed 5 per byte (and 4 per byte at the end)
TQ2_0     256    66      ``d (t - 1)``, trits in 2 bits
MXFP4     32     17      ``2^(e - 127) fp4[q]``, E8M0 exponent ``e``, FP4 E2M1 codes
NVFP4     64     36      4 blocks of 16: ``ue4m3(u) fp4[q]``, unsigned E4M3 scale byte ``u``
Q1_0      128    18      ``d`` or ``-d`` (one bit each): ``d (2 c - 1)``
========  =====  ======  ==============================================================

GGUF's NVFP4 is not NVIDIA's (the lab's ``NVFP4`` preset): the same FP4 codes and E4M3
block scales of 16 values, but no float32 scale per tensor, so a block scale reaches only
``[2^-9, 448]``, and llama.cpp's own rounding of it (``llama_cpp.ue4m3_from_float``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction

from ..config import (
    FloatScales,
    Format,
    FP8Scales,
    Mode,
    PerGroup,
    PowerOfTwoScales,
    QuantConfig,
    Recipe,
    ScaleDtype,
    SuperBlockScales,
    ZeroPoint,
)

__all__ = [
    "QK_K",
    "UNQUANTIZED",
    "GGMLType",
    "fallback_config",
    "fallback_type",
    "ggml_type",
    "ggml_types",
    "gguf_type_of",
]

QK_K = 256
"""Values per K-quant (and IQ4_XS, TQ) super-block."""


@dataclass(frozen=True)
class GGMLType:
    """One ggml block type: ``name`` (``"Q4_K"``), ggml ``type_id``, ``block_size`` values
    per block stored in ``type_size`` bytes, and the ``config`` whose tensors it stores."""

    name: str
    type_id: int
    block_size: int
    type_size: int
    config: QuantConfig

    @property
    def bits_per_weight(self) -> Fraction:
        """``8 * type_size / block_size``: Q4_K ``8 * 144 / 256 = 4.5``."""
        return Fraction(8 * self.type_size, self.block_size)


def _cfg(
    bits: int,
    group: int,
    *,
    fmt: Format = Format.INT,
    mins: bool = False,
    super_bits: int | None = None,
    signed: bool = False,
    e8m0: bool = False,
    ue4m3: bool = False,
) -> QuantConfig:
    if e8m0:
        scale_format: object = PowerOfTwoScales()
    elif ue4m3:
        scale_format = FP8Scales(tensor_scale=False)
    elif super_bits is not None:
        scale_format = SuperBlockScales(bits=super_bits, super_block=QK_K, signed=signed)
    else:
        scale_format = FloatScales()
    return QuantConfig(
        bits=bits,
        mode=Mode.ASYMMETRIC if mins else Mode.SYMMETRIC,
        granularity=PerGroup(group),
        format=fmt,
        scale_dtype=ScaleDtype.FP16,
        zero_point=ZeroPoint.FLOAT_MIN if mins else ZeroPoint.INCLUDE_ZERO,
        scale_format=scale_format,  # type: ignore[arg-type]
        recipe=Recipe.LAB,  # set below, once the table exists (the recipe checks against it)
    )


def _records() -> tuple[GGMLType, ...]:
    rows = (
        ("Q4_0", 2, 32, 18, _cfg(4, 32)),
        ("Q4_1", 3, 32, 20, _cfg(4, 32, mins=True)),
        ("Q5_0", 6, 32, 22, _cfg(5, 32)),
        ("Q5_1", 7, 32, 24, _cfg(5, 32, mins=True)),
        ("Q8_0", 8, 32, 34, _cfg(8, 32)),
        ("Q2_K", 10, QK_K, 84, _cfg(2, 16, mins=True, super_bits=4)),
        ("Q3_K", 11, QK_K, 110, _cfg(3, 16, super_bits=6, signed=True)),
        ("Q4_K", 12, QK_K, 144, _cfg(4, 32, mins=True, super_bits=6)),
        ("Q5_K", 13, QK_K, 176, _cfg(5, 32, mins=True, super_bits=6)),
        ("Q6_K", 14, QK_K, 210, _cfg(6, 16, super_bits=8, signed=True)),
        ("IQ4_NL", 20, 32, 18, _cfg(4, 32, fmt=Format.IQ4_NL)),
        ("IQ4_XS", 23, QK_K, 136, _cfg(4, 32, fmt=Format.IQ4_NL, super_bits=6, signed=True)),
        ("TQ1_0", 34, QK_K, 54, _cfg(2, QK_K, fmt=Format.TERNARY_PACKED)),
        ("TQ2_0", 35, QK_K, 66, _cfg(2, QK_K, fmt=Format.TERNARY)),
        ("MXFP4", 39, 32, 17, _cfg(4, 32, fmt=Format.FP4_E2M1, e8m0=True)),
        ("NVFP4", 40, 64, 36, _cfg(4, 16, fmt=Format.FP4_E2M1, ue4m3=True)),
        ("Q1_0", 41, 128, 18, _cfg(1, 128, fmt=Format.BINARY)),
    )
    return tuple(GGMLType(n, i, b, t, c) for n, i, b, t, c in rows)


# The lab-recipe configs of the table; the LLAMA_CPP configs are these with the recipe set.
_LAB_CONFIGS: tuple[GGMLType, ...] = _records()
_BY_LAB_CONFIG: dict[QuantConfig, GGMLType] = {t.config: t for t in _LAB_CONFIGS}
# The lab's own recipe stores exactly what these types store (E8M0 exponents, FP4 codes).
_LAB_REPRESENTATION = frozenset({"MXFP4"})


def _lab_key(cfg: QuantConfig) -> QuantConfig:
    """``cfg`` with the lab's recipe (the table's key), built without re-validating."""
    if cfg.recipe is Recipe.LAB:
        return cfg
    key = object.__new__(QuantConfig)
    for name in QuantConfig.__dataclass_fields__:
        object.__setattr__(key, name, getattr(cfg, name))
    object.__setattr__(key, "recipe", Recipe.LAB)
    return key


def gguf_type_of(cfg: QuantConfig) -> str | None:
    """The name of the GGUF type that stores tensors of ``cfg`` exactly, or ``None``:
    a ``Recipe.LLAMA_CPP`` config of the table's layouts, or a lab-recipe config whose
    representation is the type's (MXFP4: OCP's and llama.cpp's agree on it)."""
    record = _BY_LAB_CONFIG.get(_lab_key(cfg))
    if record is None:
        return None
    if cfg.recipe is Recipe.LLAMA_CPP or record.name in _LAB_REPRESENTATION:
        return record.name
    return None


@functools.cache
def _by_name() -> dict[str, GGMLType]:
    from dataclasses import replace

    return {
        t.name: GGMLType(
            t.name, t.type_id, t.block_size, t.type_size, replace(t.config, recipe=Recipe.LLAMA_CPP)
        )
        for t in _LAB_CONFIGS
    }


def ggml_type(name: str) -> GGMLType:
    """The record of the GGUF type ``name`` (``"Q4_K"``, case-insensitive); its ``config``
    uses ``Recipe.LLAMA_CPP``. ``ValueError`` naming the known types for any other."""
    if not isinstance(name, str):
        raise TypeError(f"a GGUF type name must be a str, got {type(name).__name__}")
    found = _by_name().get(name.upper())
    if found is None:
        known = ", ".join(_by_name())
        raise ValueError(f"unknown GGUF type {name!r}; the lab models: {known}")
    return found


def ggml_types() -> tuple[GGMLType, ...]:
    """Every modelled type, in the table's order (``Recipe.LLAMA_CPP`` configs)."""
    return tuple(_by_name().values())


# llama-quantize's fallback for a tensor whose rows do not divide a 256-value super-block
# (``tensor_type_fallback`` in llama.cpp's src/llama-quant.cpp).
_FALLBACK = {
    "Q2_K": "Q4_0",
    "Q3_K": "Q4_0",
    "TQ1_0": "Q4_0",
    "TQ2_0": "Q4_0",
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
    "IQ4_XS": "IQ4_NL",
}
UNQUANTIZED = "F16"
"""What llama-quantize stores a tensor in when not even the fallback's blocks fit."""


def fallback_type(name: str, row_length: int) -> str:
    """The type llama-quantize stores a tensor of type ``name`` in when its rows hold
    ``row_length`` values: ``name`` itself when its blocks divide the rows, else
    llama.cpp's fallback (Q4_K -> Q5_0, Q6_K -> Q8_0, ...), else ``"F16"`` (unquantized)
    when not even the fallback's blocks of 32 divide them. MiniLM's 384-wide weights under
    Q4_K: ``384 % 256 != 0``, so Q5_0."""
    record = ggml_type(name)
    if row_length % record.block_size == 0:
        return record.name
    fallback = _FALLBACK.get(record.name, record.name)
    if row_length % ggml_type(fallback).block_size:
        return UNQUANTIZED
    return fallback


def fallback_config(cfg: QuantConfig, shape: tuple[int, ...]) -> QuantConfig:
    """The config a whole-model report stores a tensor of ``shape`` in under ``cfg``:
    ``cfg`` itself, or, for a GGUF type whose blocks do not divide the rows, the config of
    llama-quantize's fallback type (``fallback_type``: Q4_K -> Q5_0 for MiniLM's 384-wide
    weights). Raises ``ValueError`` when llama-quantize would keep the tensor in F16 (not
    even blocks of 32 divide its rows); other configs come back unchanged (their shape
    errors are ``quantize``'s)."""
    name = gguf_type_of(cfg)
    if name is None or not shape:
        return cfg
    row = int(shape[-1])
    target = fallback_type(name, row)
    if target == name:
        return cfg
    if target == UNQUANTIZED:
        raise ValueError(
            f"rows of {row} values divide neither {name}'s blocks nor its fallback's: "
            "llama-quantize keeps such a tensor in F16"
        )
    return ggml_type(target).config
