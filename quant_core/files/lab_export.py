"""Reading back the explorer's ``.safetensors`` export (``dashboard/services/explorer/
exports.py`` writes it): one quantized tensor, codes packed at ``bits`` each.

Tensors: ``codes`` (uint8, the codes row-major packed at ``bits``, first code in the lowest
bits, two's complement for integer formats, unsigned codebook indices otherwise),
``scale`` (one per block, in the scale dtype), ``zero_point`` (asymmetric integer schemes:
packed at ``bits`` like the codes) or ``offset`` (the float ``m`` of
``ZeroPoint.FLOAT_MIN``, in the scale dtype). Metadata: ``shape``, ``format``, ``bits``,
``mode``, ``granularity`` (JSON ``{"kind": "PerGroup", "group_size": 32}``),
``zero_point_convention``, ``scale_dtype``, and ``config``: the whole ``QuantConfig``
(``config_to_json``). A GGUF type's tensor is ``ggml_blocks`` instead (the bytes a GGUF file
holds for it, ``ggml_type`` naming the type: decoded by ``formats.gguf_bytes``); another
two-level format's scales are float32 and its second level comes as ``stored_codes``,
``stored_min_codes``, ``stored_super_scale``, ``stored_super_min`` (``StoredScales``).
A research format's export (``research`` in the metadata) is read by the dashboard, which
owns those formats.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping

import torch

from ..config import (
    DoubleQuantScales,
    FloatScales,
    Format,
    FP8Scales,
    Mode,
    PerBlock,
    PerChannel,
    PerGroup,
    PerTensor,
    PowerOfTwoScales,
    QuantConfig,
    RangeMethod,
    Recipe,
    Rounding,
    ScaleDtype,
    SuperBlockScales,
    ZeroPoint,
)
from ..formats.gguf_bytes import from_ggml_bytes, ggml_byte_size
from ..formats.gguf_types import ggml_type
from ..formats.scales import StoredScales
from ..granularity import layout_for
from ..packing import packed_size, unpack
from ..quantized_tensor import QuantizedTensor
from .access import Blob, MemoryLocation, QuantizedFileError, reopen
from .safetensors_header import STHeader, read_header, read_tensor

__all__ = [
    "LAB_EXPORT_KEYS",
    "STORED_PARTS",
    "config_from_json",
    "config_to_json",
    "is_lab_export",
    "read_lab_export",
    "read_lab_export_bytes",
]

LAB_EXPORT_KEYS = frozenset(
    {"shape", "format", "bits", "mode", "granularity", "zero_point_convention"}
)
_GRANULARITIES = {
    "PerTensor": PerTensor,
    "PerChannel": PerChannel,
    "PerGroup": PerGroup,
    "PerBlock": PerBlock,
}
_SCALE_DTYPES = {"F32": ScaleDtype.FP32, "F16": ScaleDtype.FP16, "BF16": ScaleDtype.BF16}
_SCALE_FORMATS = {
    cls.__name__: cls
    for cls in (FloatScales, PowerOfTwoScales, FP8Scales, SuperBlockScales, DoubleQuantScales)
}
STORED_PARTS = ("codes", "min_codes", "super_scale", "super_min")
"""``StoredScales``' fields, stored as ``stored_<field>`` tensors by a two-level export."""


def config_to_json(cfg: QuantConfig) -> str:
    """Every field of ``cfg`` as JSON (enums by value, granularity and scale format as
    ``{"kind": class name, **fields}``): what a two-level or llama.cpp-recipe export
    needs to reopen as the same config."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            out[f.name] = {"kind": type(v).__name__, **dataclasses.asdict(v)}
        else:
            out[f.name] = v.value if hasattr(v, "value") else v
    return json.dumps(out)


def config_from_json(text: str, shown: str) -> QuantConfig:
    """Inverse of ``config_to_json``; ``QuantizedFileError`` naming what is wrong."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("not a JSON object")
        gran = dict(raw.pop("granularity"))
        sf = dict(raw.pop("scale_format"))
        gkind, skind = gran.pop("kind"), sf.pop("kind")
        if gkind not in _GRANULARITIES or skind not in _SCALE_FORMATS:
            raise ValueError(f"unknown granularity {gkind!r} or scale format {skind!r}")
        enums = {
            "mode": Mode,
            "format": Format,
            "range_method": RangeMethod,
            "rounding": Rounding,
            "scale_dtype": ScaleDtype,
            "zero_point": ZeroPoint,
            "recipe": Recipe,
        }
        fields = {k: enums[k](v) if k in enums else v for k, v in raw.items()}
        return QuantConfig(
            granularity=_GRANULARITIES[gkind](**gran),
            scale_format=_SCALE_FORMATS[skind](**sf),
            **fields,
        )
    except (KeyError, TypeError, ValueError, RecursionError) as err:
        raise QuantizedFileError(f"{shown}: its config metadata is not readable ({err})") from None


