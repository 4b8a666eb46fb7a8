"""The packed layouts of Hugging Face quantized checkpoints: which stored tensors make one
weight, its entry from their headers, and its decoding into the lab's ``QuantizedTensor``.

Notation: a linear weight ``W`` of shape ``[out, in]``; ``b`` bits; ``G`` groups of ``g``
input columns per row; ``u`` the unsigned stored code (``0 .. 2^b - 1``) and ``z_u`` the
unsigned stored zero point. The lab's codes are signed, ``q = u - 2^(b-1)`` and
``z = z_u - 2^(b-1)`` (both in ``[qmin, qmax]``), so ``W = s (u - z_u) = s (q - z)``.

GPTQ (AutoGPTQ ``QuantLinear.pack``, GPTQModel), prefix ``<module>.``:

- ``qweight`` int32 ``[in * b/32, out]``: ``u`` packed along the input dimension, the
  first of ``32/b`` consecutive input rows in the lowest bits;
- ``qzeros`` int32 ``[G, out * b/32]``: ``z_u`` packed along the output dimension;
  checkpoint format ``gptq`` (v1) stores ``z_u - 1``, read as GPTQModel converts v1 to v2
  (``qzeros + 0x11111111`` for 4 bits, one added to every field of the word);
- ``scales`` fp16 ``[G, out]``; ``g_idx`` int32 ``[in]``: each input column's group
  (``column // g``, or an act-order permutation's, see ``column_order``);
- ``W[o, i] = scales[g_idx[i], o] (u[i, o] - z_u[g_idx[i], o])``.

AWQ (AutoAWQ ``WQLinear_GEMM.from_linear``): ``qweight`` int32 ``[in, out/8]``, ``qzeros``
int32 ``[G, out/8]`` (packed along the output dimension in the interleaved order
``AWQ_ORDER``), ``scales`` fp16 ``[G, out]``; ``W[o, i] = s (u - z_u)`` with no offset.

compressed-tensors ``pack-quantized`` (``pack_to_int32``): ``weight_packed`` int32
``[out, ceil(in * b/32)]`` holding ``q + 2^(b-1)`` along the input dimension,
``weight_shape`` ``[out, in]``, ``weight_scale`` ``[out, G]`` (``[out, 1]`` per channel,
``[1]`` per tensor) in the model's dtype, ``weight_zero_point`` (asymmetric only: signed
``z`` packed like the codes along the output dimension, int32 ``[ceil(out * b/32), G]``;
older versions stored it unpacked, ``[out, G]``), optional ``weight_g_idx``; ``W = s (q -
z)``.

bitsandbytes 4-bit as transformers saves it (``QuantState.as_dict(packed=True)``):
``weight`` uint8 ``[ceil(n/2), 1]`` (two codes per byte, the first in the high nibble, over
the flattened tensor), ``weight.absmax`` (float32 per block of ``blocksize``, or uint8
codes under double quantization), ``weight.quant_map`` (the 16 values), under double
quantization ``weight.nested_absmax`` (float32 per run of ``nested_blocksize`` block
scales) and ``weight.nested_quant_map`` (the 256-value dynamic map), and
``weight.quant_state.bitsandbytes__nf4`` (uint8 bytes of a JSON object: ``quant_type``,
``blocksize``, ``dtype``, ``shape``, ``nested_blocksize``, ``nested_offset``):
``absmax = nested_quant_map[code] * nested_absmax[run] + nested_offset``,
``W = quant_map[c] * absmax[block]``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from ..config import (
    DoubleQuantScales,
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    ScaleDtype,
)
from ..formats.codebooks import codebook_for
from ..formats.scales import StoredScales, dynamic_map
from ..granularity import layout_for
from ..quantized_tensor import QuantizedTensor
from .access import QuantizedFileError
from .entries import FileKind, StoredTensor, TensorEntry
from .hf_config import MAX_MATCHED_NAME, AWQSpec, CTGroup, CTSpec, GPTQSpec, QuantSpec
from .int32_packing import column_order, unpack_int32
from .safetensors_header import FLOAT_DTYPES, STEntry

__all__ = ["Layer", "decode_layer", "find_layers", "layer_entry"]

_SCALE_DTYPES = {"F16": ScaleDtype.FP16, "BF16": ScaleDtype.BF16, "F32": ScaleDtype.FP32}
# bitsandbytes' quant_type to the lab format that models its code table
_BNB_FORMATS = {"nf4": Format.NF4, "fp4": Format.FP4_BNB}
_BNB_STATE = re.compile(r"^(?P<weight>.+)\.quant_state\.bitsandbytes__(?P<kind>nf4|fp4)$")
_MAX_STATE_BYTES = 65_536

# role -> stored suffix, per layout
_GPTQ_PARTS = {"qweight": ".qweight", "qzeros": ".qzeros", "scales": ".scales", "g_idx": ".g_idx"}
_CT_PARTS = {
    "packed": ".weight_packed",
    "scale": ".weight_scale",
    "zero_point": ".weight_zero_point",
    "shape": ".weight_shape",
    "g_idx": ".weight_g_idx",
}
_BNB_PARTS = {
    "weight": "",
    "absmax": ".absmax",
    "quant_map": ".quant_map",
    "nested_absmax": ".nested_absmax",
    "nested_quant_map": ".nested_quant_map",
}


@dataclass(frozen=True)
class Layer:
    """The stored tensors of one quantized weight: ``name`` (the original weight's,
    ``<module>.weight``), its ``layout`` (a ``FileKind``) and ``parts`` (role to the
    stored tensor's name)."""

    name: str
    layout: FileKind
    parts: Mapping[str, str]


def find_layers(names: set[str]) -> tuple[list[Layer], set[str]]:
    """The quantized weights among stored tensor ``names`` (by their parts' suffixes), and
    the names no layer claims (plain tensors: biases, norms, embeddings)."""
    layers: list[Layer] = []
    claimed: set[str] = set()
    for name in sorted(names):
        if name.endswith(".qweight"):
            module = name[: -len(".qweight")]
            parts = {r: module + s for r, s in _GPTQ_PARTS.items() if module + s in names}
            layers.append(Layer(module + ".weight", FileKind.GPTQ, parts))
        elif name.endswith(".weight_packed"):
            module = name[: -len(".weight_packed")]
            parts = {r: module + s for r, s in _CT_PARTS.items() if module + s in names}
            layers.append(Layer(module + ".weight", FileKind.COMPRESSED_TENSORS, parts))
        elif (m := _BNB_STATE.match(name)) is not None:
            weight = m["weight"]
            parts = {r: weight + s for r, s in _BNB_PARTS.items() if weight + s in names}
            parts["state"] = name
            layers.append(Layer(weight, FileKind.BITSANDBYTES, parts))
        else:
            continue
        claimed.update(layers[-1].parts.values())
    return layers, names - claimed


# -- entries from headers ----------------------------------------------------------------------

SmallReader = Callable[[str], torch.Tensor]
"""Reads one small stored tensor (a quant state, ``weight_shape``) by name."""


def _need(layer: Layer, e: Mapping[str, STEntry], roles: tuple[str, ...], shown: str) -> None:
    missing = [r for r in roles if r not in layer.parts]
    if missing:
        raise QuantizedFileError(
            f"{shown}: weight {layer.name!r} is packed ({layer.layout.value}) but lacks "
            + ", ".join(repr(layer.name.rsplit(".", 1)[0] + _suffix(layer, r)) for r in missing)
        )


def _suffix(layer: Layer, role: str) -> str:
    table = {FileKind.COMPRESSED_TENSORS: _CT_PARTS, FileKind.BITSANDBYTES: _BNB_PARTS}
    return table.get(layer.layout, _GPTQ_PARTS)[role]


def _check(cond: bool, shown: str, layer: Layer, problem: str) -> None:
    if not cond:
        raise QuantizedFileError(f"{shown}: weight {layer.name!r}: {problem}")


def _dims(e: STEntry) -> str:
    return f"{e.name!r} is {e.dtype} {list(e.shape)}"


@dataclass(frozen=True)
class _Geometry:
    """What a layer's headers say: its ``shape``, ``type_name``, and for decoding the
    settings its spec (or its quant state) gives."""

    shape: tuple[int, ...]
    type_name: str
    bits: int
    group_size: int | None
    extra: Mapping[str, object]


def layer_entry(
    layer: Layer,
    spec: QuantSpec | None,
    entries: Mapping[str, STEntry],
    shards: Mapping[str, str],
    read_small: SmallReader,
    shown: str,
) -> tuple[TensorEntry, _Geometry]:
    """The ``TensorEntry`` of ``layer`` (its parts' headers checked against each other and
    the spec), and what decoding it needs."""
    e = {role: entries[name] for role, name in layer.parts.items()}
    if layer.layout is FileKind.GPTQ:
        geo = _gptq_geometry(layer, spec, e, read_small, shown)
    elif layer.layout is FileKind.COMPRESSED_TENSORS:
        geo = _ct_geometry(layer, spec, e, read_small, shown)
    else:
        geo = _bnb_geometry(layer, e, read_small, shown)
    entry = TensorEntry(
        name=layer.name,
        type_name=geo.type_name,
        shape=geo.shape,
        nbytes=sum(p.nbytes for p in e.values()),
        file=shards[next(iter(layer.parts.values()))],
        quantized=True,
        parts=tuple(layer.parts.values()),
    )
    return entry, geo


_MAX_G_IDX_BYTES = 1 << 24
"""The largest ``g_idx`` read while listing (16 MiB: 2^21 int64 columns, far beyond any
model's): a larger one is not read until the tensor is decoded."""


def _permuted_groups(g_idx: STEntry, read_small: SmallReader, group: int) -> bool | None:
    """Whether ``g_idx`` (one group per input column) is an act-order permutation's rather
    than ``column // group`` (``int32_packing.column_order``'s test; its errors are left
    to decoding). ``None`` for one over ``_MAX_G_IDX_BYTES``, not read while listing."""
    if g_idx.nbytes > _MAX_G_IDX_BYTES:
        return None
    gi = read_small(g_idx.name).to(torch.int64).reshape(-1)
    return not torch.equal(gi, torch.arange(gi.numel()) // group)


def _gptq_geometry(
    layer: Layer,
    spec: QuantSpec | None,
    e: Mapping[str, STEntry],
    read_small: SmallReader,
    shown: str,
) -> _Geometry:
    _need(layer, e, ("qweight", "qzeros", "scales"), shown)
    qw, qz, sc = e["qweight"], e["qzeros"], e["scales"]
    for part in (qw, qz):
        _check(
            part.dtype == "I32" and len(part.shape) == 2,
            shown,
            layer,
            f"{_dims(part)}; int32 words in 2 dimensions were expected",
        )
    _check(
        sc.dtype in _SCALE_DTYPES and len(sc.shape) == 2,
        shown,
        layer,
        f"{_dims(sc)}; float scales [groups, out] were expected",
    )
    awq = isinstance(spec, AWQSpec) or (
        spec is None and "g_idx" not in e and sc.shape[1] == qw.shape[1] * 8
    )
    if awq:
        if spec is not None and not isinstance(spec, AWQSpec):
            raise QuantizedFileError(
                f"{shown}: weight {layer.name!r} has AWQ's parts but {spec.source} is not AWQ"
            )
        in_f, out_f = qw.shape[0], qw.shape[1] * 8
        n_groups = sc.shape[0]
        _check(
            sc.shape[1] == out_f and n_groups >= 1 and in_f % n_groups == 0,
            shown,
            layer,
            f"{_dims(qw)} and {_dims(sc)} disagree: AWQ stores [in, out/8] and [groups, out]",
        )
        _check(
            tuple(qz.shape) == (n_groups, qw.shape[1]),
            shown,
            layer,
            f"{_dims(qz)}; AWQ stores zero points as [groups, out/8] = [{n_groups}, {qw.shape[1]}]",
        )
        g = in_f // n_groups
        if isinstance(spec, AWQSpec) and spec.group_size not in (-1, g):
            raise QuantizedFileError(
                f"{shown}: weight {layer.name!r} holds groups of {g} columns; {spec.source} "
                f"says {spec.group_size}"
            )
        extra: dict[str, object] = {"layout": FileKind.AWQ}
        return _Geometry((out_f, in_f), f"AWQ int4 g{g}", 4, g, extra)
    if spec is not None and not isinstance(spec, GPTQSpec):
        raise QuantizedFileError(
            f"{shown}: weight {layer.name!r} has GPTQ's parts but {spec.source} names another "
            "method"
        )
    out_f, n_groups = qw.shape[1], sc.shape[0]
    if isinstance(spec, GPTQSpec):
        bits = spec.bits
    else:
        _check(
            "g_idx" in e,
            shown,
            layer,
            "without a quantize config or g_idx, its bits and groups cannot be known",
        )
        in_guess = e["g_idx"].numel
        _check(
            in_guess > 0 and (32 * qw.shape[0]) % in_guess == 0,
            shown,
            layer,
            f"{_dims(qw)} and {_dims(e['g_idx'])} give no bit width",
        )
        bits = 32 * qw.shape[0] // in_guess
        _check(bits in (2, 4, 8), shown, layer, f"a {bits}-bit packing is not read (2, 4, 8)")
    in_f = qw.shape[0] * 32 // bits
    _check(
        sc.shape[1] == out_f and n_groups >= 1,
        shown,
        layer,
        f"{_dims(qw)} and {_dims(sc)} disagree: GPTQ stores [in*{bits}/32, out] and [groups, out]",
    )
    _check(
        tuple(qz.shape) == (n_groups, out_f * bits // 32) and (out_f * bits) % 32 == 0,
        shown,
        layer,
        f"{_dims(qz)}; GPTQ stores zero points as [groups, out*{bits}/32] = "
        f"[{n_groups}, {out_f * bits // 32}]",
    )
    if "g_idx" in e:
        gi = e["g_idx"]
        _check(
            gi.dtype in ("I32", "I64") and gi.shape == (in_f,),
            shown,
            layer,
            f"{_dims(gi)}; one group index per input column ({in_f}) was expected",
        )
    if isinstance(spec, GPTQSpec) and spec.group_size != -1:
        g = spec.group_size
    else:
        _check(
            in_f % n_groups == 0, shown, layer, f"{n_groups} groups do not divide {in_f} columns"
        )
        g = in_f // n_groups
    _check(
        n_groups == -(-in_f // g),
        shown,
        layer,
        f"{n_groups} groups of scales for {in_f} columns in groups of {g}",
    )
    _check(
        in_f % g == 0,
        shown,
        layer,
        f"{in_f} columns do not divide into groups of {g}: the lab's groups are whole",
    )
    # The stored g_idx decides, as it does when decoding: a config's desc_act can disagree
    # with it (static groups keep act-order's groups as runs of consecutive columns), and
    # an uploaded shard has no config. The config speaks only where no g_idx was read.
    stored = _permuted_groups(e["g_idx"], read_small, g) if "g_idx" in e else None
    if stored is not None:
        desc = stored
    else:
        desc = isinstance(spec, GPTQSpec) and spec.desc_act and "g_idx" in e
    label = f"GPTQ int{bits} " + ("per-channel" if n_groups == 1 else f"g{g}")
    extra = {
        "layout": FileKind.GPTQ,
        "v1": not isinstance(spec, GPTQSpec) or spec.checkpoint_format == "gptq",
        "assumed_v1": spec is None,
    }
    return _Geometry((out_f, in_f), label + (" act-order" if desc else ""), bits, g, extra)


def _ct_group(layer: Layer, spec: CTSpec, shown: str) -> CTGroup:
    """The config group whose targets name ``layer``'s module (the first group when none
    does, or when there is only one: no regex is run then). The ``re:`` targets passed
    ``regex_risk`` when the config was read; the name they run on is bounded here."""
    if len(spec.groups) == 1:
        return spec.groups[0]
    module = layer.name[: -len(".weight")]
    if len(module) > MAX_MATCHED_NAME:
        raise QuantizedFileError(
            f"{shown}: weight {layer.name[:80]!r}…: a module name of {len(module):,} "
            f"characters is not matched against {spec.source}'s targets (at most "
            f"{MAX_MATCHED_NAME})"
        )
    for group in spec.groups:
        for target in group.targets:
            if target.startswith("re:"):
                try:
                    if re.match(target[3:], module):
                        return group
                except (re.error, OverflowError):  # a{4294967296}: too large to compile
                    continue
            elif target == module or not target.startswith(("model.", "lm_head")):
                return group  # a class name ("Linear"): every packed weight is one
    return spec.groups[0]


def _ct_geometry(
    layer: Layer,
    spec: QuantSpec | None,
    e: Mapping[str, STEntry],
    read_small: SmallReader,
    shown: str,
) -> _Geometry:
    _need(layer, e, ("packed", "scale", "shape"), shown)
    if not isinstance(spec, CTSpec):
        raise QuantizedFileError(
            f"{shown}: weight {layer.name!r} is pack-quantized (compressed-tensors) but the "
            "folder's config.json has no compressed-tensors quantization_config (its bits "
            "and groups)"
        )
    group = _ct_group(layer, spec, shown)
    packed, scale, shape_e = e["packed"], e["scale"], e["shape"]
    _check(
        packed.dtype == "I32" and len(packed.shape) == 2,
        shown,
        layer,
        f"{_dims(packed)}; int32 words [out, in*b/32] were expected",
    )
    _check(
        shape_e.dtype in ("I32", "I64") and shape_e.shape == (2,),
        shown,
        layer,
        f"{_dims(shape_e)}; the weight's [out, in] was expected",
    )
    dims = tuple(int(v) for v in read_small(layer.parts["shape"]).tolist())
    _check(min(dims) > 0, shown, layer, f"weight_shape {list(dims)} is empty")
    out_f, in_f = dims
    bits = group.num_bits
    per = 32 // bits
    _check(
        tuple(packed.shape) == (out_f, -(-in_f // per)),
        shown,
        layer,
        f"{_dims(packed)}; weight_shape {list(dims)} at {bits} bits packs into "
        f"[{out_f}, {-(-in_f // per)}]",
    )
    _check(scale.dtype in _SCALE_DTYPES, shown, layer, f"{_dims(scale)}; float scales expected")
    if group.strategy == "group":
        g = group.group_size or 0
        _check(in_f % g == 0, shown, layer, f"{in_f} columns do not divide into groups of {g}")
        want = (out_f, in_f // g)
        label = f"int{bits} g{g}"
    elif group.strategy == "channel":
        g, want, label = in_f, (out_f, 1), f"int{bits} per-channel"
    else:
        g, want, label = None, (1,), f"int{bits} per-tensor"
    _check(
        scale.numel == math.prod(want),
        shown,
        layer,
        f"{_dims(scale)}; {group.strategy} scales of a {list(dims)} weight are {list(want)}",
    )
    if "zero_point" in e:
        zp = e["zero_point"]
        if zp.dtype == "I32" and group.strategy != "tensor":
            packed_zp = (-(-out_f // per), want[-1])
            _check(
                tuple(zp.shape) == packed_zp,
                shown,
                layer,
                f"{_dims(zp)}; packed zero points of {list(want)} are {list(packed_zp)}",
            )
        else:
            _check(
                zp.dtype in ("I8", "I16", "I32") and zp.numel == math.prod(want),
                shown,
                layer,
                f"{_dims(zp)}; {list(want)} integer zero points were expected",
            )
    sym = "sym" if group.symmetric else "asym"
    # compressed-tensors saves a g_idx with actorder "group"; one in plain order (column //
    # g: an identity permutation, or a tool that saves it for every grouped weight) holds
    # the codes in plain order, as decoding reads them, so only a permuted one is labelled
    # act-order (one too large to read while listing: its presence says it, as before)
    permuted = (
        _permuted_groups(e["g_idx"], read_small, g) if "g_idx" in e and g is not None else False
    )
    label = f"CT {label} {sym}" + (" act-order" if permuted is None or permuted else "")
    extra = {"layout": FileKind.COMPRESSED_TENSORS, "strategy": group.strategy}
    return _Geometry((out_f, in_f), label, bits, g, extra)


def _bnb_geometry(
    layer: Layer, e: Mapping[str, STEntry], read_small: SmallReader, shown: str
) -> _Geometry:
    _need(layer, e, ("weight", "absmax", "quant_map"), shown)
    state_e = e["state"]
    _check(
        state_e.dtype == "U8" and state_e.numel <= _MAX_STATE_BYTES,
        shown,
        layer,
        f"{_dims(state_e)}; a quant state of at most {_MAX_STATE_BYTES:,} bytes was expected",
    )
    # bytes of any shape (a header may store them as [1, n]): flattened before decoding
    raw = bytes(read_small(layer.parts["state"]).to(torch.uint8).reshape(-1).tolist())
    try:
        state = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise QuantizedFileError(
            f"{shown}: weight {layer.name!r}: its quant state is not JSON ({str(err)[:80]})"
        ) from None
    _check(isinstance(state, dict), shown, layer, "its quant state is not a JSON object")
    shape = state.get("shape")
    blocksize = state.get("blocksize")
    quant_type = state.get("quant_type")
    _check(
        isinstance(shape, list)
        and 1 <= len(shape) <= 8
        # below 2^63 (a torch size): a product of larger ones can be too long to print
        and all(isinstance(d, int) and not isinstance(d, bool) and 0 < d < 2**63 for d in shape),
        shown,
        layer,
        f"quant state shape {str(shape)[:60]} is not a list of sizes",
    )
    _check(
        # below 2^63: decoding divides int64 positions by it (torch overflowed on more)
        isinstance(blocksize, int) and not isinstance(blocksize, bool) and 0 < blocksize < 2**63,
        shown,
        layer,
        f"quant state blocksize {str(blocksize)[:40]} is not a positive integer below 2^63",
    )
    _check(quant_type in ("nf4", "fp4"), shown, layer, f"quant_type {quant_type!r} is not nf4/fp4")
    numel = math.prod(shape)
    n_blocks = -(-numel // blocksize)
    w, absmax, qmap = e["weight"], e["absmax"], e["quant_map"]
    _check(
        w.nbytes == -(-numel // 2),
        shown,
        layer,
        f"{_dims(w)} ({w.nbytes:,} bytes); {numel:,} 4-bit codes take {-(-numel // 2):,}",
    )
    _check(
        qmap.dtype == "F32" and qmap.numel == 16,
        shown,
        layer,
        f"{_dims(qmap)}; 16 float32 values were expected",
    )
    nested = "nested_absmax" in e or "nested_blocksize" in state
    extra: dict[str, object] = {"layout": FileKind.BITSANDBYTES, "state": state}
    if nested:
        _need(layer, e, ("nested_absmax", "nested_quant_map"), shown)
        nb = state.get("nested_blocksize")
        offset = state.get("nested_offset")
        _check(
            isinstance(nb, int) and not isinstance(nb, bool) and 0 < nb < 2**63,  # as blocksize
            shown,
            layer,
            f"nested_blocksize {str(nb)[:40]} is not a positive integer below 2^63",
        )
        _check(
            isinstance(offset, int | float)
            and not isinstance(offset, bool)
            and math.isfinite(offset),
            shown,
            layer,
            f"nested_offset {offset!r} is not a number",
        )
        _check(
            absmax.dtype == "U8" and absmax.numel == n_blocks,
            shown,
            layer,
            f"{_dims(absmax)}; {n_blocks:,} 8-bit codes of block scales were expected",
        )
        na, nq = e["nested_absmax"], e["nested_quant_map"]
        _check(
            na.dtype == "F32" and na.numel == -(-n_blocks // nb),
            shown,
            layer,
            f"{_dims(na)}; {-(-n_blocks // nb):,} float32 values were expected",
        )
        _check(
            nq.dtype == "F32" and nq.numel == 256,
            shown,
            layer,
            f"{_dims(nq)}; the 256-value dynamic map was expected",
        )
    else:
        _check(
            absmax.dtype == "F32" and absmax.numel == n_blocks,
            shown,
            layer,
            f"{_dims(absmax)}; {n_blocks:,} float32 block scales were expected",
        )
    label = f"{'NF4' if quant_type == 'nf4' else 'bnb FP4'} b{blocksize}" + (
        " + DQ" if nested else ""
    )
    return _Geometry(tuple(shape), label, 4, blocksize, extra)


# -- decoding ----------------------------------------------------------------------------------


def decode_layer(
    entry: TensorEntry, geo: _Geometry, t: Mapping[str, torch.Tensor], shown: str
) -> StoredTensor:
    """The ``StoredTensor`` of one layer from its parts ``t`` (role to stored tensor)."""
    layout = geo.extra["layout"]
    where = f"{shown}: weight {entry.name!r}"
    if layout is FileKind.AWQ:
        return _decode_awq(entry, geo, t)
    if layout is FileKind.GPTQ:
        return _decode_gptq(entry, geo, t, where)
    if layout is FileKind.COMPRESSED_TENSORS:
        return _decode_ct(entry, geo, t, where)
    return _decode_bnb(entry, geo, t)


def _int_tensor(
    entry: TensorEntry,
    bits: int,
    u: torch.Tensor,
    z_u: torch.Tensor,
    scale: torch.Tensor,
    scale_dtype: ScaleDtype,
    group: int | None,
    order: torch.Tensor | None,
    notes: list[str],
) -> StoredTensor:
    """A linear integer weight from unsigned codes ``u`` ``[out, in]``, unsigned zero points
    ``z_u`` and float scales, each ``[out, G]`` (``group``: ``g``; ``None`` per tensor)."""
    half = 1 << (bits - 1)
    in_f = entry.shape[1]
    if order is not None:
        u = u[:, order]
    codes = (u - half).to(torch.int8 if bits <= 8 else torch.int16)
    z = (z_u - half).to(torch.int32)
    symmetric = bool((z == 0).all())
    if group is None:
        gran: object = PerTensor()
    elif group == in_f:
        gran = PerChannel(0)
    else:
        gran = PerGroup(group)
    cfg = QuantConfig(
        bits=bits,
        mode=Mode.SYMMETRIC if symmetric else Mode.ASYMMETRIC,
        granularity=gran,  # type: ignore[arg-type]
        scale_dtype=scale_dtype,
    )
    layout = layout_for(entry.shape, cfg.granularity)
    qt = QuantizedTensor(
        codes=codes.contiguous(),
        scale=scale.to(torch.float32).reshape(layout.scale_shape).contiguous(),
        zero_point=(torch.zeros_like(z) if symmetric else z).reshape(layout.scale_shape),
        config=cfg,
        layout=layout,
        input_dtype=torch.float32,
    )
    if order is not None:
        notes.append(
            "act-order: the groups are not runs of consecutive columns (g_idx), so the codes "
            "and maps show the columns sorted by group; column_order maps them back"
        )
    return StoredTensor(entry, qt, column_order=order, notes=tuple(notes))


def _decode_awq(entry: TensorEntry, geo: _Geometry, t: Mapping[str, torch.Tensor]) -> StoredTensor:
    u = unpack_int32(t["qweight"], 4, dim=1, interleaved=True).T  # [out, in]
    z_u = unpack_int32(t["qzeros"], 4, dim=1, interleaved=True).T  # [out, G]
    scale = t["scales"].T
    sd = _SCALE_DTYPES[_dtype_name(t["scales"])]
    return _int_tensor(entry, 4, u, z_u, scale, sd, geo.group_size, None, [])


def _dtype_name(x: torch.Tensor) -> str:
    return {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32"}[x.dtype]


_V1_ONES = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}


def _decode_gptq(
    entry: TensorEntry, geo: _Geometry, t: Mapping[str, torch.Tensor], where: str
) -> StoredTensor:
    bits, g = geo.bits, geo.group_size or entry.shape[1]
    u = unpack_int32(t["qweight"], bits, dim=0).T  # [out, in]
    qzeros = t["qzeros"]
    notes = []
    if geo.extra["v1"]:
        # GPTQModel's v1 -> v2 conversion: one added to every field of the word (int32
        # arithmetic, wrapping as theirs does).
        wrapped = (qzeros.to(torch.int64) + _V1_ONES[bits]) & 0xFFFFFFFF
        qzeros = (wrapped - ((wrapped >> 31) << 32)).to(torch.int32)
        notes.append(
            "zero points read as GPTQ v1 stores them (minus one)"
            + (": no quantize config says which, v1 is assumed" if geo.extra["assumed_v1"] else "")
        )
    z_u = unpack_int32(qzeros, bits, dim=1).T  # [out, G]
    scale = t["scales"].T
    n_groups = scale.shape[1]
    order = None
    if "g_idx" in t:
        order = column_order(t["g_idx"], n_groups, g, where)
    return _int_tensor(
        entry,
        bits,
        u,
        z_u,
        scale,
        _SCALE_DTYPES[_dtype_name(t["scales"])],
        g,
        order,
        notes,
    )


def _decode_ct(
    entry: TensorEntry, geo: _Geometry, t: Mapping[str, torch.Tensor], where: str
) -> StoredTensor:
    bits = geo.bits
    out_f, in_f = entry.shape
    half = 1 << (bits - 1)
    u = unpack_int32(t["packed"], bits, dim=1)[:, :in_f]
    strategy = geo.extra["strategy"]
    if strategy == "tensor":
        rows, n_groups, group = 1, 1, None
    elif strategy == "channel":
        rows, n_groups, group = out_f, 1, in_f
    else:
        group = geo.group_size or in_f
        rows, n_groups = out_f, in_f // group
    if "zero_point" not in t:
        z_u = torch.full((rows, n_groups), half, dtype=torch.int32)
    elif t["zero_point"].dtype == torch.int32 and strategy != "tensor":
        # packed along the output dimension, offset by 2^(b-1) like the codes
        z_u = unpack_int32(t["zero_point"].reshape(-1, n_groups), bits, dim=0)[:rows]
    else:
        z_u = t["zero_point"].to(torch.int32).reshape(rows, n_groups) + half
    order = None
    if "g_idx" in t and strategy == "group":
        order = column_order(t["g_idx"], n_groups, group or in_f, where)
    sd = _SCALE_DTYPES[_dtype_name(t["scale"])]
    return _int_tensor(entry, bits, u, z_u, t["scale"], sd, group, order, [])


def _bnb_codes(weight: torch.Tensor, numel: int) -> torch.Tensor:
    raw = weight.contiguous().view(torch.uint8).reshape(-1)
    return torch.stack([raw >> 4, raw & 0x0F], dim=1).reshape(-1)[:numel]


def _decode_bnb(entry: TensorEntry, geo: _Geometry, t: Mapping[str, torch.Tensor]) -> StoredTensor:
    state: dict = geo.extra["state"]  # type: ignore[assignment]  # set by _bnb_geometry
    blocksize = geo.group_size or 1
    numel = entry.numel
    codes = _bnb_codes(t["weight"], numel)
    # the code tables are indexed by code: flat, whatever shape the header gives them
    qmap = t["quant_map"].to(torch.float32).reshape(-1)
    nested = "nested_absmax" in t
    stored = None
    if nested:
        dq_codes = t["absmax"].reshape(-1).to(torch.int64)
        nb = int(state["nested_blocksize"])
        nested_map = t["nested_quant_map"].to(torch.float32).reshape(-1)
        run_absmax = t["nested_absmax"].to(torch.float32).reshape(-1)
        offset = torch.tensor(float(state["nested_offset"]), dtype=torch.float32)
        runs = run_absmax[torch.arange(dq_codes.numel()) // nb]
        absmax = nested_map[dq_codes] * runs + offset
    else:
        absmax = t["absmax"].to(torch.float32).reshape(-1)
    lab_format = _BNB_FORMATS[state["quant_type"]]
    # the file's table against the lab's, by code (bitsandbytes saves +0.0 for FP4's code
    # 8, its dequantize gives -0.0: torch.equal takes them as equal)
    lab_map = torch.equal(qmap, codebook_for(lab_format).decode_table)
    fits = len(entry.shape) >= 1 and entry.shape[-1] % blocksize == 0
    lab_dq = not nested or torch.equal(nested_map, dynamic_map())
    if lab_map and fits and lab_dq:
        if nested:
            scale_format: object = DoubleQuantScales(int(state["nested_blocksize"]))
        else:
            scale_format = None
        cfg = QuantConfig(
            format=lab_format,
            granularity=PerGroup(blocksize),
            **({"scale_format": scale_format} if scale_format is not None else {}),  # type: ignore[arg-type]
        )
        layout = layout_for(entry.shape, cfg.granularity)
        if nested:
            stored = StoredScales(
                codes=dq_codes.to(torch.int32).reshape(layout.scale_shape),
                super_scale=run_absmax,
                super_min=offset.reshape(()),
            )
        qt = QuantizedTensor(
            codes=codes.to(torch.uint8).reshape(entry.shape),
            scale=absmax.reshape(layout.scale_shape),
            zero_point=torch.zeros(layout.scale_shape, dtype=torch.int32),
            config=cfg,
            layout=layout,
            input_dtype=torch.float32,
            stored=stored,
        )
        return StoredTensor(entry, qt)
    values = qmap[codes.to(torch.int64)] * absmax[torch.arange(numel) // blocksize]
    why = (
        "its blocks run across rows"
        if not fits
        else f"its quant map differs from bitsandbytes' {state['quant_type'].upper()} table"
        if not lab_map
        else "its double-quantization map differs from bitsandbytes' dynamic map"
    )
    note = f"decoded as bitsandbytes does (quant_map[code] * absmax): {why}"
    return StoredTensor(entry, None, values.reshape(entry.shape), notes=(note,))


def plain_entry(e: STEntry, shard: str) -> TensorEntry:
    """A stored tensor that no layout claims: its dtype is its type."""
    return TensorEntry(e.name, e.dtype, e.shape, e.nbytes, shard, False)


def plain_tensor(entry: TensorEntry, tensor: torch.Tensor) -> StoredTensor:
    """A plain stored tensor's values as float32 (integers and bools converted)."""
    return StoredTensor(entry, None, tensor.to(torch.float32).reshape(entry.shape))


FLOAT_TYPES = FLOAT_DTYPES
