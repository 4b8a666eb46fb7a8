"""``quantize``: float tensor -> ``QuantizedTensor`` (codes + scales + zero points).

Linear (``Format.INT``), per block ``i`` with range ``[lo_i, hi_i]``:

- symmetric:  ``s = max(|lo|, |hi|) / qmax``, ``z = 0``
- asymmetric: ``s = (hi - lo) / (qmax - qmin)``, ``z = clamp(round(qmin - lo / s), qmin, qmax)``
- codes:      ``q = clamp(round(r / s + z), qmin, qmax)``; dequantized ``r_hat = s * (q - z)``

A zero range (a constant block) is widened to include 0, and an all-zero block gets
``s = 1``, so constant tensors quantize without NaN/Inf and dequantize to themselves.

Codebook formats (NF4, FP4, FP8): ``s = max(|lo|, |hi|) / max|values|``; the code is that of
the value nearest to ``r / s`` (ties to the even code, as IEEE rounding does for FP8).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from .config import Format, Mode, QuantConfig, Rounding, ScaleDtype
from .formats import Codebook, codebook_for
from .granularity import BlockLayout, layout_for
from .ranges import BlockRange, choose_range
from .validation import check_float_tensor

__all__ = ["QuantizedTensor", "quantize"]

_SCALE_TORCH_DTYPE = {
    ScaleDtype.FP32: torch.float32,
    ScaleDtype.FP16: torch.float16,
    ScaleDtype.BF16: torch.bfloat16,
}


@dataclass(frozen=True, eq=False)
class QuantizedTensor:
    """Codes, scales and zero points of one quantized tensor.

    ``codes``: same shape as the input; int8 (bits <= 8) or int16 in ``[qmin, qmax]`` for
    ``Format.INT``; uint8 codebook codes (NF4 index, FP4/FP8 bit pattern) otherwise.
    ``scale`` (float32) and ``zero_point`` (int32, zeros when symmetric) have
    ``layout.scale_shape``: ``[]`` per tensor, ``[C]`` per channel, ``shape[:-1] + [C/g]``
    per group; ``.flatten()`` lists them block by block.
    """

    codes: torch.Tensor
    scale: torch.Tensor
    zero_point: torch.Tensor
    config: QuantConfig
    layout: BlockLayout
    input_dtype: torch.dtype

    @property
    def shape(self) -> torch.Size:
        return self.codes.shape

    @property
    def n_blocks(self) -> int:
        return self.layout.n_blocks

    def _scale_col(self) -> torch.Tensor:
        return self.scale.reshape(-1, 1)

    def _zp_col(self) -> torch.Tensor:
        return self.zero_point.reshape(-1, 1).to(torch.float32)

    def dequantize(self) -> torch.Tensor:
        """``r_hat = s * (q - z)`` (linear) or ``s * value[q]`` (codebook): float32, input shape."""
        codes = self.layout.to_blocks(self.codes)
        if self.config.format is Format.INT:
            out = codes.to(torch.float32)
            if self.config.has_zero_point:
                out.sub_(self._zp_col())
            out.mul_(self._scale_col())
        else:
            table = codebook_for(self.config.format, codes.device).decode_table
            out = table[codes.long()].mul_(self._scale_col())
        return self.layout.from_blocks(out)

    def levels(self, block: int = 0) -> torch.Tensor:
        """Every value block ``block`` can dequantize to, ascending (float32, <= ``2^bits``)."""
        if not 0 <= block < self.n_blocks:
            raise ValueError(f"block {block} out of range: this tensor has {self.n_blocks} blocks")
        s = self.scale.reshape(-1)[block]
        if self.config.format is Format.INT:
            q = torch.arange(self.config.qmin, self.config.qmax + 1, device=s.device)
            z = self.zero_point.reshape(-1)[block]
            return (q - z).to(torch.float32) * s
        return codebook_for(self.config.format, s.device).values * s

    def representable_range(self) -> BlockRange:
        """Per block, the lowest and highest dequantized value, ``[n_blocks, 1]`` each."""
        s = self._scale_col()
        if self.config.format is Format.INT:
            z = self._zp_col()
            return BlockRange(s * (self.config.qmin - z), s * (self.config.qmax - z))
        values = codebook_for(self.config.format, s.device).values
        return BlockRange(s * values[0], s * values[-1])


def _round_scale(s: torch.Tensor, scale_dtype: ScaleDtype) -> torch.Tensor:
    """Round scales to their storage dtype, keeping them finite and positive."""
    if scale_dtype is ScaleDtype.FP32:
        return s
    dtype = _SCALE_TORCH_DTYPE[scale_dtype]
    info = torch.finfo(dtype)
    return s.clamp(min=info.tiny, max=info.max).to(dtype).to(torch.float32)


def _int_qparams(rng: BlockRange, cfg: QuantConfig) -> tuple[torch.Tensor, torch.Tensor]:
    qmin, qmax = cfg.qmin, cfg.qmax
    if cfg.mode is Mode.SYMMETRIC:
        a = torch.maximum(rng.lo.abs(), rng.hi.abs())
        s = a / qmax
        s = torch.where(s > 0, s, torch.ones_like(s))
        s = _round_scale(s, cfg.scale_dtype)
        return s, torch.zeros_like(s)
    lo, hi = rng.lo, rng.hi
    degenerate = hi <= lo
    lo = torch.where(degenerate, lo.clamp(max=0), lo)
    hi = torch.where(degenerate, hi.clamp(min=0), hi)
    s = (hi - lo) / (qmax - qmin)
    s = torch.where(s > 0, s, torch.ones_like(s))
    s = _round_scale(s, cfg.scale_dtype)
    z = torch.round(qmin - lo / s).clamp_(qmin, qmax)
    return s, z


def _codebook_scale(rng: BlockRange, cb: Codebook, cfg: QuantConfig) -> torch.Tensor:
    a = torch.maximum(rng.lo.abs(), rng.hi.abs())
    s = a / cb.max_abs
    s = torch.where(s > 0, s, torch.ones_like(s))
    return _round_scale(s, cfg.scale_dtype)


def _int_codes(
    blocks: torch.Tensor,
    s: torch.Tensor,
    z: torch.Tensor,
    cfg: QuantConfig,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Float tensor of codes ``clamp(round(r/s + z))``, computed in place on one temporary."""
    v = torch.div(blocks, s)
    if cfg.mode is Mode.ASYMMETRIC:
        v.add_(z)
    if cfg.rounding is Rounding.STOCHASTIC:
        noise = torch.rand(v.shape, generator=generator, device=v.device, dtype=v.dtype)
        v.add_(noise).floor_()
    else:
        v.round_()
    return v.clamp_(cfg.qmin, cfg.qmax)


