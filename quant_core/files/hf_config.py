"""The quantization settings of a Hugging Face folder, from ``config.json``'s
``quantization_config`` (what ``transformers`` reads) or the quantizer's own file
(``quantize_config.json`` of AutoGPTQ/GPTQModel, ``quant_config.json`` of AutoAWQ).

Every value is checked; a method or a packing the reader does not know is a
``QuantizedFileError`` naming the file and the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..regex_risk import regex_risk
from .access import PathGuard, QuantizedFileError, read_json
from .entries import FileKind

__all__ = [
    "MAX_CONFIG_BYTES",
    "AWQSpec",
    "BnbSpec",
    "CTGroup",
    "CTSpec",
    "GPTQSpec",
    "QuantSpec",
    "read_spec",
]

MAX_CONFIG_BYTES = 16 * 2**20
MAX_TARGET_CHARS = 1_000
"""The longest ``re:`` target (compressed-tensors' module regexes are a few dozen)."""
MAX_MATCHED_NAME = 256
"""The longest module name a ``re:`` target is matched against (real ones: under 100)."""
CONFIG_NAMES = ("config.json", "quantize_config.json", "quant_config.json")


@dataclass(frozen=True)
class GPTQSpec:
    """AutoGPTQ / GPTQModel: ``bits`` (2, 4 or 8), ``group_size`` (-1: one group per
    row), ``desc_act`` (act-order), ``sym``, ``checkpoint_format``: ``"gptq"`` (v1, whose
    zero points are stored minus one) or ``"gptq_v2"`` (GPTQModel's, stored as they are)."""

    bits: int
    group_size: int
    desc_act: bool
    sym: bool
    checkpoint_format: str
    source: str


@dataclass(frozen=True)
class AWQSpec:
    """AutoAWQ: ``bits`` (4), ``group_size``, ``zero_point``, ``version`` (``"gemm"``)."""

    bits: int
    group_size: int
    zero_point: bool
    version: str
    source: str


@dataclass(frozen=True)
class CTGroup:
    """One of compressed-tensors' ``config_groups``: which modules (``targets``: class
    names such as ``"Linear"`` or ``"re:<regex>"`` on the module name) and their weights'
    ``num_bits``, ``symmetric``, ``strategy`` (``"group"``, ``"channel"``, ``"tensor"``),
    ``group_size`` and ``actorder``."""

    name: str
    targets: tuple[str, ...]
    num_bits: int
    symmetric: bool
    strategy: str
    group_size: int | None
    actorder: str | None


@dataclass(frozen=True)
class CTSpec:
    groups: tuple[CTGroup, ...]
    ignore: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class BnbSpec:
    """bitsandbytes via transformers: 4-bit (each tensor's own quant state says the rest)."""

    quant_type: str
    double_quant: bool
    source: str


QuantSpec = GPTQSpec | AWQSpec | CTSpec | BnbSpec

KIND_OF: dict[type, FileKind] = {
    GPTQSpec: FileKind.GPTQ,
    AWQSpec: FileKind.AWQ,
    CTSpec: FileKind.COMPRESSED_TENSORS,
    BnbSpec: FileKind.BITSANDBYTES,
}


def _read_json(path: Path, guard: PathGuard) -> dict[str, Any]:
    parsed = read_json(path, guard, MAX_CONFIG_BYTES)
    if not isinstance(parsed, dict):
        raise QuantizedFileError(f"{path.name} is not a JSON object")
    return parsed


def read_spec(folder: Path, guard: PathGuard) -> QuantSpec | None:
    """The folder's quantization settings, or ``None`` when it names none (a plain float
    checkpoint, or one whose tensors say it all: bitsandbytes' quant states)."""
    for name in CONFIG_NAMES:
        path = folder / name
        if not guard.check(path).is_file():
            continue
        data = _read_json(path, guard)
        section = data.get("quantization_config", data if name != "config.json" else None)
        if section is None:
            continue
        if not isinstance(section, dict):
            raise QuantizedFileError(f"{name}: quantization_config is not a JSON object")
        return parse_spec(section, name)
    return None


def _int(section: dict[str, Any], key: str, source: str, default: object = None) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuantizedFileError(f"{source}: {key} must be an integer, got {value!r}")
    return value


def _bool(section: dict[str, Any], key: str, source: str, default: bool) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise QuantizedFileError(f"{source}: {key} must be true or false, got {value!r}")
    return value


def _str(section: dict[str, Any], key: str, source: str, default: str) -> str:
    value = section.get(key, default)
    if not isinstance(value, str):
        raise QuantizedFileError(f"{source}: {key} must be a string, got {value!r}")
    return value


def parse_spec(section: dict[str, Any], source: str) -> QuantSpec:
    """The spec a ``quantization_config`` section describes (``source``: its file's name,
    for messages)."""
    method = section.get("quant_method")
    if method is None and "w_bit" in section:  # AutoAWQ's quant_config.json
        method = "awq"
    if method is None and "bits" in section and "group_size" in section:
        method = "gptq"  # AutoGPTQ's quantize_config.json names no method
    if method == "gptq":
        bits = _int(section, "bits", source)
        fmt = _str(section, "checkpoint_format", source, "gptq").lower()
        if bits not in (2, 4, 8):
            raise QuantizedFileError(
                f"{source}: GPTQ bits={bits} is packed in a way the reader does not know "
                "(2, 4 and 8 are read; 3-bit codes straddle the int32 words)"
            )
        if fmt not in ("gptq", "gptq_v2"):
            raise QuantizedFileError(
                f"{source}: GPTQ checkpoint_format {fmt!r} is a packing the reader does not "
                "know (gptq and gptq_v2 are read; marlin, bitblas, ipex repack the codes)"
            )
        pack_dtype = _str(section, "pack_dtype", source, "int32")
        if pack_dtype != "int32":
            raise QuantizedFileError(
                f"{source}: GPTQ pack_dtype {pack_dtype!r} is a packing the reader does not "
                "know (int32 is read)"
            )
        group = _int(section, "group_size", source, -1)
        if group != -1 and group < 1:
            raise QuantizedFileError(f"{source}: group_size {group} is not -1 or positive")
        return GPTQSpec(
            bits,
            group,
            _bool(section, "desc_act", source, False),
            _bool(section, "sym", source, True),
            fmt,
            source,
        )
    if method == "awq":
        bits = _int(section, "bits", source, section.get("w_bit", 4))
        group = _int(section, "group_size", source, section.get("q_group_size", 128))
        version = _str(section, "version", source, "gemm").lower()
        if bits != 4 or version != "gemm":
            raise QuantizedFileError(
                f"{source}: AWQ {bits}-bit version {version!r} is a packing the reader does "
                "not know (4-bit GEMM is read)"
            )
        zero_point = _bool(section, "zero_point", source, True)
        return AWQSpec(bits, group, zero_point, version, source)
    if method == "compressed-tensors":
        return _compressed(section, source)
    if method == "bitsandbytes":
        if not section.get("load_in_4bit", False):
            raise QuantizedFileError(
                f"{source}: bitsandbytes 8-bit (load_in_8bit) is not read; 4-bit is"
            )
        return BnbSpec(
            _str(section, "bnb_4bit_quant_type", source, "fp4"),
            _bool(section, "bnb_4bit_use_double_quant", source, False),
            source,
        )
    raise QuantizedFileError(
        f"{source}: quant_method {method!r} is a quantization config the reader does not know "
        "(gptq, awq, compressed-tensors and bitsandbytes are read)"
    )


def _compressed(section: dict[str, Any], source: str) -> CTSpec:
    fmt = section.get("format")
    groups_raw = section.get("config_groups")
    if not isinstance(groups_raw, dict) or not groups_raw:
        raise QuantizedFileError(f"{source}: compressed-tensors config_groups is missing")
    groups = []
    for gname, group in groups_raw.items():
        if not isinstance(group, dict):
            raise QuantizedFileError(f"{source}: config group {gname!r} is not an object")
        gfmt = group.get("format") or fmt
        if gfmt != "pack-quantized":
            raise QuantizedFileError(
                f"{source}: compressed-tensors format {gfmt!r} (group {gname!r}) is a packing "
                "the reader does not know (pack-quantized is read)"
            )
        weights = group.get("weights")
        if not isinstance(weights, dict):
            raise QuantizedFileError(f"{source}: config group {gname!r} quantizes no weights")
        where = f"{source} group {gname!r}"
        kind = _str(weights, "type", where, "int")
        bits = _int(weights, "num_bits", where)
        if kind != "int" or bits not in (2, 4, 8):
            raise QuantizedFileError(
                f"{where}: {kind} {bits}-bit weights are not pack-quantized integers the "
                "reader knows (int 2, 4, 8)"
            )
        strategy = _str(weights, "strategy", where, "tensor")
        if strategy not in ("group", "channel", "tensor"):
            raise QuantizedFileError(f"{where}: strategy {strategy!r} is not read")
        group_size = weights.get("group_size")
        if strategy == "group" and (
            isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1
        ):
            raise QuantizedFileError(f"{where}: group strategy needs a positive group_size")
        targets = group.get("targets", [])
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise QuantizedFileError(f"{where}: targets must be a list of names")
        for target in targets:
            why = regex_risk(target[3:], MAX_TARGET_CHARS) if target.startswith("re:") else None
            if why is not None:
                raise QuantizedFileError(f"{where}: target {target[:80]!r} is refused: {why}")
        actorder = weights.get("actorder")
        groups.append(
            CTGroup(
                gname,
                tuple(targets),
                bits,
                _bool(weights, "symmetric", where, True),
                strategy,
                group_size if strategy == "group" else None,
                actorder if isinstance(actorder, str) else None,
            )
        )
    ignore = section.get("ignore", [])
    if not isinstance(ignore, list):
        ignore = []
    return CTSpec(tuple(groups), tuple(i for i in ignore if isinstance(i, str)), source)


