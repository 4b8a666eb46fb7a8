"""What the explorer lets users download: metrics as CSV, the quantized tensor as
``.safetensors`` (codes packed, so the file is the size the page reports), and the codes
alone packed densely.

The ``.safetensors`` file holds exactly what ``storage_cost`` counts, plus the file's JSON
header: ``codes`` (uint8, the ``R x C`` codes row-major packed at ``bits`` each, first code
in the lowest bits: ``quant_core.pack``), ``scale`` (one per block, in the scale dtype),
``zero_point`` (integer zero points of asymmetric integer schemes, packed at ``bits`` like
the codes) or ``offset`` (the float ``m`` of ``ZeroPoint.FLOAT_MIN``, in the scale dtype).
Its metadata names the shape, format, bits, mode, granularity, zero-point convention and
the dequantization formula, and ``config`` the whole scheme (``QuantConfig``'s every
field, so it reopens as the same config). A GGUF type's tensor is stored as the bytes a GGUF
file holds (``ggml_blocks``, ``ggml_type``: exactly the bits the page counts), another
two-level format's as its codes and its second level alone, as the format stores it
(``stored_codes``: E8M0 or E4M3 bytes, 8-bit double-quantization codes, packed super-block
integers; ``stored_super_scale``, ``stored_super_min``: NVFP4's float32 tensor scale,
double quantization's absmax and mean, a super-block's ``d`` and ``dmin``): again exactly
the bits the page counts. The tensors and their layout (``export_version``) come from
``quant_core.files.lab_export.export_tensors``; ``read_quantized_safetensors`` turns the
bytes back into the ``QuantizedTensor`` (the reading lives in ``quant_core.files.lab_export``
too, so the library's ``open_quantized`` opens an export, of this layout or the older one).

A research format (min-max levels, DoReFa) stores what ``research_storage`` counts instead:
``codes`` (unsigned ``c``, ``0 .. 2^k - 1``, packed at ``k`` bits) and its float32
parameters (``x_min`` and ``x_max``, or ``max_abs_w`` for rescaled DoReFa, or none), with
the scheme in the metadata's ``research`` entry; reading it rebuilds the level table
exactly (``LevelTableTensor``).
"""

from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import torch
from safetensors.torch import load, save

from quant_core import (
    Format,
    Mode,
    QuantConfig,
    QuantizedTensor,
    Recipe,
    code_total,
    pack,
    unpack,
)
from quant_core.files import read_lab_export_bytes
from quant_core.files.lab_export import (
    EXPORT_VERSION,
    TENSOR_KEY,
    config_to_json,
    export_tensors,
)

from ..state.research import research_from_query, research_to_query
from .explore import Exploration
from .research import LevelTableTensor, research_tensor

__all__ = [
    "DownloadFiles",
    "download_files",
    "metrics_csv",
    "metrics_frame",
    "packed_codes",
    "quantized_safetensors",
    "read_quantized_safetensors",
]

def metrics_frame(exp: Exploration) -> pd.DataFrame:
    """One row per figure: error metrics, storage and clipping, with the scheme's name."""
    rows: dict[str, object] = {"scheme": exp.describe(), "shape": str(tuple(exp.qt.shape))}
    rows.update(dataclasses.asdict(exp.metrics))
    storage = dataclasses.asdict(exp.storage)
    rows.update({f"storage_{k}": v for k, v in storage.items()})
    rows.update(
        {
            "clipped_low": exp.clip.n_clipped_low,
            "clipped_high": exp.clip.n_clipped_high,
            "saturated": exp.clip.n_saturated,
            "levels_used": exp.levels_used,
            "levels_total": code_total(exp.config),
        }
    )
    return pd.DataFrame({"metric": list(rows), "value": [str(v) for v in rows.values()]})


def metrics_csv(exp: Exploration) -> str:
    return metrics_frame(exp).to_csv(index=False)


def _formula(cfg: QuantConfig) -> str:
    if cfg.format is not Format.INT:
        return f"x_hat = scale * value[code], value = the {cfg.format.value} codebook"
    if cfg.mode is Mode.SYMMETRIC:
        return "x_hat = scale * code"
    if cfg.float_offset:
        return "x_hat = scale * code + offset"
    return "x_hat = scale * (code - zero_point)"


