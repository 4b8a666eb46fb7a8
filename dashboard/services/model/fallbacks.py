"""Which layers a whole-model report stores in llama-quantize's fallback type, in words."""

from __future__ import annotations

from collections.abc import Iterable

from quant_core import QuantConfig, fallback_config, ggml_type

from ..display.counts import counted

__all__ = ["fallback_name", "fallback_note", "shape_refusal"]

# llama.cpp's QK_K: the K-quants', IQ4_XS's and the ternary TQ types' 256-value blocks,
# which every page calls super-blocks.
SUPER_BLOCK = 256


def fallback_name(scheme: object, shape: tuple[int, ...]) -> str | None:
    """The shipped format llama-quantize stores a ``shape`` tensor in when ``scheme`` (a
    GGUF type) does not fit it, else ``None``."""
    if not isinstance(scheme, QuantConfig):
        return None
    try:
        used = fallback_config(scheme, shape)
    except ValueError:
        return None
    return None if used == scheme else used.name


def shape_refusal(cfg: QuantConfig, shape: tuple[int, ...]) -> str | None:
    """Why ``cfg`` (a GGUF type with 256-value blocks) cannot store a tensor of ``shape``
    whose rows do not divide them, worded as the K-quants' refusal: "TQ1_0 stores one scale
    per super-block of 256 values: rows of 384 values (shape (384, 384)) do not divide into
    super-blocks of 256"; ``None`` where the rows fit or ``cfg`` is not such a type (its
    refusal, if any, is ``check_shape``'s own). The ternary types' blocks are llama.cpp's
    QK_K blocks as the K-quants' are, but ``quant_core`` models them as plain groups of
    256, whose refusal says "group size 256 must divide the last dimension"."""
    name = cfg.gguf_type if isinstance(cfg, QuantConfig) else None
    shape = tuple(int(d) for d in shape)
    if name is None or not shape or ggml_type(name).block_size != SUPER_BLOCK:
        return None
    if shape[-1] % SUPER_BLOCK == 0:
        return None
    what = "its scales" if cfg.two_level else "one scale"
    return (
        f"{name} stores {what} per super-block of {SUPER_BLOCK} values: rows of {shape[-1]} "
        f"values (shape {shape}) do not divide into super-blocks of {SUPER_BLOCK}"
    )


def fallback_note(cfg: QuantConfig, shapes: Iterable[tuple[str, tuple[int, ...]]]) -> str | None:
    """One sentence per fallback type used for the named ``shapes`` under ``cfg`` (a GGUF
    type whose blocks do not divide some layers' rows), or ``None`` when every layer takes
    ``cfg`` itself. E.g. "36 layers (rows of 384 or 1536 values) are stored as Q5_0:
    llama-quantize's fallback for Q4_K, whose super-blocks hold 256 values"."""
    gguf_name = cfg.gguf_type
    if gguf_name is None:
        return None  # not a GGUF type: no layer falls back
    by_type: dict[str, list[tuple[str, int]]] = {}
    for name, shape in shapes:
        try:
            used = fallback_config(cfg, tuple(shape))
        except ValueError:
            continue  # kept float: listed among the skipped layers with the reason
        if used != cfg:
            by_type.setdefault(used.name, []).append((name, int(shape[-1])))
    if not by_type:
        return None
    size = ggml_type(gguf_name).block_size  # the block, or super-block, its rows must divide
    blocks = "super-blocks" if size == SUPER_BLOCK else "blocks"
    parts = []
    for target, layers in by_type.items():
        rows = sorted({r for _, r in layers})
        widths = " or ".join(f"{r:,}" for r in rows)
        parts.append(
            f"{counted(len(layers), 'layer')} (rows of {widths} values) "
            f"{'is' if len(layers) == 1 else 'are'} stored as {target}: "
            f"llama-quantize's fallback for {cfg.name}, whose {blocks} hold {size} values"
        )
    return "; ".join(parts) + "."
