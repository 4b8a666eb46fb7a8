"""Sub-byte codes packed in int32 words, as GPTQ, AWQ and compressed-tensors store them,
and the act-order column permutation their ``g_idx`` describes.

A word holds ``32 / bits`` codes, the first in the lowest bits. Along ``dim=0`` (GPTQ's
``qweight``, compressed-tensors' zero points) consecutive rows share a word; along
``dim=1`` (GPTQ's ``qzeros``, AWQ, compressed-tensors' ``weight_packed``) consecutive
columns do. AutoAWQ's GEMM kernels interleave the 8 codes of a word: nibble ``k`` holds
column ``AWQ_ORDER[k]`` of its run of 8.
"""

from __future__ import annotations

import torch

from .access import QuantizedFileError

__all__ = ["AWQ_ORDER", "column_order", "unpack_int32"]

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
"""Nibble ``k`` of an AutoAWQ GEMM word holds column ``AWQ_ORDER[k]`` of its run of 8."""
_AWQ_INVERSE = tuple(AWQ_ORDER.index(j) for j in range(8))  # (0, 4, 1, 5, 2, 6, 3, 7)


def unpack_int32(
    packed: torch.Tensor, bits: int, dim: int, interleaved: bool = False
) -> torch.Tensor:
    """The unsigned ``bits``-bit codes (int32, ``0 .. 2^bits - 1``) of a 2-D int32
    ``packed``, ``32 / bits`` per word along ``dim``: ``[R, C]`` becomes ``[R * 32/bits,
    C]`` (``dim=0``) or ``[R, C * 32/bits]`` (``dim=1``, AWQ's order if ``interleaved``)."""
    per = 32 // bits
    shifts = torch.arange(0, 32, bits, dtype=torch.int32)
    codes = (packed.to(torch.int32).unsqueeze(-1) >> shifts) & ((1 << bits) - 1)  # [R, C, per]
    rows, cols = packed.shape
    if dim == 0:
        return codes.permute(0, 2, 1).reshape(rows * per, cols)
    if interleaved:
        codes = codes[..., list(_AWQ_INVERSE)]
    return codes.reshape(rows, cols * per)


def column_order(
    g_idx: torch.Tensor, n_groups: int, group_size: int, where: str
) -> torch.Tensor | None:
    """``None`` when ``g_idx`` (each input column's group) is ``column // group_size``:
    the groups are runs of consecutive columns. Otherwise (act-order) the permutation that
    makes them runs: the columns sorted by group, stably, as int64; every group must hold
    exactly ``group_size`` columns. ``QuantizedFileError`` (naming ``where``) otherwise."""
    g = g_idx.to(torch.int64).reshape(-1)
    if g.numel() and (int(g.min()) < 0 or int(g.max()) >= n_groups):
        raise QuantizedFileError(
            f"{where}: g_idx names groups {int(g.min())}..{int(g.max())}, outside the "
            f"{n_groups} groups the scales hold"
        )
    if torch.equal(g, torch.arange(g.numel()) // group_size):
        return None
    counts = torch.bincount(g, minlength=n_groups)
    if not bool((counts == group_size).all()):
        raise QuantizedFileError(
            f"{where}: g_idx gives groups of {int(counts.min())} to {int(counts.max())} "
            f"columns; act-order groups hold {group_size} each"
        )
    return torch.sort(g, stable=True).indices
