"""Codes from values and block parameters: integer (nearest or stochastic rounding) and
codebook (NF4, FP4, FP8) encoders, compiled where ``kernels`` allows, else in pieces."""

from __future__ import annotations

import torch

from . import kernels
from .chunks import chunk_slices, for_each_piece, scratch_buffer
from .config import Mode, QuantConfig, Rounding
from .formats import NF4_MIN_SCALE, Codebook
from .formats.codebooks import RECIPROCAL_FORMATS
from .formats.integer import round_half_even_

__all__ = [
    "codebook_index",
    "codebook_scaled",
    "encode_codebook",
    "encode_int",
    "int_codes",
]


def _scaled_codes(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    cfg: QuantConfig,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``r / s + z``, or ``(r - m) / s + z`` under ``ZeroPoint.FLOAT_MIN`` (``z`` is 0 there,
    or ``qmin`` in GGUF's convention): codes before rounding."""
    if cfg.float_offset:
        v = torch.sub(blocks, m, out=out)
        return v.div_(s).add_(z)
    v = torch.div(blocks, s, out=out)
    return v.add_(z) if cfg.mode is Mode.ASYMMETRIC else v


def int_codes(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    cfg: QuantConfig,
    noise: torch.Tensor | None,
) -> torch.Tensor:
    """Float tensor of codes ``clamp(round(v))`` (``v`` of ``_scaled_codes``), or
    ``clamp(floor(v + u))`` with ``noise`` ``u`` (stochastic rounding), computed in place on
    one temporary."""
    v = _scaled_codes(blocks, s, z, m, cfg)
    if noise is not None:
        v.add_(noise).floor_()
    else:
        v.round_()
    return v.clamp_(cfg.qmin, cfg.qmax)


def encode_int(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    m: torch.Tensor,
    cfg: QuantConfig,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Integer codes of ``blocks``: int8 for bits <= 8, else int16."""
    code_dtype = torch.int8 if cfg.bits <= 8 else torch.int16
    noise = None
    if cfg.rounding is Rounding.STOCHASTIC:
        # One draw over the whole tensor, so a seed gives the same codes at any size, and
        # the same on both paths (drawn once, before either runs).
        noise = torch.rand(
            blocks.shape, generator=generator, device=blocks.device, dtype=torch.float32
        )
    fast = kernels.encode_int(blocks, s, z, m, cfg.qmin, cfg.qmax, code_dtype, noise)
    if fast is not None:
        return fast
    if noise is not None:
        return int_codes(blocks, s, z, m, cfg, noise).to(code_dtype)
    codes = torch.empty(blocks.shape, dtype=code_dtype, device=blocks.device)
    pieces = chunk_slices(blocks)
    if len(pieces) == 1:
        return codes.copy_(int_codes(blocks, s, z, m, cfg, None))

    def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
        part = blocks[rows, cols]
        buf = scratch_buffer(scratch, "v", part, torch.float32)
        v = _scaled_codes(part, s[rows], z[rows], m[rows], cfg, out=buf)
        # clamp then round equals round then clamp: the bounds are integers.
        codes[rows, cols].copy_(round_half_even_(v.clamp_(cfg.qmin, cfg.qmax)))

    for_each_piece(pieces, work)
    return codes


def codebook_index(
    v: torch.Tensor, cb: Codebook, rounding: Rounding, generator: torch.Generator | None
) -> torch.Tensor:
    """Index into ``cb.values`` of the entry ``v`` rounds to (``v`` already scaled)."""
    values = cb.values
    v = v.clamp(values[0], values[-1]).contiguous()  # bucketize wants contiguous input
    if rounding is Rounding.STOCHASTIC:
        lower = (torch.bucketize(v, values, right=True) - 1).clamp_(0, len(values) - 2)
        lo_v, hi_v = values[lower], values[lower + 1]
        p_up = (v - lo_v) / (hi_v - lo_v)
        u = torch.rand(v.shape, generator=generator, device=v.device, dtype=v.dtype)
        return lower + (u < p_up).long()
    mids = (values[1:] + values[:-1]) / 2
    idx = torch.bucketize(v, mids)
    if not any(cb.tie_up):
        return idx  # an exact tie goes to the lower entry (NF4, as in bitsandbytes)
    # bucketize sends an exact tie to the lower entry; the format's rule may send it up
    # (IEEE: to the even code).
    at = idx.clamp(max=len(mids) - 1)
    tie = v == mids[at]
    if bool(tie.any()):
        up = torch.tensor(cb.tie_up, device=v.device)[at] & tie
        idx = idx + up.long()
    return idx


def _codebook_codes(
    v: torch.Tensor, cb: Codebook, rounding: Rounding, generator: torch.Generator | None
) -> torch.Tensor:
    """Codes (uint8) of scaled values ``v``; a negative ``v`` rounding to zero gets ``-0``
    (bitsandbytes' FP4: a positive ``v`` rounding to zero gets its code 8)."""
    idx = codebook_index(v, cb, rounding, generator)
    codes = cb.codes[idx]
    if cb.neg_zero_code is not None:  # a format with -0 has a zero
        neg_zero = (idx == cb.zero_index) & torch.signbit(v)
        codes = torch.where(neg_zero, cb.neg_zero_code, codes).to(torch.uint8)
    if cb.pos_zero_code is not None:
        pos_zero = (idx == cb.zero_index) & (v > 0)
        codes = torch.where(pos_zero, cb.pos_zero_code, codes).to(torch.uint8)
    return codes


def codebook_scaled(
    blocks: torch.Tensor, s: torch.Tensor, cb: Codebook, inverse: torch.Tensor | None = None
) -> torch.Tensor:
    """``r / s``, the value looked up in the codebook; ``r * inverse`` when a format's owner
    multiplies by a reciprocal it computed (NVFP4: ``(1 / t) / sc``); NF4 multiplies by
    ``1/s``, as bitsandbytes does (the two can differ by an ulp, which moves a value across a
    midpoint); so does bitsandbytes' FP4."""
    if inverse is not None:
        return blocks * inverse
    if cb.format in RECIPROCAL_FORMATS:
        # bitsandbytes' 1 / max(s, 1e-38): finite, so a block of float32 subnormals codes
        # (mostly) to 0 as in bitsandbytes, instead of 0 * inf = NaN
        return blocks * s.clamp(min=NF4_MIN_SCALE).reciprocal()
    return blocks / s


def encode_codebook(
    blocks: torch.Tensor,
    s: torch.Tensor,
    cb: Codebook,
    cfg: QuantConfig,
    generator: torch.Generator | None,
    inverse: torch.Tensor | None = None,
) -> torch.Tensor:
    """uint8 codes of ``blocks`` (``[n, L]``) on scales ``s`` (``[n, 1]``), or on the
    reciprocals ``inverse`` (``r * inverse``) where given."""
    if cfg.rounding is Rounding.STOCHASTIC:
        # One draw over the whole tensor, so a seed gives the same codes at any size.
        v = codebook_scaled(blocks, s, cb, inverse)
        return _codebook_codes(v, cb, cfg.rounding, generator)
    fast = kernels.encode_codebook(blocks, s, cb, inverse)
    if fast is not None:
        return fast
    codes = torch.empty(blocks.shape, dtype=torch.uint8, device=blocks.device)

    def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
        inv = None if inverse is None else inverse[rows]
        v = codebook_scaled(blocks[rows, cols], s[rows], cb, inv)
        codes[rows, cols] = _codebook_codes(v, cb, cfg.rounding, None)

    for_each_piece(chunk_slices(blocks), work)
    return codes
