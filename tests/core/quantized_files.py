"""Reference writers of the quantized files the reader opens, for the tests.

Each packer follows the layout its project publishes, written here from their code (cited
at each function) with numpy loops as simple as theirs, so that the reader (vectorised,
its own code) is checked against an independent writing of the same bits:

- GGUF: ``gguf.GGUFWriter`` itself (llama.cpp's ``gguf`` package), types quantized by the
  package (``gguf.quants.quantize``) or by the lab (``QuantizedTensor.to_ggml_bytes``), or
  raw blocks for the types neither quantizes.
- GPTQ: AutoGPTQ ``auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py`` ``QuantLinear.pack``
  (``qweight[row] |= intweight[j] << (bits * (j - i))``, ``zeros -= 1`` before packing
  ``qzeros`` for checkpoint format ``gptq``); GPTQModel's ``gptq_v2`` stores the zeros as
  they are.
- AWQ: AutoAWQ ``awq/modules/linear/gemm.py`` ``WQLinear_GEMM.from_linear``
  (``order_map = [0, 2, 4, 6, 1, 3, 5, 7]``, ``qweight[:, col] |= intweight[:, col * 8 +
  order_map[i]] << (i * 4)``).
- compressed-tensors: ``compressors/quantized_compressors/pack_quantized.py``
  ``pack_to_int32`` (values offset by ``2^(b-1)``, ``packed |= value[:, i::pack_factor] <<
  num_bits * i``; zero points with ``packed_dim=0``).
- bitsandbytes: the real ``bitsandbytes.nn.Linear4bit`` quantized on the CPU, its
  ``state_dict()`` (``weight`` plus ``weight.<quant state key>``, what transformers saves).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
import torch
from safetensors.torch import save_file

GGML = gguf.GGMLQuantizationType


def write_gguf(
    path: Path,
    tensors: Mapping[str, tuple[np.ndarray, GGML | None]],
    arch: str = "llama",
    metadata: Mapping[str, object] | None = None,
    split_max_tensors: int = 0,
) -> None:
    """A GGUF file (or split series when ``split_max_tensors``) by ``gguf.GGUFWriter``
    (``metadata`` ints as UINT32 unless given as ``(value, gguf.GGUFValueType)``); each
    tensor is float values (``type None``: stored as F32/F16 as given) or already
    quantized block bytes ``[rows, bytes_per_row]`` of ``type``."""
    writer = gguf.GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    for key, value in (metadata or {}).items():
        if isinstance(value, tuple) and isinstance(value[-1], gguf.GGUFValueType):
            writer.add_key_value(key, value[0], value[1])  # (value, its stored type)
        elif isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_array(key, list(value))  # type: ignore[arg-type]
    for name, (data, qtype) in tensors.items():
        if qtype is None:
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def random_blocks(
    rng: np.random.Generator, qtype: GGML, rows: int, cols: int, scale: float = 0.01
) -> np.ndarray:
    """Valid block bytes of ``qtype`` (``[rows, cols / block * type_size]``): random bytes
    whose fp16 scale fields (the block's first ``2`` or ``4`` bytes: ``d``, ``dmin``, or
    the super-block's ``d`` at its end for Q6_K) hold finite values."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    halves = rng.uniform(0.5, 1.5, size=(rows, cols // block, 2)) * scale
    fields = halves.astype(np.float16).view(np.uint8).reshape(rows, cols // block, 4)
    if qtype in (GGML.Q6_K, GGML.Q3_K, GGML.Q2_K):
        raw[..., -4:] = fields  # d (and dmin) at the end of the super-block
    elif qtype in (GGML.TQ1_0, GGML.TQ2_0):
        raw[..., -2:] = fields[..., :2]
    else:
        raw[..., :4] = fields
    return raw.reshape(rows, -1)


# -- GPTQ (AutoGPTQ / GPTQModel) ---------------------------------------------------------------


@dataclass(frozen=True)
class IntLayer:
    """What a packer packs, in the projects' own terms: unsigned codes ``intweight``
    ``[out, in]``, unsigned zero points ``zeros`` ``[G, out]``, fp16 ``scales`` ``[G,
    out]``, ``g_idx`` ``[in]`` (each input column's group)."""

    intweight: np.ndarray
    zeros: np.ndarray
    scales: np.ndarray
    g_idx: np.ndarray

    def dequantize(self) -> torch.Tensor:
        """``W[o, i] = scales[g_idx[i], o] * (intweight[o, i] - zeros[g_idx[i], o])``, in
        float32 (exact: an fp16 scale times an integer below 2^8)."""
        s = torch.from_numpy(self.scales.astype(np.float32))[self.g_idx].T
        z = torch.from_numpy(self.zeros.astype(np.float32))[self.g_idx].T
        return s * (torch.from_numpy(self.intweight.astype(np.float32)) - z)


def random_int_layer(
    rng: np.random.Generator,
    out_f: int,
    in_f: int,
    bits: int,
    group: int,
    act_order: bool = False,
    zero_lo: int = 0,
) -> IntLayer:
    """Random codes, zero points in ``[zero_lo, 2^bits - 1]``, scales; with ``act_order``
    the groups are an act-order permutation's (GPTQ's ``g_idx = perm_position // group``)."""
    n_groups = in_f // group
    maxq = (1 << bits) - 1
    intweight = rng.integers(0, maxq + 1, size=(out_f, in_f))
    zeros = rng.integers(zero_lo, maxq + 1, size=(n_groups, out_f))
    scales = (rng.uniform(0.5, 2.0, size=(n_groups, out_f)) * 0.01).astype(np.float16)
    if act_order:
        perm = rng.permutation(in_f)  # columns in order of decreasing Hessian diagonal
        g_idx = np.empty(in_f, dtype=np.int32)
        g_idx[perm] = np.arange(in_f) // group  # AutoGPTQ: g_idx[invperm] of i // group
    else:
        g_idx = (np.arange(in_f) // group).astype(np.int32)
    return IntLayer(intweight, zeros, scales, g_idx)


def pack_gptq(layer: IntLayer, bits: int, v1: bool) -> dict[str, torch.Tensor]:
    """``qweight``, ``qzeros``, ``scales``, ``g_idx`` as AutoGPTQ's ``QuantLinear.pack``
    writes them (``v1``: ``zeros -= 1`` first, checkpoint format ``gptq``)."""
    intweight = layer.intweight.T.astype(np.uint32)  # [in, out]
    per = 32 // bits
    qweight = np.zeros((intweight.shape[0] // 32 * bits, intweight.shape[1]), dtype=np.uint32)
    i = row = 0
    while row < qweight.shape[0]:
        for j in range(i, i + per):
            qweight[row] |= intweight[j] << (bits * (j - i))
        i += per
        row += 1
    zeros = layer.zeros.astype(np.int64) - (1 if v1 else 0)
    zeros = zeros.astype(np.uint32)
    qzeros = np.zeros((zeros.shape[0], zeros.shape[1] // 32 * bits), dtype=np.uint32)
    i = col = 0
    while col < qzeros.shape[1]:
        for j in range(i, i + per):
            qzeros[:, col] |= zeros[:, j] << (bits * (j - i))
        i += per
        col += 1
    return {
        "qweight": torch.from_numpy(qweight.astype(np.int32)),
        "qzeros": torch.from_numpy(qzeros.astype(np.int32)),
        "scales": torch.from_numpy(layer.scales),
        "g_idx": torch.from_numpy(layer.g_idx.astype(np.int32)),
    }


def pack_awq(layer: IntLayer) -> dict[str, torch.Tensor]:
    """``qweight``, ``qzeros``, ``scales`` as AutoAWQ's ``WQLinear_GEMM.from_linear``."""
    order_map = [0, 2, 4, 6, 1, 3, 5, 7]
    intweight = layer.intweight.T.astype(np.uint32)  # [in, out]
    qweight = np.zeros((intweight.shape[0], intweight.shape[1] // 8), dtype=np.uint32)
    for col in range(intweight.shape[1] // 8):
        for i in range(8):
            qweight[:, col] |= intweight[:, col * 8 + order_map[i]] << (i * 4)
    zeros = layer.zeros.astype(np.uint32)
    qzeros = np.zeros((zeros.shape[0], zeros.shape[1] // 8), dtype=np.uint32)
    for col in range(zeros.shape[1] // 8):
        for i in range(8):
            qzeros[:, col] |= zeros[:, col * 8 + order_map[i]] << (i * 4)
    return {
        "qweight": torch.from_numpy(qweight.astype(np.int32)),
        "qzeros": torch.from_numpy(qzeros.astype(np.int32)),
        "scales": torch.from_numpy(layer.scales),
    }


# -- compressed-tensors pack-quantized ---------------------------------------------------------


def pack_to_int32(value: np.ndarray, num_bits: int, packed_dim: int = 1) -> torch.Tensor:
    """compressed-tensors' ``pack_to_int32`` on signed int8 ``value`` (2-D)."""
    offset = 1 << (num_bits - 1)
    value = (value.astype(np.int16) + offset).astype(np.uint8).astype(np.uint32)
    pack_factor = 32 // num_bits
    packed_size = -(-value.shape[packed_dim] // pack_factor)
    padding = packed_size * pack_factor - value.shape[packed_dim]
    if packed_dim == 1:
        value = np.pad(value, [(0, 0), (0, padding)])
        packed = np.zeros((value.shape[0], packed_size), dtype=np.uint32)
        for i in range(pack_factor):
            packed |= value[:, i::pack_factor] << num_bits * i
    else:
        value = np.pad(value, [(0, padding), (0, 0)])
        packed = np.zeros((packed_size, value.shape[1]), dtype=np.uint32)
        for i in range(pack_factor):
            packed |= value[i::pack_factor, :] << num_bits * i
    return torch.from_numpy(np.ascontiguousarray(packed).view(np.int32))


@dataclass(frozen=True)
class SignedLayer:
    """compressed-tensors' terms: signed ``q`` ``[out, in]``, signed ``zp`` and ``scale``
    ``[out, G]`` (bf16), optional ``g_idx``."""

    q: np.ndarray
    zp: np.ndarray
    scale: torch.Tensor
    g_idx: np.ndarray | None

    def dequantize(self) -> torch.Tensor:
        """``(q - zp) * scale`` in float32 (exact), per column's group."""
        in_f = self.q.shape[1]
        n_groups = self.scale.shape[1]
        g = self.g_idx if self.g_idx is not None else np.arange(in_f) // (in_f // n_groups)
        s = self.scale.to(torch.float32)[:, g]
        z = torch.from_numpy(self.zp.astype(np.float32))[:, g]
        return (torch.from_numpy(self.q.astype(np.float32)) - z) * s


def random_signed_layer(
    rng: np.random.Generator,
    out_f: int,
    in_f: int,
    bits: int,
    group: int,
    symmetric: bool,
    act_order: bool = False,
) -> SignedLayer:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    n_groups = in_f // group
    q = rng.integers(lo, hi + 1, size=(out_f, in_f)).astype(np.int8)
    zp = np.zeros((out_f, n_groups), dtype=np.int8)
    if not symmetric:
        zp = rng.integers(lo, hi + 1, size=(out_f, n_groups)).astype(np.int8)
    scale = torch.from_numpy(rng.uniform(0.005, 0.02, size=(out_f, n_groups)).astype(np.float32))
    g_idx = None
    if act_order:
        g_idx = np.empty(in_f, dtype=np.int32)
        g_idx[rng.permutation(in_f)] = np.arange(in_f) // group
    return SignedLayer(q, zp, scale.to(torch.bfloat16), g_idx)


def pack_compressed(layer: SignedLayer, bits: int) -> dict[str, torch.Tensor]:
    """``weight_packed``, ``weight_scale``, ``weight_shape`` (and the packed
    ``weight_zero_point`` when asymmetric, ``weight_g_idx`` under act-order) as
    ``PackedQuantizationCompressor.compress_weight`` writes them."""
    out = {
        "weight_packed": pack_to_int32(layer.q, bits),
        "weight_scale": layer.scale,
        "weight_shape": torch.tensor(list(layer.q.shape)),
    }
    if bool((layer.zp != 0).any()):
        out["weight_zero_point"] = pack_to_int32(layer.zp, bits, packed_dim=0)
    if layer.g_idx is not None:
        out["weight_g_idx"] = torch.from_numpy(layer.g_idx)
    return out


# -- folders --------------------------------------------------------------------------------


def write_folder(
    folder: Path,
    tensors: Mapping[str, torch.Tensor],
    quantization_config: Mapping[str, object] | None,
    shards: int = 1,
    extra_files: Mapping[str, object] | None = None,
) -> Path:
    """A Hugging Face folder: ``config.json`` (with ``quantization_config`` when given) and
    the tensors in ``model.safetensors`` or ``shards`` shards with their index."""
    folder.mkdir(parents=True, exist_ok=True)
    config: dict[str, object] = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    if quantization_config is not None:
        config["quantization_config"] = dict(quantization_config)
    (folder / "config.json").write_text(json.dumps(config))
    for name, value in (extra_files or {}).items():
        (folder / name).write_text(json.dumps(value))
    names = sorted(tensors)
    if shards == 1:
        save_file({n: tensors[n].contiguous() for n in names}, str(folder / "model.safetensors"))
        return folder
    weight_map = {}
    per = -(-len(names) // shards)
    for k in range(shards):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = names[k * per : (k + 1) * per]
        save_file({n: tensors[n].contiguous() for n in part}, str(folder / shard))
        weight_map.update(dict.fromkeys(part, shard))
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )
    return folder


def prefixed(prefix: str, parts: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{prefix}.{k}": v for k, v in parts.items()}


def bnb_state_dict(
    weight: torch.Tensor,
    prefix: str,
    quant_type: str = "nf4",
    double_quant: bool = True,
    blocksize: int = 64,
) -> dict[str, torch.Tensor]:
    """``bitsandbytes.nn.Linear4bit``'s state dict (its ``_save_to_state_dict``: the packed
    ``weight`` and ``weight.<key>`` of ``QuantState.as_dict(packed=True)``), quantized on
    the CPU, keys under ``prefix``."""
    import bitsandbytes as bnb

    out_f, in_f = weight.shape
    module = bnb.nn.Linear4bit(
        in_f,
        out_f,
        bias=False,
        compute_dtype=torch.float32,
        compress_statistics=double_quant,
        quant_type=quant_type,
    )
    module.weight = bnb.nn.Params4bit(
        weight.clone(),
        requires_grad=False,
        compress_statistics=double_quant,
        quant_type=quant_type,
        blocksize=blocksize,
    )._quantize("cpu")
    return {f"{prefix}.{k}": v.clone() for k, v in module.state_dict().items()}
