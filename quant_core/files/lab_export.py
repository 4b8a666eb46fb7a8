"""The explorer's ``.safetensors`` export (``dashboard/services/explorer/exports.py``
writes it with ``export_tensors``): one quantized tensor, codes packed at ``bits`` each,
written and read back here.

Tensors: ``codes`` (uint8, the codes row-major packed at ``bits``, first code in the lowest
bits, two's complement for integer formats, unsigned codebook indices otherwise),
``scale`` (one per block, in the scale dtype), ``zero_point`` (asymmetric integer schemes:
packed at ``bits`` like the codes) or ``offset`` (the float ``m`` of
``ZeroPoint.FLOAT_MIN``, in the scale dtype). Metadata: ``shape``, ``format``, ``bits``,
``mode``, ``granularity`` (JSON ``{"kind": "PerGroup", "group_size": 32}``),
``zero_point_convention``, ``scale_dtype``, ``config``: the whole ``QuantConfig``
(``config_to_json``), ``export_version`` (``EXPORT_VERSION``) and ``tensor``
(``TENSOR_KEY``: the name of the tensor exported, so the file is matched with its original
by name; an export without it, written before the key existed or of a tensor with no name,
is named by its file's stem). A GGUF type's tensor is
``ggml_blocks`` instead (the bytes a GGUF file holds for it, ``ggml_type`` naming the type:
decoded by ``formats.gguf_bytes``).

Another two-level format stores its block scales only as the format does (version 2, no
``scale`` tensor), so the file is the format's bits plus its header:

- ``stored_codes`` (U8): each block's scale code, one byte each: the E8M0 biased exponent
  (MX formats), the E4M3 bit pattern (NVFP4), bitsandbytes' 8-bit code (double
  quantization); super-block integers packed at the scale format's bits (two's complement
  when signed), as are ``stored_min_codes`` (float-min);
- ``stored_super_scale``: NVFP4's float32 tensor scale (shape ``[]``), double
  quantization's float32 absmax per run of ``block`` scales, a super-block's ``d`` (in the
  config's scale dtype);
- ``stored_super_min``: double quantization's float32 mean (shape ``[]``), a super-block's
  ``dmin`` (scale dtype).

The scales are computed from them (``formats.scales.scales_from_stored``), the same float32
values bit for bit. A tensor whose scales would not rebuild so (its scales changed after
quantizing) is written in version 1, which files without ``export_version`` also are: the
block scales as float32 in ``scale`` (offsets in ``offset``) beside the ``stored_*`` parts
as ``StoredScales`` holds them (int32 codes, float32 scales).
A research format's export (``research`` in the metadata) is read by the dashboard, which
owns those formats.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import PurePath

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
from ..formats.scales import StoredScales, scales_from_stored
from ..granularity import BlockLayout, layout_for
from ..packing import pack, packed_size, unpack
from ..quantized_tensor import QuantizedTensor
from .access import Blob, MemoryLocation, QuantizedFileError, reopen
from .safetensors_header import STHeader, read_header, read_tensor

__all__ = [
    "EXPORT_VERSION",
    "LAB_EXPORT_KEYS",
    "MAX_TENSOR_NAME",
    "STORED_PARTS",
    "TENSOR_KEY",
    "config_from_json",
    "config_to_json",
    "export_name",
    "export_tensors",
    "is_lab_export",
    "read_lab_export",
    "read_lab_export_bytes",
]

LAB_EXPORT_KEYS = frozenset(
    {"shape", "format", "bits", "mode", "granularity", "zero_point_convention"}
)
TENSOR_KEY = "tensor"
"""The metadata key naming the tensor an export was made from
(``model.layers.0.mlp.up_proj.weight``)."""
MAX_TENSOR_NAME = 1024
"""The longest tensor name an export's metadata may give, in characters (real ones are
under 100; the name is shown and matched, never parsed)."""
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
EXPORT_VERSION = "2"
"""``export_version`` of the exports written now: a two-level format without GGUF bytes
stores its second level alone (see the module docstring). Version 1 (files without the
key): float32 ``scale`` beside the ``stored_*`` parts."""
_VERSIONS = ("1", EXPORT_VERSION)
_ONE_LEVEL_BLOCKS = (
    "scale (and zero_point/offset) hold one value per block, in the order "
    "QuantizedTensor.scale.flatten() lists them"
)


@dataclasses.dataclass(frozen=True)
class _Part:
    """One ``stored_<field>`` tensor of a version 2 export: ``what`` it holds in words,
    its safetensors ``dtype``, its ``shape`` in the file; integer parts are packed at
    ``bits`` (``count`` of them, ``signed``: two's complement), float parts are
    ``StoredScales``' own values in ``dtype``; ``shape_in_memory``: the field's shape in
    ``StoredScales`` (what ``quantize`` gives)."""

    field: str
    what: str
    dtype: str
    shape: tuple[int, ...]
    shape_in_memory: tuple[int, ...]
    bits: int = 0
    count: int = 0
    signed: bool = False

    @property
    def name(self) -> str:
        return f"stored_{self.field}"


def _parts(cfg: QuantConfig, layout: BlockLayout) -> tuple[_Part, ...]:
    """The ``stored_*`` tensors a version 2 export of ``cfg`` holds, in file order.

    Sizes: MX (E8M0) ``n_blocks`` bytes; NVFP4 ``n_blocks`` bytes + 4; NF4 with double
    quantization ``n_blocks + 4 ceil(n_blocks / block) + 4`` bytes; super-block scales
    ``ceil(n_blocks bits / 8)`` bytes (twice with mins) + ``d`` (and ``dmin``) per
    super-block in the scale dtype."""
    sf, n, shape = cfg.scale_format, layout.n_blocks, layout.scale_shape

    def ints(field: str, what: str, bits: int, signed: bool = False) -> _Part:
        count = packed_size(n, bits)
        return _Part(field, what, "U8", (count,), shape, bits, n, signed)

    if isinstance(sf, PowerOfTwoScales):
        return (ints("codes", "E8M0 block scales (biased exponents)", 8),)
    if isinstance(sf, FP8Scales):
        codes = ints("codes", "FP8 E4M3 block scales (bit patterns)", 8)
        if not sf.tensor_scale:
            return (codes,)
        return (codes, _Part("super_scale", "float32 tensor scale", "F32", (), ()))
    if isinstance(sf, DoubleQuantScales):
        runs = (math.ceil(n / sf.block),)
        return (
            ints("codes", "8-bit codes of the block scales", 8),
            _Part("super_scale", f"float32 absmax per {sf.block} scales", "F32", runs, runs),
            _Part("super_min", "float32 mean of the scales", "F32", (), ()),
        )
    if isinstance(sf, SuperBlockScales):
        dt = next(k for k, v in _SCALE_DTYPES.items() if v is cfg.scale_dtype)
        sup = (*layout.shape[:-1], layout.shape[-1] // sf.super_block)
        out = [
            ints("codes", f"{sf.bits}-bit block scales", sf.bits, sf.signed),
            _Part("super_scale", f"{cfg.scale_dtype.value} super-block scales d", dt, sup, sup),
        ]
        if cfg.float_offset:
            out.insert(1, ints("min_codes", f"{sf.bits}-bit block mins", sf.bits))
            out.append(
                _Part("super_min", f"{cfg.scale_dtype.value} super-block mins dmin", dt, sup, sup)
            )
        return tuple(out)
    raise ValueError(f"{cfg.describe()} stores float scales: it has no second level")


_TORCH_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
_NAN_CODES = {PowerOfTwoScales: (255,), FP8Scales: (0x7F, 0xFF)}  # E8M0's and E4M3's NaN


def _decode_parts(
    found: Mapping[str, torch.Tensor], cfg: QuantConfig, layout: BlockLayout
) -> StoredScales:
    """``StoredScales`` (int32 codes, float32 scales, the shapes ``quantize`` gives) of a
    version 2 export's ``stored_*`` tensors (checked for dtype and shape already);
    ``ValueError`` naming the tensor whose values the format cannot hold (a NaN scale code,
    a scale that is not finite)."""
    out: dict[str, torch.Tensor] = {}
    for p in _parts(cfg, layout):
        t = found[p.name].reshape(-1)
        if p.bits:
            v = unpack(t, p.bits, p.count, signed=p.signed, dtype=torch.int32)
            nan = [c for c in _NAN_CODES.get(type(cfg.scale_format), ()) if bool((v == c).any())]
            if nan:
                raise ValueError(
                    f"tensor {p.name!r} holds code {nan[0]:#04x}, which is NaN in {p.what}"
                )
        else:
            v = t.to(torch.float32)
            if not bool(torch.isfinite(v).all()):
                raise ValueError(f"tensor {p.name!r} ({p.what}) holds a value that is not finite")
        out[p.field] = v.reshape(p.shape_in_memory)
    return StoredScales(**out)


def _stored_tensors(qt: QuantizedTensor) -> dict[str, torch.Tensor] | None:
    """The ``stored_*`` tensors of ``qt``'s version 2 export, or ``None`` when they would not
    reopen as ``qt`` bit for bit (its second level, or the scales computed from it, differ
    from what it holds: a tensor whose scales were changed after quantizing)."""
    cfg, stored = qt.config, qt.stored
    if stored is None:
        return None
    tensors: dict[str, torch.Tensor] = {}
    try:
        for p in _parts(cfg, qt.layout):
            v = getattr(stored, p.field)
            if v is None:
                return None
            v = v.detach().cpu()
            if p.bits == 8 and not p.signed:
                # one byte per code: pack's bytes, without its bit loop (8 would not fit)
                if v.numel() and not 0 <= int(v.min()) <= int(v.max()) <= 255:
                    return None
                tensors[p.name] = v.reshape(-1).to(torch.uint8)
            elif p.bits:
                tensors[p.name] = pack(v.reshape(-1), p.bits)
            else:
                tensors[p.name] = v.to(_TORCH_DTYPES[p.dtype]).reshape(p.shape).contiguous()
        back = _decode_parts(tensors, cfg, qt.layout)
        scale, zero_point, offset = scales_from_stored(back, cfg, qt.layout)
    except ValueError:
        return None
    same = all(
        _same(getattr(back, f), getattr(stored, f)) for f in STORED_PARTS
    ) and all(
        _same(a, b)
        for a, b in ((scale, qt.scale), (zero_point, qt.zero_point), (offset, qt.offset))
    )
    return tensors if same else None


def _same(mine: torch.Tensor | None, theirs: torch.Tensor | None) -> bool:
    """Equal bit for bit: dtype, shape and every bit of every value (``-0.0`` is not
    ``0.0``); ``None`` only with ``None``."""
    if mine is None or theirs is None:
        return mine is theirs
    theirs = theirs.detach().cpu()
    if mine.dtype != theirs.dtype or mine.shape != theirs.shape:
        return False
    if mine.dtype == torch.float32:
        mine, theirs = mine.view(torch.int32), theirs.view(torch.int32)
    return torch.equal(mine, theirs)


def export_tensors(qt: QuantizedTensor) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors of ``qt``'s export (a GGUF type's ``ggml_blocks`` aside: the caller
    writes those) and the metadata entries that say how they are laid out
    (``export_version``, ``blocks``).

    A two-level format stores ``codes`` and its second level alone (version 2): NVFP4 at
    ``[128, 256]`` is ``16,384`` bytes of FP4 codes, ``2,048`` E4M3 bytes and a 4-byte
    tensor scale, ``18,436`` bytes, exactly ``storage_cost``'s ``4.5`` bits per value plus
    32 per tensor. Other formats store their scales in the scale dtype (and offsets or
    packed zero points), as version 1 did. Raises what ``pack`` raises for codes outside
    ``bits``."""
    cfg = qt.config
    tensors = {"codes": pack(qt.codes, cfg.bits)}
    if cfg.two_level:
        stored = _stored_tensors(qt)
        if stored is not None:
            tensors.update(stored)
            parts = ", ".join(f"{p.name} ({p.what})" for p in _parts(cfg, qt.layout))
            blocks = (
                f"no float scales: {parts}; the block scales are computed from them "
                "(quant_core.formats.scales.scales_from_stored), one per block in the order "
                "QuantizedTensor.scale.flatten() lists them"
            )
            return tensors, {"export_version": EXPORT_VERSION, "blocks": blocks}
        # version 1: the scales as exact float32 beside the second level as held
        tensors["scale"] = qt.scale.to(torch.float32).contiguous()
        if qt.offset is not None:
            tensors["offset"] = qt.offset.to(torch.float32).contiguous()
        if qt.stored is not None:
            for name in STORED_PARTS:
                part = getattr(qt.stored, name)
                if part is not None:
                    tensors[f"stored_{name}"] = part.detach().cpu().contiguous()
        return tensors, {"export_version": "1", "blocks": _ONE_LEVEL_BLOCKS}
    sdtype = _TORCH_DTYPES[next(k for k, v in _SCALE_DTYPES.items() if v is cfg.scale_dtype)]
    tensors["scale"] = qt.scale.to(sdtype).contiguous()
    if qt.offset is not None:  # exactly under ZeroPoint.FLOAT_MIN
        tensors["offset"] = qt.offset.to(sdtype).contiguous()
    elif cfg.has_zero_point:
        tensors["zero_point"] = pack(qt.zero_point, cfg.bits)
    return tensors, {"export_version": EXPORT_VERSION, "blocks": _ONE_LEVEL_BLOCKS}


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
    except (KeyError, TypeError, ValueError, RecursionError, OverflowError) as err:
        raise QuantizedFileError(f"{shown}: its config metadata is not readable ({err})") from None


def is_lab_export(header: STHeader) -> bool:
    """Whether a safetensors header is the explorer's export of a (non-research) tensor."""
    entries = header.entries.keys()
    return header.metadata.keys() >= LAB_EXPORT_KEYS and (
        {"codes", "scale"} <= entries
        or {"codes", "stored_codes"} <= entries
        or "ggml_blocks" in entries
    )


_MAX_EXPORT_DIMS = 64  # torch's own limit


def _sizes(shape: object) -> bool:
    """A shape: at most 64 positive integers, each below ``2^63`` (a torch size). Larger
    ones multiplied into a count too long to print (over 4,300 digits): a ``ValueError``
    naming no file when the count was put into a message."""
    return (
        isinstance(shape, list)
        and len(shape) <= _MAX_EXPORT_DIMS
        and all(isinstance(d, int) and not isinstance(d, bool) and 0 < d < 2**63 for d in shape)
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
            if not _sizes(shape):
                raise ValueError(f"shape {meta['shape'][:80]!r} is not a list of sizes")
        except (KeyError, ValueError, RecursionError) as err:
            raise QuantizedFileError(
                f"{shown}: its metadata is not a lab export's ({err})"
            ) from None
        return cfg, tuple(shape)
    try:
        shape = json.loads(meta["shape"])
        gran = json.loads(meta["granularity"])
        if not _sizes(shape):
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
    except (KeyError, TypeError, ValueError, RecursionError, OverflowError) as err:
        raise QuantizedFileError(f"{shown}: its metadata is not a lab export's ({err})") from None
    return cfg, tuple(shape)


def export_name(meta: Mapping[str, str], shown: str) -> str:
    """The name of the tensor an export holds: its metadata's ``TENSOR_KEY``, else (an
    export written without it) ``shown``'s stem (``up-nf4.safetensors`` -> ``up-nf4``).
    ``QuantizedFileError`` naming the file for a name that is empty, longer than
    ``MAX_TENSOR_NAME`` characters, or holds a control character."""
    name = meta.get(TENSOR_KEY)
    if name is None:
        return PurePath(shown).stem
    problem = (
        "is empty"
        if not name.strip()
        else f"is {len(name):,} characters long (at most {MAX_TENSOR_NAME:,} are read)"
        if len(name) > MAX_TENSOR_NAME
        else "holds a control character"
        if any(ord(c) < 32 or ord(c) == 127 for c in name)
        else None
    )
    if problem is not None:
        raise QuantizedFileError(f"{shown}: its metadata's tensor name {name[:40]!r} {problem}")
    return name


def read_lab_export(blob: Blob, header: STHeader, max_elements: int) -> QuantizedTensor:
    """The ``QuantizedTensor`` of the export in ``blob`` (range method and rounding are
    not stored: they do not change how codes dequantize); every part's size is checked
    against the metadata's shape and scheme before it is read."""
    shown = blob.shown
    cfg, shape = export_config(header.metadata, shown)
    version = header.metadata.get("export_version", "1")
    if version not in _VERSIONS:
        raise QuantizedFileError(
            f"{shown}: export_version {version[:20]!r} is not one this reader knows "
            f"({', '.join(_VERSIONS)}): a newer Quantization Lab wrote it"
        )
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
        e = entries.get(name)
        if e is None:  # e.g. a version 2 two-level export relabelled version 1
            raise QuantizedFileError(
                f"{shown}: tensor {name!r} is missing; a {list(shape)} tensor under "
                f"{cfg.describe()} (export version {version}) stores {count:,} values of "
                + " or ".join(dtypes)
                + " there"
            )
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
        try:
            qt = from_ggml_bytes(
                blocks.numpy().tobytes(), type_name, shape, signed_zero=own_zero
            )
        except ValueError as err:
            raise QuantizedFileError(f"{shown}: tensor 'ggml_blocks': {err}") from None
        return dataclasses.replace(qt, config=cfg)
    packed = part("codes", ("U8",), packed_size(numel, cfg.bits))
    signed = cfg.format is Format.INT
    codes = unpack(packed, cfg.bits, numel, signed=signed).reshape(shape)
    if not signed:
        codes = codes.to(torch.uint8)
    if cfg.format in (Format.TERNARY, Format.TERNARY_PACKED) and numel and int(codes.max()) > 2:
        # 2 bits hold 0..3 but the codebook has three codes: 3 decoded to NaN, silently
        raise QuantizedFileError(
            f"{shown}: tensor 'codes' holds the code {int(codes.max())}, which is not a "
            f"{cfg.format.value} code (0, 1, 2 store -1, 0, +1): damaged codes"
        )
    if cfg.two_level and version != "1":
        stored = _read_parts(blob, header, cfg, layout, shape)
        scale, zero_point, offset = scales_from_stored(stored, cfg, layout)
    else:  # one level, or an export of version 1
        # a two-level format's block scales are exact float32 (d * sc, 2^(e - 127), ...)
        sdtypes = ("F32",) if cfg.two_level else (
            tuple(k for k, v in _SCALE_DTYPES.items() if v is cfg.scale_dtype)
        )
        scale = part("scale", sdtypes, layout.n_blocks).to(torch.float32)
        scale = scale.reshape(layout.scale_shape)
        zero_point = torch.zeros(layout.scale_shape, dtype=torch.int32)
        offset = None
        if cfg.float_offset:
            if "offset" not in entries:
                raise QuantizedFileError(f"{shown}: {cfg.describe()} stores an offset; none found")
            offset = part("offset", sdtypes, layout.n_blocks).to(torch.float32)
            offset = offset.reshape(layout.scale_shape)
        elif cfg.has_zero_point:
            if "zero_point" not in entries:
                raise QuantizedFileError(
                    f"{shown}: {cfg.describe()} stores zero points; none found"
                )
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


def _read_parts(
    blob: Blob, header: STHeader, cfg: QuantConfig, layout: BlockLayout, shape: tuple[int, ...]
) -> StoredScales:
    """The second level of a version 2 export, every ``stored_*`` tensor checked for its
    dtype and shape before it is read; ``QuantizedFileError`` naming the file, the tensor
    and what a ``shape`` tensor under ``cfg`` stores there."""
    shown, entries = blob.shown, header.entries
    parts = _parts(cfg, layout)
    expected = {"codes", *(p.name for p in parts)}
    extra = sorted(set(entries) - expected)
    if extra:
        raise QuantizedFileError(
            f"{shown}: tensor {extra[0][:80]!r} is not part of a version 2 export of "
            f"{cfg.name}, which stores its block scales only as "
            + ", ".join(p.name for p in parts)
        )
    found: dict[str, torch.Tensor] = {}
    for p in parts:
        held = f"{list(p.shape)} {p.dtype}: {p.what}"
        e = entries.get(p.name)
        if e is None:
            raise QuantizedFileError(
                f"{shown}: tensor {p.name!r} is missing; a {list(shape)} tensor under "
                f"{cfg.name} stores {held} there"
            )
        if e.dtype != p.dtype or tuple(e.shape) != p.shape:
            raise QuantizedFileError(
                f"{shown}: tensor {p.name!r} is {e.dtype} {list(e.shape)}; a {list(shape)} "
                f"tensor under {cfg.name} stores {held}"
            )
        found[p.name] = read_tensor(blob, e)
    try:
        return _decode_parts(found, cfg, layout)
    except ValueError as err:
        raise QuantizedFileError(f"{shown}: {err}") from None


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
