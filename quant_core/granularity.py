"""One internal representation for every granularity: a 2-D ``[n_blocks, block_len]`` view.

Every primitive works on blocks: row ``i`` of the block view holds the elements that share
scale ``i``. ``layout_for`` is the one normaliser from a granularity to that view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .config import Granularity, PerBlock, PerChannel, PerGroup, PerTensor

__all__ = ["BlockLayout", "layout_for"]


@dataclass(frozen=True)
class BlockLayout:
    """How a tensor of ``shape`` splits into ``n_blocks`` blocks of ``block_len`` elements.

    ``scale_shape``: the shape of the per-block scale (``[]``, ``[C]``,
    ``shape[:-1] + [shape[-1] / g]`` or ``[R / r, C / c]``); ``axis``: the channel axis
    (non-negative) or ``None``; ``tile``: ``(r, c)`` for ``PerBlock`` tiles, else ``None``
    (block ``i`` is then tile ``(i // (C/c), i % (C/c))``, its values row by row).
    """

    shape: tuple[int, ...]
    n_blocks: int
    block_len: int
    scale_shape: tuple[int, ...]
    axis: int | None = None
    tile: tuple[int, int] | None = None

    def to_blocks(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (``shape``) -> ``[n_blocks, block_len]``; a view unless an inner axis moves
        or tiles are gathered (a copy)."""
        if self.tile is not None:
            (rows, cols), (r, c) = self.shape, self.tile
            tiles = x.reshape(rows // r, r, cols // c, c).permute(0, 2, 1, 3)
            return tiles.reshape(self.n_blocks, self.block_len)
        if self.axis is not None and self.axis != 0:
            x = x.movedim(self.axis, 0)
        return x.reshape(self.n_blocks, self.block_len)

    def from_blocks(self, blocks: torch.Tensor) -> torch.Tensor:
        """Inverse of ``to_blocks``: ``[n_blocks, block_len]`` -> ``shape``."""
        if self.tile is not None:
            (rows, cols), (r, c) = self.shape, self.tile
            tiles = blocks.reshape(rows // r, cols // c, r, c).permute(0, 2, 1, 3)
            return tiles.reshape(rows, cols)
        if self.axis is not None and self.axis != 0:
            moved = (self.shape[self.axis], *self.shape[: self.axis], *self.shape[self.axis + 1 :])
            return blocks.reshape(moved).movedim(0, self.axis)
        return blocks.reshape(self.shape)

    def block_ids(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """An int64 tensor of ``shape`` holding each element's block (scale) index."""
        ids = (
            torch.arange(self.n_blocks, device=device)
            .unsqueeze(1)
            .expand(self.n_blocks, self.block_len)
        )
        return self.from_blocks(ids.contiguous())

    def expand(self, per_block: torch.Tensor) -> torch.Tensor:
        """Broadcast one value per block (any shape with ``n_blocks`` elements) to ``shape``."""
        flat = per_block.reshape(self.n_blocks, 1).expand(self.n_blocks, self.block_len)
        return self.from_blocks(flat.contiguous())


def layout_for(shape: tuple[int, ...] | torch.Size, granularity: Granularity) -> BlockLayout:
    """Normalise ``granularity`` for a tensor of ``shape`` into a ``BlockLayout``.

    Raises ``ValueError`` for a 0-d or empty shape, an axis out of range, a group size that
    does not divide the last dimension, tiles that do not tile a 2-D shape, and anything
    that is not a known granularity.
    """
    shape = tuple(int(d) for d in shape)
    if not shape or min(shape) < 1:
        raise ValueError(
            f"shape {shape} has no elements to quantize; expected at least one dimension, "
            "all of size >= 1"
        )
    numel = math.prod(shape)
    if isinstance(granularity, PerTensor):
        return BlockLayout(shape, 1, numel, ())
    if isinstance(granularity, PerChannel):
        ndim = len(shape)
        axis = granularity.axis
        if not -ndim <= axis < ndim:
            raise ValueError(
                f"PerChannel axis {axis} is out of range for a {ndim}-D tensor of shape {shape}"
            )
        axis %= ndim
        channels = shape[axis]
        return BlockLayout(shape, channels, numel // channels, (channels,), axis)
    if isinstance(granularity, PerGroup):
        g = granularity.group_size
        last = shape[-1]
        if last % g != 0:
            raise ValueError(
                f"group size {g} must divide the last dimension {last} (shape {shape})"
            )
        return BlockLayout(shape, numel // g, g, (*shape[:-1], last // g))
    if isinstance(granularity, PerBlock):
        r, c = granularity.rows, granularity.cols
        if len(shape) != 2:
            raise ValueError(
                f"PerBlock({r}, {c}) tiles a 2-D matrix; shape {shape} has {len(shape)} "
                "dimensions"
            )
        rows, cols = shape
        if rows % r or cols % c:
            raise ValueError(
                f"blocks of {r} x {c} must tile the matrix: shape {shape} is not a multiple "
                f"of ({r}, {c})"
            )
        n_tiles = (rows // r) * (cols // c)
        return BlockLayout(shape, n_tiles, r * c, (rows // r, cols // c), tile=(r, c))
    raise ValueError(f"unknown granularity {granularity!r}")
