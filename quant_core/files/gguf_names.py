"""GGUF tensor names back to the Hugging Face names they were converted from, and the one
reordering llama.cpp's converter applies on the way.

``gguf.get_tensor_name_map(arch, n_blocks)`` maps every name a supported model family uses
(``model.layers.0.self_attn.q_proj``) to its GGUF name (``blk.0.attn_q``); turned around,
a GGUF name has a few candidate Hugging Face names (one per family that spells it its own
way), and the original model's folder says which one it uses.

llama.cpp's ``convert_hf_to_gguf.py`` permutes the rows of the query and key projections
of Llama-family models (``LlamaModel.permute``: Hugging Face's rotary layout to GGML's),
so ``blk.N.attn_q.weight`` is ``q_proj.weight`` with its rows reordered; ``to_gguf_rows``
applies the same permutation to an original, so the two are compared row for row.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import gguf
import torch

__all__ = ["MAX_NAMED_BLOCKS", "PERMUTED_ARCHS", "original_names", "to_gguf_rows"]

PERMUTED_ARCHS = frozenset({"llama"})
"""Architectures whose query/key rows llama.cpp's converter permutes (``LlamaModel``)."""

_SUFFIXES = (".weight", ".bias")
_BLOCK = re.compile(r"blk\.(\d{1,6})\.")
MAX_NAMED_BLOCKS = 512
"""Blocks ``0 .. 511`` are mapped back to Hugging Face names (about 0.5 s to build the
map once per architecture and block count); a tensor of a later block has none."""


@functools.cache
def _arch_of(name: str) -> gguf.MODEL_ARCH | None:
    for arch, arch_name in gguf.MODEL_ARCH_NAMES.items():
        if arch_name == name:
            return arch
    return None


@functools.lru_cache(maxsize=16)
def _reverse(arch_name: str, n_blocks: int) -> Mapping[str, tuple[str, ...]]:
    arch = _arch_of(arch_name)
    if arch is None:
        return {}
    names: dict[str, list[str]] = {}
    for key, (_, gguf_name) in gguf.get_tensor_name_map(arch, n_blocks).mapping.items():
        if key != gguf_name:
            names.setdefault(gguf_name, []).append(key)
    # The transformers spelling (``model.layers...``) first: the likeliest in a snapshot.
    return {
        g: tuple(sorted(keys, key=lambda k: (not k.startswith("model."), 0)))
        for g, keys in names.items()
    }


def original_names(metadata: Mapping[str, Any], gguf_name: str) -> tuple[str, ...]:
    """The Hugging Face names the GGUF tensor ``gguf_name`` may have been converted from,
    for the file's ``general.architecture`` and ``<arch>.block_count``; ``()`` when the
    ``gguf`` package has no mapping for it."""
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        return ()
    n_blocks = metadata.get(f"{arch}.block_count", 0)
    if not isinstance(n_blocks, int) or not 0 <= n_blocks <= 10_000:
        n_blocks = 0
    # A file without ``<arch>.block_count`` (written by a script, not llama.cpp's
    # converter) named no ``blk.N`` tensor back: the map has the blocks the file counts.
    # The tensor's own block number says how many there are at least; rounded up to a
    # power of two so a file's tensors share a few maps (``_reverse`` keeps 16).
    block = _BLOCK.match(gguf_name)
    if block is not None and int(block.group(1)) >= n_blocks:
        n_blocks = 1 << int(block.group(1)).bit_length()
    # The map lists every block's names: 10,000 blocks took 17 to 24 s to build, for a
    # file of one tensor. Real models have under 200 blocks; later ones go unnamed.
    n_blocks = min(n_blocks, MAX_NAMED_BLOCKS)
    base, suffix = gguf_name, ""
    for s in _SUFFIXES:
        if gguf_name.endswith(s):
            base, suffix = gguf_name[: -len(s)], s
            break
    return tuple(k + suffix for k in _reverse(arch, n_blocks).get(base, ()))


def to_gguf_rows(
    original: torch.Tensor, hf_name: str, metadata: Mapping[str, Any]
) -> tuple[torch.Tensor, str | None]:
    """``original`` (the Hugging Face tensor ``hf_name``) in the row order llama.cpp's
    converter wrote it in, and a sentence saying what was done (``None`` when nothing).

    For ``PERMUTED_ARCHS``, a ``q_proj`` weight or bias is permuted with
    ``<arch>.attention.head_count`` heads and a ``k_proj`` one with
    ``head_count_kv``: rows ``[h, 2, d/2]`` become ``[h, d/2, 2]`` (``LlamaModel.permute``).
    ``ValueError`` when the head count does not divide the rows."""
    arch = metadata.get("general.architecture")
    if arch not in PERMUTED_ARCHS or not hf_name.endswith(
        tuple(p + s for p in ("q_proj", "k_proj") for s in _SUFFIXES)
    ):
        return original, None
    n_head = metadata.get(f"{arch}.attention.head_count")
    n_kv = metadata.get(f"{arch}.attention.head_count_kv", n_head)
    heads = n_kv if ".k_proj" in hf_name else n_head
    if not isinstance(heads, int) or heads < 1:
        return original, None
    rows = original.shape[0]
    if rows % (2 * heads):
        raise ValueError(
            f"{hf_name}: {rows} rows do not split into {heads} heads of pairs, as "
            "llama.cpp's converter permutes them"
        )
    permuted = (
        original.reshape(heads, 2, rows // heads // 2, *original.shape[1:])
        .swapaxes(1, 2)
        .reshape(original.shape)
    )
    return permuted, (
        f"{hf_name}'s rows permuted as llama.cpp's converter does for {arch} ({heads} heads), "
        "to compare row for row"
    )