def is_lab_export(header: STHeader) -> bool:
    """Whether a safetensors header is the explorer's export of a (non-research) tensor."""
    entries = header.entries.keys()
    return header.metadata.keys() >= LAB_EXPORT_KEYS and (
        {"codes", "scale"} <= entries or "ggml_blocks" in entries
    )


def export_config(meta: Mapping[str, str], shown: str) -> tuple[QuantConfig, tuple[int, ...]]:
    """The config and shape an export's metadata names (its whole ``config``; an export
    written before that key existed names the fields dequantization needs, and the range
    method and rounding take their defaults); ``QuantizedFileError`` naming the bad
    value."""
    if "config" in meta:
        cfg = config_from_json(meta["config"], shown)
        try:
            shape = json.loads(meta["shape"])
            if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape
            ):
                raise ValueError(f"shape {meta['shape'][:80]!r} is not a list of sizes")
        except (KeyError, ValueError, RecursionError) as err:
            raise QuantizedFileError(
                f"{shown}: its metadata is not a lab export's ({err})"
            ) from None
        return cfg, tuple(shape)
    try:
        shape = json.loads(meta["shape"])
        gran = json.loads(meta["granularity"])
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape
        ):
            raise ValueError(f"shape {meta['shape'][:80]!r} is not a list of sizes")
        if not isinstance(gran, dict) or gran.get("kind") not in _GRANULARITIES:
            raise ValueError(f"unknown granularity {meta['granularity'][:80]!r}")
        kind = gran.pop("kind")
        cfg = QuantConfig(
            bits=int(meta["bits"]),
            mode=Mode(meta["mode"]),
            granularity=_GRANULARITIES[kind](**gran),
            format=Format(meta["format"]),
            scale_dtype=ScaleDtype(meta.get("scale_dtype", "fp32")),
            zero_point=ZeroPoint(meta["zero_point_convention"]),
        )
    except (KeyError, TypeError, ValueError, RecursionError) as err:
        raise QuantizedFileError(f"{shown}: its metadata is not a lab export's ({err})") from None
    return cfg, tuple(shape)


