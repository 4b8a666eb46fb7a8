"""Named configs of the formats people ship: one record each, the name-to-config registry
derived from the records (``QuantConfig.from_name``, ``QuantConfig.name``).

Names are URL-safe tokens (``"Q4_K"``, ``"MXFP4"``, ``"NVFP4"``); ``Preset.label`` is how a
page shows one, ``Preset.family`` groups them (GGUF, OCP microscaling, NVIDIA, DeepSeek,
BitNet, bitsandbytes) and ``Preset.summary`` says what a value costs and holds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..config import (
    DoubleQuantScales,
    Format,
    FP8Scales,
    PerBlock,
    PerGroup,
    PerTensor,
    PowerOfTwoScales,
    QuantConfig,
    RangeMethod,
)
from .gguf_types import ggml_types

__all__ = [
    "PRESET_FAMILIES",
    "SHIPPED_SET",
    "Preset",
    "family_of",
    "name_of",
    "preset",
    "preset_names",
    "presets",
]

PRESET_FAMILIES = ("GGUF", "OCP MX", "NVIDIA", "DeepSeek", "BitNet", "bitsandbytes")
SHIPPED_SET: tuple[str, ...] = (
    "Q4_0",
    "Q8_0",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "IQ4_XS",
    "MXFP4",
    "NVFP4",
    "NF4_DQ",
)
"""The formats people ship, as one set: the sweep's one click and the mixed-precision
page's default candidates."""


@dataclass(frozen=True)
class Preset:
    """A shipped format: ``name`` (the registry key and URL token), ``label`` (for pages),
    ``family`` (one of ``PRESET_FAMILIES``), ``summary`` (one line: layout and cost) and
    its ``config``."""

    name: str
    label: str
    family: str
    summary: str
    config: QuantConfig


_GGUF_SUMMARIES = {
    "Q4_0": "blocks of 32: 4-bit codes, fp16 scale (llama.cpp legacy)",
    "Q4_1": "blocks of 32: 4-bit codes, fp16 scale and min",
    "Q5_0": "blocks of 32: 5-bit codes, fp16 scale",
    "Q5_1": "blocks of 32: 5-bit codes, fp16 scale and min",
    "Q8_0": "blocks of 32: int8 codes, fp16 scale",
    "Q2_K": "256-value super-blocks of 16 blocks of 16: 2-bit codes, 4-bit scales and mins",
    "Q3_K": "256-value super-blocks of 16 blocks of 16: 3-bit codes, 6-bit scales",
    "Q4_K": "256-value super-blocks of 8 blocks of 32: 4-bit codes, 6-bit scales and mins",
    "Q5_K": "256-value super-blocks of 8 blocks of 32: 5-bit codes, 6-bit scales and mins",
    "Q6_K": "256-value super-blocks of 16 blocks of 16: 6-bit codes, 8-bit scales",
    "IQ4_NL": "blocks of 32: 16 non-linear levels, fp16 scale",
    "IQ4_XS": "256-value super-blocks of 8 blocks of 32: non-linear levels, 6-bit scales",
    "TQ1_0": "ternary -1/0/1, 5 per byte, fp16 scale per 256",
    "TQ2_0": "ternary -1/0/1 in 2 bits, fp16 scale per 256",
    "Q1_0": "blocks of 128: one sign bit each, fp16 scale (the block's mean |x|)",
    "MXFP4": "OCP MXFP4: FP4 E2M1 in blocks of 32, E8M0 power-of-two scale (gpt-oss)",
    "MXFP4_GGUF": "MXFP4 as llama-quantize writes it: ties between FP4 levels towards zero",
    "NVFP4_GGUF": (
        "GGUF's NVFP4: FP4 E2M1 in blocks of 16, an unsigned E4M3 scale each, no fp32 "
        "tensor scale (llama.cpp)"
    ),
}
# GGUF types whose GGUF name is another family's format: the preset takes a suffix.
_GGUF_RENAMED = {"MXFP4": "MXFP4_GGUF", "NVFP4": "NVFP4_GGUF"}


def _mx(fmt: Format, bits: int = 8) -> QuantConfig:
    return QuantConfig(
        bits=bits, format=fmt, granularity=PerGroup(32), scale_format=PowerOfTwoScales()
    )


