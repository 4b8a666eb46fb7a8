"""Cache-sized pieces for the eager path's elementwise work and reductions over
``[n_blocks, block_len]``.

The eager path (``kernels.Backend.EAGER``: the reference, and the fallback where compiling
is not possible or the device is not a CPU) runs each formula as a chain of torch operators.
Over a whole large tensor every operator would stream it through memory once, through a
tensor-sized temporary (a page fault per 4 KiB). Over pieces of ``CHUNK_ELEMS`` elements the
chain reuses one small temporary that stays in cache. A piece is below torch's parallel
grain (32768 elements), so each operator runs on the calling thread alone: it never waits
for torch's thread team, which on a busy machine costs a scheduler tick per operator for
each descheduled thread. Pieces run in order, each writing its own part of the output, so
results do not depend on threads. (A Python thread pool used to spread the pieces over the
cores; the compiled kernels, one parallel loop per pass, have replaced it where speed
matters, and the eager path now keeps to one core.) Other devices get the whole tensor as
one piece.

``block_extremes`` runs as a compiled kernel where ``kernels`` allows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from . import kernels

__all__ = [
    "CHUNK_ELEMS",
    "block_extremes",
    "chunk_slices",
    "for_each_piece",
    "map_rows",
    "scratch_buffer",
]

CHUNK_ELEMS = 24576  # 96 KiB of float32, a multiple of 128 and 1024, below 32768

Piece = tuple[slice, slice]


def chunk_slices(blocks: torch.Tensor) -> list[Piece]:
    """``(rows, cols)`` slices covering the 2-D ``blocks`` in pieces of <= ``CHUNK_ELEMS``.

    A piece is whole rows, or part of one row when a row alone is longer, so each piece of
    a contiguous ``blocks`` is contiguous; column pieces of a row are listed in order.
    """
    n_rows, row_len = blocks.shape
    if blocks.device.type != "cpu" or blocks.numel() <= CHUNK_ELEMS:
        return [(slice(None), slice(None))]
    cols = min(row_len, CHUNK_ELEMS)
    rows = max(1, CHUNK_ELEMS // row_len)
    return [
        (slice(r, r + rows), slice(c, c + cols))
        for r in range(0, n_rows, rows)
        for c in range(0, row_len, cols)
    ]


def for_each_piece(
    pieces: Sequence[Piece], work: Callable[[slice, slice, dict[str, torch.Tensor]], None]
) -> None:
    """Call ``work(rows, cols, scratch)`` for every piece, in order, on this thread;
    ``scratch`` is one dict for every call (for reusable temporaries). ``work`` must write
    only its own piece of any output."""
    scratch: dict[str, torch.Tensor] = {}
    for rows, cols in pieces:
        work(rows, cols, scratch)


def scratch_buffer(
    scratch: dict[str, torch.Tensor], key: str, like: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """A temporary of ``like``'s shape from ``scratch``, reused across pieces."""
    buf = scratch.get(key)
    if buf is None or buf.dtype != dtype:
        buf = scratch[key] = torch.empty(CHUNK_ELEMS, dtype=dtype, device=like.device)
    return buf[: like.numel()].view(like.shape)


def block_extremes(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of the 2-D ``blocks``, ``(min, max)``, each ``[n_rows, 1]``; NaN propagates,
    and a zero extreme is ``+0`` (``kernels.canonical_zeros``), on either path."""
    fast = kernels.extremes(blocks)
    if fast is not None:
        return fast
    lo, hi = _eager_extremes(blocks)
    return map_rows(
        lambda lo, hi: (kernels.canonical_zeros(lo), kernels.canonical_zeros(hi)), lo, hi
    )


def _eager_extremes(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    pieces = chunk_slices(blocks)
    if len(pieces) == 1:
        return blocks.amin(dim=1, keepdim=True), blocks.amax(dim=1, keepdim=True)
    n_rows, row_len = blocks.shape
    width = min(row_len, CHUNK_ELEMS)
    n_cols = -(-row_len // width)
    # partial[j, i]: extreme of row i over its j-th column piece (contiguous per piece)
    lo = torch.empty(n_cols, n_rows, dtype=blocks.dtype, device=blocks.device)
    hi = torch.empty_like(lo)

    def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
        j = cols.start // width
        part = blocks[rows, cols]
        torch.amin(part, dim=1, out=lo[j, rows])
        torch.amax(part, dim=1, out=hi[j, rows])

    for_each_piece(pieces, work)
    if n_cols == 1:
        return lo.reshape(n_rows, 1), hi.reshape(n_rows, 1)
    return lo.amin(dim=0).unsqueeze(1), hi.amax(dim=0).unsqueeze(1)


def map_rows(
    fn: Callable[..., tuple[torch.Tensor, ...]], *tensors: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """``fn(*tensors)``, computed on pieces of <= ``CHUNK_ELEMS`` rows on CPU and joined
    along dim 0: for the many small ops on per-block columns ``[n_blocks, 1]``, each below
    torch's parallel grain (see the module doc). ``fn`` must work piece by piece and return
    a tuple of tensors; results with one row per input row are copied into one output piece
    by piece (no whole-size operator), others (say, one flag per piece) are concatenated."""
    n = tensors[0].shape[0]
    if tensors[0].device.type != "cpu" or n <= CHUNK_ELEMS:
        return fn(*tensors)
    starts = range(0, n, CHUNK_ELEMS)
    parts = [fn(*(t[i : i + CHUNK_ELEMS] for t in tensors)) for i in starts]
    joined = []
    for column in zip(*parts, strict=True):
        if sum(p.shape[0] for p in column) != n:
            joined.append(torch.cat(column))
            continue
        out = column[0].new_empty((n, *column[0].shape[1:]))
        for i, p in zip(starts, column, strict=True):
            out[i : i + p.shape[0]] = p
        joined.append(out)
    return tuple(joined)