def read_lab_export(blob: Blob, header: STHeader, max_elements: int) -> QuantizedTensor:
    """The ``QuantizedTensor`` of the export in ``blob`` (range method and rounding are
    not stored: they do not change how codes dequantize); every part's size is checked
    against the metadata's shape and scheme before it is read."""
    shown = blob.shown
    cfg, shape = export_config(header.metadata, shown)
    numel = math.prod(shape)
    if numel > max_elements:
        raise QuantizedFileError(
            f"{shown}: the tensor has {numel:,} values (shape {list(shape)}); the limit is "
            f"{max_elements:,}"
        )
    try:
        layout = layout_for(shape, cfg.granularity)
    except ValueError as err:
        raise QuantizedFileError(f"{shown}: {err}") from None
    entries = header.entries

    def part(name: str, dtypes: tuple[str, ...], count: int) -> torch.Tensor:
        e = entries[name]
        if e.dtype not in dtypes or e.numel != count:
            raise QuantizedFileError(
                f"{shown}: tensor {name!r} is {e.dtype} {list(e.shape)}; a {list(shape)} "
                f"tensor under {cfg.describe()} stores {count:,} values of " + " or ".join(dtypes)
            )
        return read_tensor(blob, e).reshape(-1)

    if "ggml_blocks" in entries:
        type_name = header.metadata.get("ggml_type", "")
        if cfg.gguf_type != type_name:
            raise QuantizedFileError(
                f"{shown}: ggml_type {type_name[:20]!r} is not the GGUF type of {cfg.name}"
            )
        try:
            want = ggml_byte_size(type_name, shape)
        except ValueError as err:
            raise QuantizedFileError(f"{shown}: {err}") from None
        blocks = part("ggml_blocks", ("U8",), want)
        # The lab's OCP MXFP4 shares llama.cpp's MXFP4 blocks, but its FP4 code 8 is -0
        # (llama.cpp reads +0): its own export keeps the code it wrote.
        own_zero = cfg != ggml_type(type_name).config
        qt = from_ggml_bytes(blocks.numpy().tobytes(), type_name, shape, signed_zero=own_zero)
        return dataclasses.replace(qt, config=cfg)
    packed = part("codes", ("U8",), packed_size(numel, cfg.bits))
    signed = cfg.format is Format.INT
    codes = unpack(packed, cfg.bits, numel, signed=signed).reshape(shape)
    if not signed:
        codes = codes.to(torch.uint8)
    # a two-level format's block scales are exact float32 (d * sc, 2^(e - 127), ...)
    sdtypes = ("F32",) if cfg.two_level else (
        tuple(k for k, v in _SCALE_DTYPES.items() if v is cfg.scale_dtype)
    )
    scale = part("scale", sdtypes, layout.n_blocks).to(torch.float32).reshape(layout.scale_shape)
    zero_point = torch.zeros(layout.scale_shape, dtype=torch.int32)
    offset = None
    if cfg.float_offset:
        if "offset" not in entries:
            raise QuantizedFileError(f"{shown}: {cfg.describe()} stores an offset; none found")
        offset = part("offset", sdtypes, layout.n_blocks).to(torch.float32)
        offset = offset.reshape(layout.scale_shape)
    elif cfg.has_zero_point:
        if "zero_point" not in entries:
            raise QuantizedFileError(f"{shown}: {cfg.describe()} stores zero points; none found")
        zp_packed = part("zero_point", ("U8",), packed_size(layout.n_blocks, cfg.bits))
        zp = unpack(zp_packed, cfg.bits, layout.n_blocks, signed=True)
        zero_point = zp.to(torch.int32).reshape(layout.scale_shape)
    stored = None
    if cfg.two_level:
        found = {
            f: read_tensor(blob, entries[f"stored_{f}"]).clone()
            for f in STORED_PARTS
            if f"stored_{f}" in entries
        }
        if "codes" not in found or found["codes"].numel() != layout.n_blocks:
            raise QuantizedFileError(
                f"{shown}: {cfg.name} stores its block scales as integers: stored_codes "
                f"with {layout.n_blocks:,} values was expected"
            )
        for f in ("codes", "min_codes"):
            if f in found:
                found[f] = found[f].to(torch.int32).reshape(layout.scale_shape)
        stored = StoredScales(**found)
    return QuantizedTensor(
        codes=codes,
        scale=scale,
        zero_point=zero_point,
        config=cfg,
        layout=layout,
        input_dtype=torch.float32,
        offset=offset,
        stored=stored,
    )


def read_lab_export_bytes(
    data: bytes, name: str = "export.safetensors", max_elements: int = 2**28
) -> QuantizedTensor:
    """``read_lab_export`` of an export's bytes (a download, an upload)."""
    from .access import UNRESTRICTED

    with reopen(MemoryLocation(bytes(data), name), UNRESTRICTED) as blob:
        header = read_header(blob)
        if "research" in header.metadata:
            raise QuantizedFileError(
                f"{name} is a research-format export; the dashboard's reader opens it"
            )
        if not is_lab_export(header):
            missing = sorted(LAB_EXPORT_KEYS - header.metadata.keys()) or ["codes", "scale"]
            raise QuantizedFileError(
                f"{name} is not a Quantization Lab export: missing {', '.join(missing)}"
            )
        return read_lab_export(blob, header, max_elements)
