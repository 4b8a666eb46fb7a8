"""What quantization did to a tensor beyond the error: clipping, saturation, levels used."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import kernels
from .config import Format, QuantConfig
from .formats import codebook_for
from .quantize import QuantizedTensor
from .ranges import BlockRange

__all__ = [
    "MAX_BINS",
    "ClipStats",
    "clip_bounds",
    "clip_stats",
    "code_counts",
    "code_total",
    "histogram",
    "levels_used",
]

MAX_BINS = 256


@dataclass(frozen=True)
class ClipStats:
    """``n_clipped_low/high``: inputs below/above their block's representable range
    ``[s (qmin - z) + m, s (qmax - z) + m]`` (``m`` only under ``ZeroPoint.FLOAT_MIN``) by
    more than half a step, so clamping made their error exceed the rounding bound (see
    ``clip_bounds``); ``n_saturated``: codes at either end of the code range
    (``qmin``/``qmax``, or the codebook's extremes)."""

    n_elements: int
    n_clipped_low: int
    n_clipped_high: int
    n_saturated: int

    @property
    def n_clipped(self) -> int:
        return self.n_clipped_low + self.n_clipped_high


def code_total(cfg: QuantConfig) -> int:
    """How many codes ``cfg``'s elements have: ``2^bits``, but ``qmax - qmin + 1`` for an
    integer grid (MXINT8's symmetric -127..127 has 255 of its 8 bits' 256)."""
    return cfg.qmax - cfg.qmin + 1 if cfg.format is Format.INT else 1 << cfg.bits


def code_counts(
    qt: QuantizedTensor, block: int | None = None, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """How often each code occurs (int64): index ``c - qmin`` for linear codes, the raw code
    (``0 .. 2^bits - 1``) for codebook formats; in one block or the whole tensor.
    ``mask`` (bool, the tensor's shape; not with ``block``) counts only the cells it marks."""
    codes = qt.codes
    if mask is not None:
        if block is not None:
            raise ValueError("code_counts takes a block or a mask, not both")
        if tuple(mask.shape) != tuple(codes.shape):
            raise ValueError(f"mask shape {tuple(mask.shape)} differs from {tuple(codes.shape)}")
        codes = codes[mask]
    if block is not None:
        if not 0 <= block < qt.n_blocks:
            raise ValueError(f"block {block} out of range: this tensor has {qt.n_blocks} blocks")
        codes = qt.layout.to_blocks(codes)[block]
    cfg = qt.config
    n_codes = code_total(cfg)
    flat = codes.reshape(-1)
    if flat.dtype == torch.uint8:
        return torch.bincount(flat, minlength=n_codes)
    if flat.dtype == torch.int8:
        # The codes' bytes counted as uint8 (int8 v is byte v mod 256; no widening to
        # int32, 6x slower on 16M codes), then the negative half moved in front, so index
        # i counts the code i - 128: no pass over the codes to flip their sign bit (17.1 ->
        # 13.5 ms on 16M codes, one thread).
        by_byte = torch.bincount(flat.view(torch.uint8), minlength=256)
        counts = torch.cat((by_byte[128:], by_byte[:128]))
        start = 128 + qt.config.qmin
        return counts[start : start + n_codes]
    return torch.bincount(flat.to(torch.int32) - qt.config.qmin, minlength=n_codes)


def _end_codes(qt: QuantizedTensor) -> tuple[int, int]:
    """Indices into ``code_counts`` of the lowest and highest representable value."""
    if qt.config.format is Format.INT:
        return 0, qt.config.qmax - qt.config.qmin
    cb = codebook_for(qt.config.format)
    return int(cb.codes[0]), int(cb.codes[-1])


def clip_bounds(qt: QuantizedTensor) -> BlockRange:
    """Per block, the inputs beyond which clamping adds error: the representable range
    widened by half a step at each end (``|s|/2`` for linear codes), ``[n_blocks, 1]``
    each. An input inside these bounds is off by at most half a step.

    A scale may be negative (GGUF Q4_0's ``d = max / -8``, IQ4_NL's, Q3_K's and Q6_K's
    signed block scales): its levels then descend with the code, so the range's low end is
    the top code's level and a codebook's half gap there is that of its top two values."""
    rng = qt.representable_range()
    s = qt.scale.reshape(-1, 1)
    step = s.abs()
    if qt.config.format is Format.INT:
        return BlockRange(rng.lo - step / 2, rng.hi + step / 2)
    values = codebook_for(qt.config.format, s.device).values
    bottom_gap, top_gap = (values[1] - values[0]) / 2, (values[-1] - values[-2]) / 2
    negative = s < 0
    lo_gap = torch.where(negative, top_gap, bottom_gap)
    hi_gap = torch.where(negative, bottom_gap, top_gap)
    return BlockRange(rng.lo - step * lo_gap, rng.hi + step * hi_gap)


def clip_stats(
    x: torch.Tensor, qt: QuantizedTensor, counts: torch.Tensor | None = None
) -> ClipStats:
    """Clipping and saturation counts of ``x`` quantized as ``qt`` (same shape).

    ``counts``: ``code_counts(qt)`` when the caller already has it (saves a pass)."""
    if tuple(x.shape) != tuple(qt.shape):
        raise ValueError(f"shapes differ: x {tuple(x.shape)} vs codes {tuple(qt.shape)}")
    if counts is None:
        counts = code_counts(qt)
    lo_index, hi_index = _end_codes(qt)
    n_low, n_high = int(counts[lo_index]), int(counts[hi_index])
    bounds = clip_bounds(qt)
    beyond = None
    if n_low or n_high:
        # An input beyond a bound rounds past the end code and is clamped onto it, so
        # counting over every cell gives the same numbers as over the end-code cells.
        beyond = kernels.count_beyond(qt.layout.to_blocks(x), bounds.lo, bounds.hi)
    if beyond is not None:
        n_clipped_low, n_clipped_high = beyond
    else:
        n_clipped_low, n_clipped_high = _clipped(
            x, qt, (lo_index, hi_index), n_low + n_high, bounds
        )
    return ClipStats(
        n_elements=x.numel(),
        n_clipped_low=n_clipped_low,
        n_clipped_high=n_clipped_high,
        n_saturated=n_low + n_high,
    )


def _clipped(
    x: torch.Tensor,
    qt: QuantizedTensor,
    end_indices: tuple[int, int],
    n_at_ends: int,
    bounds: BlockRange,
) -> tuple[int, int]:
    """How many inputs lie below their block's ``bounds.lo`` and above its ``bounds.hi``.

    Such an input rounds past an end of the code range and is clamped onto an end code, so
    only cells holding an end code are compared: none when neither is used (the usual
    min-max case), else a gather of those cells instead of a pass over the whole tensor.
    Which end code holds the low values depends on the block's scale's sign (a negative
    scale's lowest level is its highest code), so both ends' cells are compared to both
    bounds.
    """
    if n_at_ends == 0:
        return 0, 0
    is_int = qt.config.format is Format.INT
    codes = qt.layout.to_blocks(qt.codes).reshape(-1)
    at_end = torch.zeros(codes.shape, dtype=torch.bool, device=codes.device)
    for index in end_indices:
        at_end |= codes == (index + qt.config.qmin if is_int else index)
    cells = at_end.nonzero().reshape(-1)
    values = qt.layout.to_blocks(x).reshape(-1)[cells].to(torch.float32)
    rows = cells // qt.layout.block_len
    low = int((values < bounds.lo.reshape(-1)[rows]).sum())
    high = int((values > bounds.hi.reshape(-1)[rows]).sum())
    return low, high


def levels_used(qt: QuantizedTensor, block: int | None = None) -> int:
    """How many distinct codes occur, in one block or (``None``) in the whole tensor."""
    return int(torch.count_nonzero(code_counts(qt, block)))


def histogram(values: torch.Tensor, bins: int, lo: float, hi: float) -> torch.Tensor:
    """Counts (int64, ``[bins]``) of ``values`` (any shape, float) in ``bins`` equal bins
    over ``[lo, hi]``: bin ``k = clamp(floor((v - lo) * bins / (hi - lo)), 0, bins - 1)``
    in float32, so ``v = hi`` falls in the last bin as in ``torch.histc``; values outside
    ``[lo, hi]`` are not counted. One compiled pass for the bin of every value, then
    ``bincount`` (``torch.histc`` takes about 8x as long on 16M values here). A value within
    a float32 rounding of a bin edge may land in the neighbouring bin.

    Raises ``ValueError`` unless ``1 <= bins <= MAX_BINS`` and ``lo < hi`` (both finite)."""
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_BINS:
        raise ValueError(f"bins must be an int in [1, {MAX_BINS}], got {bins!r}")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"histogram range must be finite with lo < hi, got [{lo}, {hi}]")
    v = values.detach().reshape(-1).to(torch.float32)
    v_lo, v_hi = torch.aminmax(v) if v.numel() else (lo, hi)
    if float(v_lo) < lo or float(v_hi) > hi:
        v = v[(v >= lo) & (v <= hi)]
    f32_max = torch.finfo(torch.float32).max
    if not (hi - lo <= f32_max and bins / (hi - lo) <= f32_max):
        # A range wider than float32 can hold (or so narrow its bins overflow): float64.
        pos = (v.double() - lo) * (bins / (hi - lo))
        return torch.bincount(pos.floor_().clamp_(0, bins - 1).to(torch.uint8), minlength=bins)
    lo_t = torch.tensor(lo, dtype=torch.float32)
    per_unit = torch.tensor(bins / (hi - lo), dtype=torch.float32)
    top = torch.tensor(bins - 1, dtype=torch.float32)
    idx = kernels.bin_indices(v, lo_t, per_unit, top)
    if idx is None:
        idx = torch.sub(v, lo_t).mul_(per_unit).floor_().clamp_(0, top).to(torch.uint8)
    return torch.bincount(idx, minlength=bins)