def _codebook_index(
    v: torch.Tensor, cb: Codebook, rounding: Rounding, generator: torch.Generator | None
) -> torch.Tensor:
    """Index into ``cb.values`` of the entry ``v`` rounds to (``v`` already scaled)."""
    values = cb.values
    v = v.clamp(values[0], values[-1])
    if rounding is Rounding.STOCHASTIC:
        lower = (torch.bucketize(v, values, right=True) - 1).clamp_(0, len(values) - 2)
        lo_v, hi_v = values[lower], values[lower + 1]
        p_up = (v - lo_v) / (hi_v - lo_v)
        u = torch.rand(v.shape, generator=generator, device=v.device, dtype=v.dtype)
        return lower + (u < p_up).long()
    mids = (values[1:] + values[:-1]) / 2
    idx = torch.bucketize(v, mids)
    # bucketize sends an exact tie to the lower entry; IEEE sends it to the even code.
    tie = v == mids[idx.clamp(max=len(mids) - 1)]
    if bool(tie.any()):
        odd = (cb.codes[idx] % 2 == 1) & tie
        idx = idx + odd.long()
    return idx


def _fake_quant_fn(
    cfg: QuantConfig, cb: Codebook | None
) -> Callable[[torch.Tensor, BlockRange], torch.Tensor]:
    """``(blocks, range) -> x_hat`` with nearest rounding, for the MSE range search."""
    nearest = replace(cfg, rounding=Rounding.NEAREST)

    def fq(blocks: torch.Tensor, rng: BlockRange) -> torch.Tensor:
        if cb is None:
            s, z = _int_qparams(rng, nearest)
            return _int_codes(blocks, s, z, nearest, None).sub_(z).mul_(s)
        s = _codebook_scale(rng, cb, nearest)
        return cb.values[_codebook_index(blocks / s, cb, Rounding.NEAREST, None)] * s

    return fq


def quantize(
    x: torch.Tensor, cfg: QuantConfig, generator: torch.Generator | None = None
) -> QuantizedTensor:
    """Quantize ``x`` (float16/bfloat16/float32/float64, 1-D or more, finite) under ``cfg``.

    Computation runs in float32 on ``x``'s device. ``generator`` drives stochastic rounding;
    without one, a generator seeded with ``cfg.seed`` is used, so results are reproducible.
    Raises ``TypeError``/``ValueError`` for bad input (see ``check_float_tensor``,
    ``layout_for``).
    """
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    check_float_tensor(x)
    layout = layout_for(x.shape, cfg.granularity)
    blocks = layout.to_blocks(x.to(torch.float32))
    if cfg.rounding is Rounding.STOCHASTIC and generator is None:
        generator = torch.Generator(device=x.device).manual_seed(cfg.seed)

    cb = None if cfg.format is Format.INT else codebook_for(cfg.format, x.device)
    rng = choose_range(blocks, cfg, _fake_quant_fn(cfg, cb))
    if cb is None:
        s, z = _int_qparams(rng, cfg)
        code_dtype = torch.int8 if cfg.bits <= 8 else torch.int16
        codes = _int_codes(blocks, s, z, cfg, generator).to(code_dtype)
    else:
        s = _codebook_scale(rng, cb, cfg)
        z = torch.zeros_like(s)
        codes = cb.codes[_codebook_index(blocks / s, cb, cfg.rounding, generator)]
    return QuantizedTensor(
        codes=layout.from_blocks(codes),
        scale=s.reshape(layout.scale_shape),
        zero_point=z.to(torch.int32).reshape(layout.scale_shape),
        config=cfg,
        layout=layout,
        input_dtype=x.dtype,
    )
