"""Cache-sized pieces for elementwise work and reductions over ``[n_blocks, block_len]``.

On CPU, a whole-tensor temporary costs a page fault per 4 KiB, and every op over a large
tensor wakes torch's thread team, which on a busy machine waits a scheduler tick for each
busy thread. Work over pieces of ``CHUNK_ELEMS`` elements reuses a small temporary that
stays in cache, and each op on a piece, being below torch's parallel grain (32768
elements), runs on the thread that calls it alone. ``for_each_piece`` spreads the pieces
over up to ``torch.get_num_threads()`` Python threads (torch releases the GIL inside each
op), so the work still uses every core, and a descheduled thread delays only its own share.
Every piece writes its own part of the output, so results do not depend on the threads,
and the workers run in the caller's inference/grad mode.
Other devices get the whole tensor as one piece, on the calling thread.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

__all__ = [
    "CHUNK_ELEMS",
    "block_extremes",
    "chunk_slices",
    "for_each_piece",
    "map_rows",
    "scratch_buffer",
]

CHUNK_ELEMS = 24576  # 96 KiB of float32, a multiple of 128 and 1024, below 32768
_MIN_PIECES_PER_THREAD = 8

Piece = tuple[slice, slice]

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """One pool for the process, created on first use; idle threads cost nothing."""
    global _pool
    with _pool_lock:
        if _pool is None:
            workers = max(1, (os.cpu_count() or 1) - 1)
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="quant_core")
        return _pool


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
    """Call ``work(rows, cols, scratch)`` for every piece, in up to ``get_num_threads()``
    threads; ``scratch`` is a dict each thread keeps to itself (for reusable temporaries).
    ``work`` must write only its own piece of any output."""

    # Inference and grad mode are per thread: the workers take the caller's, so that they
    # may write to tensors the caller created (say, inside a model's inference_mode).
    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    def run(part: Sequence[Piece]) -> None:
        scratch: dict[str, torch.Tensor] = {}
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            for rows, cols in part:
                work(rows, cols, scratch)

    threads = min(torch.get_num_threads(), len(pieces) // _MIN_PIECES_PER_THREAD)
    if threads <= 1:
        run(pieces)
        return
    bounds = [len(pieces) * i // threads for i in range(threads + 1)]
    parts = [pieces[a:b] for a, b in itertools.pairwise(bounds)]
    futures = [_executor().submit(run, part) for part in parts[1:]]
    run(parts[0])  # the calling thread takes a share too
    for future in futures:
        future.result()


def scratch_buffer(
    scratch: dict[str, torch.Tensor], key: str, like: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """A temporary of ``like``'s shape from ``scratch``, reused across pieces."""
    buf = scratch.get(key)
    if buf is None or buf.dtype != dtype:
        buf = scratch[key] = torch.empty(CHUNK_ELEMS, dtype=dtype, device=like.device)
    return buf[: like.numel()].view(like.shape)


def block_extremes(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of the 2-D ``blocks``, ``(min, max)``, each ``[n_rows, 1]``; NaN propagates."""
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
    along dim 0: for the many small ops on per-block columns ``[n_blocks, 1]``. ``fn``
    must work row by row and return a tuple of tensors with one row per input row."""
    n = tensors[0].shape[0]
    if tensors[0].device.type != "cpu" or n <= CHUNK_ELEMS:
        return fn(*tensors)
    parts = [fn(*(t[i : i + CHUNK_ELEMS] for t in tensors)) for i in range(0, n, CHUNK_ELEMS)]
    return tuple(torch.cat(column) for column in zip(*parts, strict=True))
