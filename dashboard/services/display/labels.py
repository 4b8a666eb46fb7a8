"""A scheme's label as the pages show it: ``QuantConfig.describe()`` with the scale dtype
always named, since the same ``int4 asym g128`` costs 4.156 bits per element with fp16
scales and 4.281 with fp32 ones (``describe()`` leaves fp32 unnamed)."""

from __future__ import annotations

from quant_core import FloatScales, Format, LayerScheme, QuantConfig

__all__ = [
    "FORMAT_LABELS",
    "format_key",
    "format_label",
    "scale_storage_label",
    "scheme_label",
    "scheme_text",
    "stored_type_label",
]


FORMAT_LABELS: dict[Format, str] = {
    Format.INT: "int",
    Format.NF4: "NF4",
    Format.FP4_E2M1: "FP4 E2M1",
    Format.FP4_BNB: "bnb FP4",
    Format.FP6_E3M2: "FP6 E3M2",
    Format.FP6_E2M3: "FP6 E2M3",
    Format.FP8_E4M3: "FP8 E4M3",
    Format.FP8_E5M2: "FP8 E5M2",
    Format.IQ4_NL: "IQ4_NL levels",
    Format.TERNARY: "ternary",
    Format.TERNARY_PACKED: "ternary (5 per byte)",
    Format.BINARY: "binary ±1",
}
"""An element format as the pages name it (the sweep's format picker, the frontier's
legend): ``"NF4"``, ``"FP4 E2M1"``, not the enum's ``"nf4"``, ``"fp4_e2m1"``."""


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


def scale_storage_label(cfg: QuantConfig) -> str:
    """How ``cfg``'s block scales are stored, as a table cell: the float dtype of plain
    scales (``"fp16"``), or a two-level format's tag from ``cfg.describe()``: ``"e8m0"``
    (MXFP4), ``"e4m3+fp32"`` (NVFP4), ``"u6/256:fp16"`` (Q4_K: 6-bit integers under an
    fp16 scale per 256 values), ``"dq8"`` (NF4 with double quantization). Naming only the
    float dtype there would say MXFP4's scales are fp32, where each is 8 bits."""
    if isinstance(cfg.scale_format, FloatScales):
        return cfg.scale_dtype.value
    tag = next((w for w in cfg.describe().split(" ") if w.startswith("s:")), None)
    return cfg.scale_dtype.value if tag is None else tag.removeprefix("s:")


def format_label(cfg: QuantConfig) -> str:
    """A config as the scheme picker names it: a shipped format's label (``"MXFP8
    (E4M3)"``, ``"NF4 + double quant"``), not its registry key (``"MXFP8_E4M3"``,
    ``"NF4_DQ"``); any other config, ``cfg.name``."""
    return stored_type_label(cfg.name)


def stored_type_label(type_name: str) -> str:
    """A file's stored type (``TensorEntry.type_name``) as the pages name it: the lab's
    export stores a shipped format under its registry key (``"NF4_DQ"``), shown as the
    picker's label (``"NF4 + double quant"``); any other type as it is (``"Q4_K"``,
    ``"F16"``, ``"GPTQ int4 g128"``: GGUF's type names that are also registry keys have
    themselves as labels)."""
    from quant_core.formats.registry import presets

    return next((p.label for p in presets() if p.name == type_name), type_name)


def format_key(raw: str) -> str | None:
    """The registry key of the shipped format ``raw`` names, by its key or by the label
    the scheme picker shows, in any case and with spaces around ignored: ``"nf4_dq"`` and
    ``"NF4 + double quant"`` both give ``"NF4_DQ"``, ``"mxfp8 (e4m3)"`` gives
    ``"MXFP8_E4M3"``; ``None`` for anything else. A link is written with keys, but a user
    typing one copies what the picker shows."""
    from quant_core.formats.registry import presets

    if not isinstance(raw, str):
        raise TypeError(f"a format name must be a str, got {type(raw).__name__}")
    norm = " ".join(raw.split()).casefold()
    return next(
        (p.name for p in presets() if norm in (p.name.casefold(), p.label.casefold())), None
    )


def scheme_text(scheme: LayerScheme) -> str:
    """``scheme.describe()`` with a shipped weight format named as the other pages name it
    (``"W Q4_K · A int8 ..."``, not ``"W int4 asym g32 float-min s:u6/256:fp16 llama.cpp"``:
    the sweep, A/B and whole-model pages say ``Q4_K``); other configs read as before."""
    text = scheme.describe()
    weight = scheme.weight
    if weight is None or weight.name == weight.describe():
        return text
    return f"W {weight.name}{text.removeprefix('W ' + weight.describe())}"
