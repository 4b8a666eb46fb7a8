"""A scheme's label as the pages show it: ``QuantConfig.describe()`` with the scale dtype
always named, since the same ``int4 asym g128`` costs 4.156 bits per element with fp16
scales and 4.281 with fp32 ones (``describe()`` leaves fp32 unnamed)."""

from __future__ import annotations

from quant_core import FloatScales, QuantConfig

__all__ = ["scheme_label"]


def scheme_label(cfg: QuantConfig) -> str:
    """``"int4 asym g128, fp16 scales"``: ``cfg.describe()`` followed by the dtype its float
    scales are stored in. A shipped format keeps its name (``"Q4_K"``, ``"MXFP4"``: the
    name fixes how its scales are stored), and a two-level scale format its tag
    (``"fp4_e2m1 g32 s:e8m0"``). ``TypeError`` for anything but a ``QuantConfig``."""
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    text = cfg.describe()
    if cfg.name != text or not isinstance(cfg.scale_format, FloatScales):
        return cfg.name
    dtype = cfg.scale_dtype.value
    words = [w for w in text.split(" ") if w != f"s:{dtype}"]
    return f"{' '.join(words)}, {dtype} scales"