def quantized_safetensors(exp: Exploration, tensor_name: str | None = None) -> bytes:
    """The quantized tensor as ``.safetensors`` (see the module docstring for its tensors);
    ``tensor_name``: the name of the tensor quantized (a checkpoint's, a file's), recorded
    in the metadata (``TENSOR_KEY``) so the reopened file is matched with its original by
    name; ``None`` for a tensor with none (synthetic values, typed numbers).

    Its tensors' bytes are ``exp.storage.total_bytes`` give or take one byte of packing per
    packed tensor (two-level formats included: their scales are stored as the format
    stores them); the rest of the file is the JSON header.
    """
    cfg, qt = exp.config, exp.qt
    if isinstance(qt, LevelTableTensor) and qt.research is not None:
        return _research_safetensors(qt)
    gran = cfg.granularity
    meta = {
        "scheme": cfg.describe(),
        "shape": json.dumps(list(qt.shape)),
        "format": cfg.format.value,
        "bits": str(cfg.bits),
        "mode": cfg.mode.value,
        "granularity": json.dumps({"kind": type(gran).__name__, **dataclasses.asdict(gran)}),
        "zero_point_convention": cfg.zero_point.value,
        "scale_dtype": cfg.scale_dtype.value,
        "codes": f"{cfg.bits}-bit codes row-major, first code in the lowest bits, "
        + ("two's complement" if cfg.format is Format.INT else "unsigned codebook indices"),
        "dequantize": _formula(cfg),
        "export_version": EXPORT_VERSION,
    }
    meta["config"] = config_to_json(cfg)  # every field, range method and rounding too
    if tensor_name is not None:
        meta[TENSOR_KEY] = tensor_name
    if cfg.two_level or cfg.recipe is Recipe.LLAMA_CPP:
        blocks = _ggml_blocks(qt)
        if blocks is not None:  # llama.cpp's own bytes: the codes and both scale levels
            meta["ggml_type"] = str(cfg.gguf_type)
            meta["blocks"] = f"ggml_blocks: the tensor as a GGUF file stores it ({cfg.gguf_type})"
            return save({"ggml_blocks": blocks}, metadata=meta)
    tensors, layout = export_tensors(qt)  # codes, scales as the format stores them
    return save(tensors, metadata={**meta, **layout})


def _ggml_blocks(qt: QuantizedTensor) -> torch.Tensor | None:
    """The GGUF block bytes of ``qt`` when its config is a GGUF type whose bytes the lab
    writes (``None`` otherwise)."""
    if qt.config.gguf_type is None:
        return None
    try:
        raw = qt.to_ggml_bytes()
    except (ImportError, ValueError):
        return None
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)


# A safetensors name for each research parameter (``stored_parameters``' names).
_PARAM_FILE_NAMES = {"x_min": "x_min", "x_max": "x_max", "max|w|": "max_abs_w"}
_RESEARCH_FORMULA = {
    "minmax_levels": "x_hat = levels[code], levels = minmax_levels(x_min, x_max, bits, qk)",
    "dorefa": "x_hat = (2 q_k_levels(bits, qk)[code] - 1) * max_abs_w (1 when absent)",
}


def _research_safetensors(qt: LevelTableTensor) -> bytes:
    scheme = qt.research
    assert scheme is not None  # the caller checked
    query = research_to_query(scheme)
    meta = {
        "scheme": scheme.describe(),
        "shape": json.dumps(list(qt.shape)),
        "research": json.dumps(query),
        "bits": str(scheme.bits),
        "codes": f"{scheme.bits}-bit unsigned codes c row-major, first code in the lowest bits",
        "dequantize": _RESEARCH_FORMULA[query["fmt"]],
    }
    codes = (qt.codes.to(torch.int32) - qt.config.qmin).to(torch.int16)
    tensors = {"codes": pack(codes, scheme.bits)}
    for name, value in qt.parameters:
        tensors[_PARAM_FILE_NAMES[name]] = torch.tensor([value], dtype=torch.float32)
    return save(tensors, metadata=meta)


def _read_research(tensors: dict[str, torch.Tensor], meta: dict[str, str]) -> LevelTableTensor:
    scheme = research_from_query(json.loads(meta["research"]))
    shape = tuple(json.loads(meta["shape"]))
    codes = unpack(tensors["codes"], scheme.bits, math.prod(shape), signed=False)
    params = {
        name: float(tensors[file_name][0])
        for name, file_name in _PARAM_FILE_NAMES.items()
        if file_name in tensors
    }
    return research_tensor(codes, shape, scheme, params)


def read_quantized_safetensors(data: bytes) -> QuantizedTensor:
    """Inverse of ``quantized_safetensors``: the ``QuantizedTensor``
    (``quant_core.files.read_lab_export_bytes``: range method and rounding are not stored,
    they do not change how codes dequantize), a ``LevelTableTensor`` for a research
    format. Raises ``ValueError`` for a file that does not carry this format's metadata."""
    header_len = int.from_bytes(data[:8], "little") if len(data) >= 8 else 0
    if 0 < header_len <= len(data) - 8 and b'"research"' in data[8 : 8 + header_len]:
        tensors = load(data)  # validates the file; its metadata is in the JSON header
        meta = json.loads(data[8 : 8 + header_len]).get("__metadata__") or {}
        if "research" in meta and "shape" in meta and "codes" in tensors:
            return _read_research(tensors, meta)
    return read_lab_export_bytes(data)


def packed_codes(exp: Exploration) -> bytes:
    """The codes, row-major, packed at ``bits`` each, first code in the lowest bits (a
    research format's unsigned ``c``, as its ``.safetensors`` holds them)."""
    codes = exp.qt.codes
    if isinstance(exp.qt, LevelTableTensor):
        codes = (codes.to(torch.int32) - exp.config.qmin).to(torch.int16)
    return pack(codes, exp.config.bits).numpy(force=True).tobytes()


@dataclasses.dataclass(frozen=True)
class DownloadFiles:
    """The three downloads, built together when the user asks for them."""

    metrics_csv: bytes
    safetensors: bytes
    packed_codes: bytes


def download_files(exp: Exploration, tensor_name: str | None = None) -> DownloadFiles:
    """The three downloads of ``exp`` (``tensor_name``: as ``quantized_safetensors``)."""
    return DownloadFiles(
        metrics_csv(exp).encode(), quantized_safetensors(exp, tensor_name), packed_codes(exp)
    )
