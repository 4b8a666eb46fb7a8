"""Value sets of the formats beyond linear: NF4, bitsandbytes' FP4, FP4 E2M1, FP6 E3M2 and
E2M3, FP8 E4M3 and E5M2, llama.cpp's IQ4_NL levels, ternary and binary (signs).

Each is a ``Codebook``: the sorted finite values the format can hold and, for each, the
code stored for it (the index into the NF4 and IQ4_NL tables, the raw FP4/FP6/FP8 bit
pattern, ``value + 1`` for ternary, ``(value + 1) / 2`` for binary). A value is scaled by
``s = absmax / max|value set|`` and mapped to the nearest entry; where it lies exactly
between two entries the format's tie rule (``Codebook.tie_up``) decides.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ..config import Format

__all__ = [
    "BNB_FP4_VALUES",
    "IQ4_NL_VALUES",
    "NF4_MIN_SCALE",
    "NF4_VALUES",
    "RECIPROCAL_FORMATS",
    "Codebook",
    "codebook_for",
]

# The 16 NF4 values of QLoRA (Dettmers et al., 2023), as in bitsandbytes: quantiles of
# N(0, 1) normalised to [-1, 1], with an exact zero. Code i is value i.
NF4_VALUES: tuple[float, ...] = (
    -1.0,
    -0.6961928009986877,
    -0.5250730514526367,
    -0.39491748809814453,
    -0.28444138169288635,
    -0.18477343022823334,
    -0.09105003625154495,
    0.0,
    0.07958029955625534,
    0.16093020141124725,
    0.24611230194568634,
    0.33791524171829224,
    0.44070982933044434,
    0.5626170039176941,
    0.7229568362236023,
    1.0,
)

NF4_MIN_SCALE = 1e-38
"""bitsandbytes' NF4 codes are ``x * (1 / max(absmax, 1e-38))`` (``quantize_4bit``'s
``absmax.clamp(min=1e-38)``): a finite reciprocal for every scale."""

# bitsandbytes' FP4 (``get_4bit_type("fp4")`` in bitsandbytes/functional.py): a sign bit
# (bit 3), two exponent bits of bias 2 and one mantissa bit, listed by code 0..7 and
# divided by their largest, 12, in float32. It is not OCP E2M1 scaled to 6: code 1 is a
# subnormal 0.0625 / 12 and the magnitudes are not in code order. Codes 8..15 are the
# negatives; code 8 is a second zero.
_BNB_FP4_RAW: tuple[float, ...] = (0.0, 0.0625, 8.0, 12.0, 4.0, 6.0, 2.0, 3.0)
BNB_FP4_VALUES: tuple[float, ...] = tuple(
    float(v) for v in torch.tensor(_BNB_FP4_RAW, dtype=torch.float32) / 12.0
)
"""Magnitudes of bitsandbytes' FP4 codes 0..7 (float32 of ``raw / 12``, as bitsandbytes
divides its table in float32): ``0, 1/192, 2/3, 1, 1/3, 1/2, 1/6, 1/4``."""

# E2M1 bit patterns 0..7 (sign bit 3 clear); 8..15 are their negatives.
_FP4_E2M1_MAGNITUDES: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

# llama.cpp's ``kvalues_iq4nl`` (ggml-common.h): code i is level i; no level is 0.
IQ4_NL_VALUES: tuple[int, ...] = (
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
)  # fmt: skip


RECIPROCAL_FORMATS = frozenset({Format.NF4, Format.FP4_BNB})
"""The bitsandbytes formats: codes are rounded on ``x * (1 / max(absmax, 1e-38))``, as
``quantize_4bit`` computes them, not on ``x / absmax`` (the two can differ by an ulp), and
an exact tie between two entries goes to the lower one."""


@dataclass(frozen=True, eq=False)
class Codebook:
    """Sorted finite values (float32, ascending, no duplicate zero) and their codes (uint8).

    ``decode_table[c]`` is the value of code ``c`` for every possible code (NaN for codes
    that are not finite numbers), so dequantization is one gather.
    ``neg_zero_code``: the code of ``-0.0`` for formats with a sign bit (FP4, FP6, FP8),
    which a negative input that rounds to zero gets, as IEEE casting gives it; ``None``
    for NF4, IQ4_NL and ternary.
    ``pos_zero_code``: bitsandbytes' FP4 only: the code a value ``v > 0`` rounding to zero
    gets (8; ``v <= 0``, ``-0.0`` included, gets the zero in ``values``, code 0).
    bitsandbytes sorts its 16 entries, the zeros as code 0 then code 8, and buckets on the
    midpoints, one of which is 0 between the two zeros, a tie going down.
    ``tie_up``: for each midpoint ``k`` between ``values[k]`` and ``values[k + 1]``, whether
    an input exactly on it goes up: IEEE's even code for the floats, never for NF4 (as
    bitsandbytes), always for IQ4_NL (as llama.cpp's ``best_index_int8``), towards 0 for
    ternary (``torch.round``'s half to even), never for bitsandbytes' FP4.
    """

    format: Format
    values: torch.Tensor
    codes: torch.Tensor
    decode_table: torch.Tensor
    neg_zero_code: int | None = None
    tie_up: tuple[bool, ...] = ()
    pos_zero_code: int | None = None

    @property
    def zero_index(self) -> int | None:
        """Index of ``0.0`` in ``values``; ``None`` for IQ4_NL, which has no zero level."""
        hits = torch.nonzero(self.values == 0)
        return int(hits[0, 0]) if len(hits) else None

    @property
    def max_abs(self) -> float:
        return float(self.values.abs().max())

    def to(self, device: torch.device) -> Codebook:
        if self.values.device == device:
            return self
        return Codebook(
            self.format,
            self.values.to(device),
            self.codes.to(device),
            self.decode_table.to(device),
            self.neg_zero_code,
            self.tie_up,
            self.pos_zero_code,
        )


def _tie_rule(fmt: Format, values: torch.Tensor, codes: torch.Tensor) -> tuple[bool, ...]:
    n = len(values) - 1
    if fmt in RECIPROCAL_FORMATS:  # bitsandbytes' bucketize: a tie goes to the lower entry
        return (False,) * n
    if fmt is Format.IQ4_NL:
        return (True,) * n
    if fmt in (Format.TERNARY, Format.TERNARY_PACKED):
        return tuple(bool(values[k + 1] == 0) for k in range(n))
    if fmt is Format.BINARY:
        return (True,)  # 0 is +1: llama.cpp's Q1_0 stores x >= 0 as a set bit
    return tuple(int(codes[k]) % 2 == 1 for k in range(n))


def _from_pairs(fmt: Format, values: torch.Tensor, codes: torch.Tensor, n_codes: int) -> Codebook:
    finite = torch.isfinite(values)
    values, codes = values[finite], codes[finite]
    table = torch.full((n_codes,), float("nan"))
    table[codes.long()] = values
    # -0.0 and +0.0 are one value: the sorted value list keeps +0 only, and the -0 bit
    # pattern is remembered so that negative inputs rounding to zero get it, as a native
    # IEEE cast does; the decode table above maps both patterns to zero.
    neg_zero = (values == 0) & torch.signbit(values)
    neg_zero_code = int(codes[neg_zero][0]) if bool(neg_zero.any()) else None
    values, codes = values[~neg_zero], codes[~neg_zero]
    order = torch.argsort(values, stable=True)
    values, codes = values[order].contiguous(), codes[order].to(torch.uint8)
    return Codebook(fmt, values, codes, table, neg_zero_code, _tie_rule(fmt, values, codes))


def _fp8_table(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    bits = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    return bits.view(dtype).to(torch.float32), bits


def _small_float_table(exp_bits: int, man_bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every bit pattern of a sign-exponent-mantissa float without Inf/NaN (OCP FP6):
    bias ``2^(E-1) - 1``; exponent 0 holds the subnormals ``m / 2^M * 2^(1 - bias)``."""
    bias = (1 << (exp_bits - 1)) - 1
    width = 1 + exp_bits + man_bits
    values = []
    for code in range(1 << width):
        sign = -1.0 if code >> (width - 1) else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        if e == 0:
            mag = m / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            mag = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        values.append(sign * mag)
    return torch.tensor(values, dtype=torch.float32), torch.arange(1 << width, dtype=torch.uint8)


def _bnb_fp4() -> Codebook:
    """bitsandbytes' FP4: 15 sorted values (one zero, code 0) and code 8 as ``pos_zero_code``.

    The decode table holds ``-0.0`` for code 8: bitsandbytes' dequantize (its C kernel on
    CPU, ``dDequantizeFP4Tree`` on CUDA) returns ``sign * 0``, although the table it saves
    as ``quant_map`` says ``+0.0`` (the Python ``-0`` in ``get_4bit_type`` is an int)."""
    mags = torch.tensor(BNB_FP4_VALUES, dtype=torch.float32)
    table = torch.cat([mags, -mags])  # -mags[0] is -0.0: code 8
    codes = torch.arange(16, dtype=torch.uint8)
    keep = codes != 8
    values, kept = table[keep], codes[keep]
    order = torch.argsort(values, stable=True)
    values, kept = values[order].contiguous(), kept[order]
    tie_up = _tie_rule(Format.FP4_BNB, values, kept)
    return Codebook(Format.FP4_BNB, values, kept, table, None, tie_up, pos_zero_code=8)


@functools.cache
def _codebook_cpu(fmt: Format) -> Codebook:
    if fmt is Format.NF4:
        values = torch.tensor(NF4_VALUES, dtype=torch.float32)
        return _from_pairs(fmt, values, torch.arange(16, dtype=torch.uint8), 16)
    if fmt is Format.FP4_BNB:
        return _bnb_fp4()
    if fmt is Format.FP4_E2M1:
        mags = torch.tensor(_FP4_E2M1_MAGNITUDES, dtype=torch.float32)
        values = torch.cat([mags, -mags])
        return _from_pairs(fmt, values, torch.arange(16, dtype=torch.uint8), 16)
    if fmt is Format.FP6_E3M2:
        return _from_pairs(fmt, *_small_float_table(3, 2), 64)
    if fmt is Format.FP6_E2M3:
        return _from_pairs(fmt, *_small_float_table(2, 3), 64)
    if fmt is Format.IQ4_NL:
        values = torch.tensor(IQ4_NL_VALUES, dtype=torch.float32)
        return _from_pairs(fmt, values, torch.arange(16, dtype=torch.uint8), 16)
    if fmt in (Format.TERNARY, Format.TERNARY_PACKED):
        values = torch.tensor([-1.0, 0.0, 1.0])
        return _from_pairs(fmt, values, torch.arange(3, dtype=torch.uint8), 4)
    if fmt is Format.BINARY:
        values = torch.tensor([-1.0, 1.0])
        return _from_pairs(fmt, values, torch.arange(2, dtype=torch.uint8), 2)
    if fmt is Format.FP8_E4M3:
        values, codes = _fp8_table(torch.float8_e4m3fn)
    elif fmt is Format.FP8_E5M2:
        values, codes = _fp8_table(torch.float8_e5m2)
    else:
        raise ValueError(f"format {fmt!r} has no codebook (it is linear)")
    return _from_pairs(fmt, values, codes, 256)


def codebook_for(fmt: Format, device: torch.device | str = "cpu") -> Codebook:
    """The ``Codebook`` of a non-linear format, on ``device``."""
    return _codebook_cpu(fmt).to(torch.device(device))
