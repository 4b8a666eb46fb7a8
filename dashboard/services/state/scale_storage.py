"""How block scales are stored, as the scheme picker offers it: one choice joins the scale
format (one level or two) and the float dtype it stores."""

from __future__ import annotations

from dataclasses import dataclass

from quant_core import (
    DoubleQuantScales,
    FloatScales,
    FP8Scales,
    PowerOfTwoScales,
    QuantConfig,
    ScaleDtype,
    ScaleFormat,
    SuperBlockScales,
)

__all__ = [
    "DEFAULT_SCALE_DTYPE",
    "SCALE_STORAGES",
    "ScaleStorage",
    "float_storage",
    "scale_storage_of",
    "storage_by_key",
]

DEFAULT_SCALE_DTYPE = ScaleDtype.FP16
"""The scale dtype every page starts from, and the one a link without ``sdtype`` gets: fp16,
what the files people ship store (GGUF's block scales, GPTQ's and AWQ's ``scales``
tensors, bitsandbytes' per-tensor scale aside). fp32 scales would make the page's bits per
element those of no real file (``int4 asym g128``: 4.281 with fp32 scales, 4.156 with fp16)."""


@dataclass(frozen=True)
class ScaleStorage:
    """One way to store block scales: ``key`` (the widget's value), ``label`` (the whole
    description), the config fields it sets, and ``short``, the picker's option (at most
    ``OPTION_CHARS``: a sidebar select box cut the longer labels off with no ellipsis;
    ``label`` is shown under the box)."""

    key: str
    label: str
    scale_format: ScaleFormat
    scale_dtype: ScaleDtype
    short: str = ""

    @property
    def option(self) -> str:
        """The picker's option: ``short``, or ``label`` where that is short already."""
        return self.short or self.label


SCALE_STORAGES: tuple[ScaleStorage, ...] = (
    ScaleStorage("fp32", "fp32 per block", FloatScales(), ScaleDtype.FP32),
    ScaleStorage("fp16", "fp16 per block", FloatScales(), ScaleDtype.FP16),
    ScaleStorage("bf16", "bf16 per block", FloatScales(), ScaleDtype.BF16),
    ScaleStorage(
        "e8m0",
        "E8M0 power of two per block (MX)",
        PowerOfTwoScales(),
        ScaleDtype.FP32,
        "E8M0 per block (MX)",
    ),
    ScaleStorage(
        "fp8",
        "FP8 E4M3 per block + fp32 per tensor (NVFP4)",
        FP8Scales(),
        ScaleDtype.FP32,
        "FP8 E4M3 + fp32/tensor (NVFP4)",
    ),
    ScaleStorage(
        "e4m3",
        "E4M3 per block, no tensor scale (GGUF's NVFP4)",
        FP8Scales(tensor_scale=False),
        ScaleDtype.FP32,
        "E4M3 per block (GGUF's NVFP4)",
    ),
    ScaleStorage(
        "u6s256",
        "6-bit ints x fp16 per 256 values (Q4_K)",
        SuperBlockScales(6, 256, signed=False),
        ScaleDtype.FP16,
        "6-bit ints × fp16/256 (Q4_K)",
    ),
    ScaleStorage(
        "u4s256",
        "4-bit ints x fp16 per 256 values (Q2_K)",
        SuperBlockScales(4, 256, signed=False),
        ScaleDtype.FP16,
        "4-bit ints × fp16/256 (Q2_K)",
    ),
    ScaleStorage(
        "s6s256",
        "signed 6-bit ints x fp16 per 256 values (Q3_K)",
        SuperBlockScales(6, 256, signed=True),
        ScaleDtype.FP16,
        "signed 6-bit × fp16/256 (Q3_K)",
    ),
    ScaleStorage(
        "s8s256",
        "signed 8-bit ints x fp16 per 256 values (Q6_K)",
        SuperBlockScales(8, 256, signed=True),
        ScaleDtype.FP16,
        "signed 8-bit × fp16/256 (Q6_K)",
    ),
    ScaleStorage(
        "dq256",
        "8-bit double quantized, fp32 per 256 scales (QLoRA)",
        DoubleQuantScales(256),
        ScaleDtype.FP32,
        "8-bit double quantized (QLoRA)",
    ),
)

_BY_KEY = {s.key: s for s in SCALE_STORAGES}


def storage_by_key(key: str) -> ScaleStorage:
    """The choice with ``key``; ``ValueError`` naming the known keys for any other."""
    found = _BY_KEY.get(key)
    if found is None:
        raise ValueError(f"unknown scale storage {key!r}; known: {', '.join(_BY_KEY)}")
    return found


def scale_storage_of(cfg: QuantConfig) -> ScaleStorage | None:
    """The choice that stores ``cfg``'s scales, or ``None`` when none does (a
    ``SuperBlockScales`` of another size, ...)."""
    for s in SCALE_STORAGES:
        if s.scale_format == cfg.scale_format and s.scale_dtype == cfg.scale_dtype:
            return s
    return None


def float_storage(dtype: ScaleDtype) -> ScaleStorage:
    """The choice that stores one ``dtype`` float per block: what a config whose scale
    format no choice stores (5-bit super-block scales from a link) is shown as, keeping
    its scale dtype (it fell back to fp32, and the page warned about an ``sdtype`` the link
    never set). ``TypeError`` for anything but a ``ScaleDtype``."""
    if not isinstance(dtype, ScaleDtype):
        raise TypeError(f"dtype must be a ScaleDtype, got {dtype!r}")
    return next(
        s
        for s in SCALE_STORAGES
        if isinstance(s.scale_format, FloatScales) and s.scale_dtype is dtype
    )