def _records() -> tuple[Preset, ...]:
    # GGUF's MXFP4 is the OCP layout, but llama-quantize breaks an exact tie between two
    # FP4 levels towards zero (its table's first level) where OCP's reference code (torchao)
    # rounds to the even mantissa (7 on a step of 2: llama.cpp 6, torchao 8). "MXFP4" is
    # the OCP record below (gpt-oss ships it); "MXFP4_GGUF" is llama-quantize's, byte for byte.
    # GGUF's NVFP4 is not NVIDIA's: no fp32 tensor scale, so its block scales are E4M3
    # numbers on their own ("NVFP4" is NVIDIA's record, "NVFP4_GGUF" llama.cpp's).
    gguf = [
        Preset(
            _GGUF_RENAMED.get(t.name, t.name),
            f"{t.name} (llama.cpp)" if t.name in _GGUF_RENAMED else t.name,
            "GGUF",
            _GGUF_SUMMARIES[_GGUF_RENAMED.get(t.name, t.name)],
            t.config,
        )
        for t in ggml_types()
    ]
    others = [
        Preset("MXFP4", "MXFP4", "OCP MX", _GGUF_SUMMARIES["MXFP4"], _mx(Format.FP4_E2M1)),
        Preset(
            "MXFP6_E3M2",
            "MXFP6 (E3M2)",
            "OCP MX",
            "FP6 E3M2 in blocks of 32, E8M0 scale",
            _mx(Format.FP6_E3M2),
        ),
        Preset(
            "MXFP6_E2M3",
            "MXFP6 (E2M3)",
            "OCP MX",
            "FP6 E2M3 in blocks of 32, E8M0 scale",
            _mx(Format.FP6_E2M3),
        ),
        Preset(
            "MXFP8_E4M3",
            "MXFP8 (E4M3)",
            "OCP MX",
            "FP8 E4M3 in blocks of 32, E8M0 scale",
            _mx(Format.FP8_E4M3),
        ),
        Preset(
            "MXFP8_E5M2",
            "MXFP8 (E5M2)",
            "OCP MX",
            "FP8 E5M2 in blocks of 32, E8M0 scale",
            _mx(Format.FP8_E5M2),
        ),
        Preset(
            "MXINT8",
            "MXINT8",
            "OCP MX",
            "int8 -127..127 in blocks of 32, E8M0 scale",
            _mx(Format.INT),
        ),
        Preset(
            "NVFP4",
            "NVFP4",
            "NVIDIA",
            "NVIDIA's NVFP4: FP4 E2M1 in blocks of 16, FP8 E4M3 scale, one fp32 scale per "
            "tensor",
            QuantConfig(
                format=Format.FP4_E2M1, granularity=PerGroup(16), scale_format=FP8Scales()
            ),
        ),
        Preset(
            "FP8_BLOCK",
            "FP8 128x128 blocks",
            "DeepSeek",
            "FP8 E4M3 with one fp32 scale per 128x128 weight tile (DeepSeek-V3)",
            QuantConfig(format=Format.FP8_E4M3, granularity=PerBlock(128, 128)),
        ),
        Preset(
            "BITNET",
            "BitNet b1.58",
            "BitNet",
            "ternary -1/0/1, one absmean scale per tensor",
            QuantConfig(
                format=Format.TERNARY,
                granularity=PerTensor(),
                range_method=RangeMethod.ABSMEAN,
            ),
        ),
        Preset(
            "NF4_DQ",
            "NF4 + double quant",
            "bitsandbytes",
            "NF4 in blocks of 64, absmax quantized to 8 bits in blocks of 256 (QLoRA)",
            QuantConfig(
                format=Format.NF4, granularity=PerGroup(64), scale_format=DoubleQuantScales(256)
            ),
        ),
        # bitsandbytes' FP4 as transformers saves it by default (no double quantization):
        # its own table (not OCP E2M1), a float32 absmax per block of 64, 4 + 32/64 bits
        Preset(
            "FP4_BNB",
            "bitsandbytes FP4",
            "bitsandbytes",
            "bitsandbytes' FP4 table (not OCP E2M1) in blocks of 64, float32 absmax",
            QuantConfig(format=Format.FP4_BNB, granularity=PerGroup(64)),
        ),
    ]
    return tuple(gguf + others)


@functools.cache
def presets() -> tuple[Preset, ...]:
    """Every named format, grouped by family (GGUF first)."""
    return _records()


@functools.cache
def _by_name() -> dict[str, Preset]:
    return {p.name: p for p in presets()}


@functools.cache
def _by_config() -> dict[QuantConfig, str]:
    return {p.config: p.name for p in presets()}


def preset_names() -> tuple[str, ...]:
    return tuple(p.name for p in presets())


def preset(name: str) -> QuantConfig:
    """The config named ``name`` (case-insensitive); ``ValueError`` naming the known names."""
    if not isinstance(name, str):
        raise TypeError(f"a format name must be a str, got {type(name).__name__}")
    found = _by_name().get(name.strip().upper())
    if found is None:
        raise ValueError(f"unknown format name {name!r}; known: {', '.join(preset_names())}")
    return found.config


def name_of(cfg: QuantConfig) -> str | None:
    """The registry name of ``cfg``, or ``None`` when it is not a named config."""
    return _by_config().get(cfg)


def family_of(cfg: QuantConfig) -> str | None:
    """The family (one of ``PRESET_FAMILIES``) of the named config ``cfg``, or ``None``
    when it is not a named config."""
    name = name_of(cfg)
    return None if name is None else _by_name()[name].family
