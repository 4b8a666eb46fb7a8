"""Full-size float32 buffers reused from one rerun to the next, once nothing else holds them.

Why: every bit-width change makes a new dequantized matrix (67 MB at 4096x4096), and fresh
memory is faulted in page by page. On the machine this project is measured on (a
Firecracker VM whose kernel reports free 8 MB blocks back to the host, so memory freed by
one rerun is gone from the VM by the next), the first touch of that buffer took 173-230 ms
of a 4096x4096 change in the served app, against 8 ms to fill a buffer already mapped.
Elsewhere the page faults still cost 10-20 ms a change.

    pool = BufferPool()
    out = pool.take((4096, 4096), torch.device("cpu"))   # a free buffer, or a fresh one
    qt.dequantize(out=out)

A buffer is handed out again only when nothing but the pool refers to it: no Python
reference (the exploration that held it was dropped from its cache and no run holds it)
and no view, numpy array or other tensor sharing its memory (torch's storage use count).
Where torch does not expose that count, the pool only allocates.
"""

from __future__ import annotations

import sys
import threading

import torch

__all__ = ["BufferPool"]


def _storage_users(t: torch.Tensor) -> int | None:
    """How many holders share ``t``'s memory, ``t`` and the storage object asked included
    (2 when ``t`` is alone); ``None`` where torch does not say."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    if count is None:
        return None
    return int(count(t.untyped_storage()._cdata))


_ALONE = _storage_users(torch.empty(1))
"""What ``_storage_users`` says of a tensor nothing else shares (2 on the pinned torch)."""


class BufferPool:
    """Float32 buffers by shape and device, each handed out for one result at a time and
    taken again once free (see the module docstring). ``limit``: how many buffers it keeps
    track of; beyond it, the oldest free ones are let go (a buffer still in use is only
    forgotten, its holder keeps it). Thread-safe: sessions run in threads of their own."""

    def __init__(self, limit: int = 6) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        self._limit = limit
        self._held: list[torch.Tensor] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many buffers the pool keeps track of (free or in use)."""
        return len(self._held)

    def _free(self, i: int) -> bool:
        # Two Python references when the pool is the only holder: its list's and the
        # argument getrefcount is called with.
        return sys.getrefcount(self._held[i]) == 2 and _storage_users(self._held[i]) == _ALONE

    def take(self, shape: tuple[int, ...], device: torch.device | str = "cpu") -> torch.Tensor:
        """A contiguous float32 tensor of ``shape`` on ``device`` (uninitialised values): a
        free one of the pool's, else a new one. Free buffers of other shapes or devices are
        let go here (a user who moved to another tensor does not keep the old size)."""
        shape = tuple(int(d) for d in shape)
        device = torch.device(device)
        if _ALONE is None:
            return torch.empty(shape, dtype=torch.float32, device=device)
        with self._lock:
            chosen: torch.Tensor | None = None
            kept: list[torch.Tensor] = []
            for i in range(len(self._held)):
                if not self._free(i):
                    kept.append(self._held[i])
                    continue
                fits = tuple(self._held[i].shape) == shape and self._held[i].device == device
                if fits and chosen is None:
                    chosen = self._held[i]
                    kept.append(chosen)
            self._held = kept
            if chosen is None:
                chosen = torch.empty(shape, dtype=torch.float32, device=device)
                self._held.append(chosen)
                if len(self._held) > self._limit:
                    del self._held[0]  # the oldest: forgotten, and freed if nobody holds it
            return chosen
