"""``quantize``: float tensor -> ``QuantizedTensor`` (codes + scales + zero points).

Linear (``Format.INT``), per block ``i`` with range ``[lo_i, hi_i]``, ``n = qmax - qmin``:

- symmetric: ``s = max(|lo|, |hi|) / qmax``, ``z = 0``;
  codes ``q = clamp(round(r / s), qmin, qmax)``, dequantized ``r_hat = s q``.
- asymmetric, by ``cfg.zero_point`` (see ``ZeroPoint``):

  - ``INCLUDE_ZERO`` (default): ``lo' = min(lo, 0)``, ``hi' = max(hi, 0)``,
    ``s = (hi' - lo') / n``, ``z = clamp(qmin - round(lo' / s), qmin, qmax)`` (the clamp
    never acts but for float slack), as torchao's ``choose_qparams_affine``;
    ``q = clamp(round(r / s + z), qmin, qmax)``, ``r_hat = s (q - z)``.
  - ``FLOAT_MIN``: ``s = (hi - lo) / n``, ``m = lo - s qmin`` (the value of code 0, in the
    scale dtype), ``z = 0``; ``q = clamp(round((r - m) / s), qmin, qmax)``,
    ``r_hat = s q + m``: levels ``m + s qmin = lo`` to ``m + s qmax = hi``.
  - ``COURSE_CLAMP``: ``s = (hi - lo) / n``, ``z = clamp(round(qmin - lo / s), qmin, qmax)``,
    and codes as under ``INCLUDE_ZERO``; a range without 0 pins ``z`` at an end.

A zero range (a constant block) is widened to include 0 (under ``FLOAT_MIN`` it gets
``s = 1`` and ``m = lo`` instead, so code 0 is the constant), and an all-zero block gets
``s = 1``, so constant tensors quantize without NaN/Inf and dequantize to themselves. A
nonzero range whose scale underflows float32 gets the smallest subnormal, ``2^-149``; a
range wider than float32's max gets ``s = hi/n - lo/n``, and a level beyond float32's range
saturates to ``+-max``, so every scale, level and dequantized value is finite. Scales, and
``m``, are rounded to ``cfg.scale_dtype`` (saturating at its largest finite value) before
the codes are computed from them, and ``z`` and ``m`` follow the rounded scale.

Codebook formats (NF4, FP4, FP8): ``s = max(|lo|, |hi|) / max|values|``; the code is that of
the value nearest to ``r / s``. FP4/FP8 send an exact midpoint to the even code, as IEEE
rounding (a native float8 cast) does. NF4 computes ``r * (1 / max(s, 1e-38))`` and sends
an exact midpoint to the lower code, as bitsandbytes' ``quantize_4bit(...,
quant_type="nf4")`` does, so its codes equal bitsandbytes'.

Two-level formats (``cfg.two_level``: E8M0, FP8-scaled, super-block and double-quantized
scales) fit each block's scale from its range the same way, then store it in the scale
format (``formats.scales``); the codes round on the stored scale. ``Recipe.LLAMA_CPP``
configs run llama.cpp's reference quantizer of their GGUF type instead
(``formats.llama_cpp``).

The passes over the data (each block's extremes, the integer codes, dequantization) run as
compiled kernels on CPU where ``quant_core.kernels`` allows, and as torch operators over
cache-sized pieces otherwise; both give the same bits (see ``kernels``). The per-block
arithmetic (scales, zero points, offsets) is the same eager code on both paths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from . import kernels
from .chunks import block_extremes, map_rows
from .config import Format, Mode, QuantConfig, RangeMethod, Recipe, Rounding
from .encode import codebook_index, codebook_scaled, encode_codebook, encode_int, int_codes
from .formats import Codebook, codebook_for, llama_cpp
from .formats.integer import codebook_scale, int_qparams
from .formats.scales import (
    BlockFit,
    BlockParams,
    StoredScales,
    check_super_blocks,
    fit_from_blocks,
    fit_scales,
)
from .granularity import BlockLayout, layout_for
from .quantized_tensor import QuantizedTensor
from .ranges import BlockRange, choose_range, symmetric_ends
from .validation import check_float_tensor, raise_nonfinite

__all__ = ["QuantizedTensor", "RoundTrip", "quantize", "quantize_dequantize"]

_F32_MAX = torch.finfo(torch.float32).max


def _all_finite_rows(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor]:
    """Whether every block's extremes are finite, from two reductions: ``lo <= hi`` in each
    block, so an infinite extreme makes ``min lo`` or ``max hi`` infinite, and a NaN
    propagates through both (3x faster than ``isfinite`` of every row)."""
    return (torch.stack([lo.amin(), hi.amax()]).isfinite().all().reshape(1),)


def _block_qparams(
    rng: BlockRange, cfg: QuantConfig, cb: Codebook | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scales (float32), zero points (int32) and offsets (float32, zeros unless
    ``ZeroPoint.FLOAT_MIN``) of blocks with ranges ``rng``."""
    if cb is None:
        s, z, m = int_qparams(rng, cfg)
        return s, z.to(torch.int32), m
    s = codebook_scale(rng, cb, cfg)
    return s, torch.zeros(s.shape, dtype=torch.int32, device=s.device), torch.zeros_like(s)


def _squared_error_fn(
    cfg: QuantConfig, cb: Codebook | None
) -> Callable[[torch.Tensor, BlockRange], torch.Tensor]:
    """``(blocks, range) -> (x - x_hat)^2``, ``x_hat`` quantized and dequantized with nearest
    rounding under ``range`` (saturated as ``dequantize`` does): the MSE range search's
    measure, one compiled pass where ``kernels`` allows."""
    nearest = replace(cfg, rounding=Rounding.NEAREST)

    def squared_error(blocks: torch.Tensor, rng: BlockRange) -> torch.Tensor:
        if cb is None:
            s, z, m = int_qparams(rng, nearest)
            fast = kernels.int_squared_error(blocks, s, z, m, cfg.qmin, cfg.qmax)
            if fast is not None:
                return fast
            # m is 0 and z as stored under every convention but FLOAT_MIN, whose z is 0
            x_hat = int_codes(blocks, s, z, m, nearest, None).sub_(z).mul_(s).add_(m)
        else:
            s = codebook_scale(rng, cb, nearest)
            v = codebook_scaled(blocks, s, cb)
            x_hat = cb.values[codebook_index(v, cb, Rounding.NEAREST, None)] * s
        return (blocks - x_hat.clamp_(-_F32_MAX, _F32_MAX)).square_()

    return squared_error


def _given_ranges(ranges: object, n_blocks: int, mode: Mode, device: torch.device) -> BlockRange:
    """Check a caller's ``ranges`` and return them as float32 ``[n_blocks, 1]`` on ``device``
    (``[-a, a]`` with ``a = max(|lo|, |hi|)`` in symmetric mode, as ``choose_range`` gives)."""
    if not isinstance(ranges, BlockRange):
        raise TypeError(f"ranges must be a BlockRange, got {type(ranges).__name__}")
    ends = []
    for name, t in (("lo", ranges.lo), ("hi", ranges.hi)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"ranges.{name} must be a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"ranges.{name} has dtype {t.dtype}; expected a float tensor")
        if tuple(t.shape) not in ((n_blocks, 1), (1, 1)):
            raise ValueError(
                f"ranges.{name} has shape {tuple(t.shape)}; expected [{n_blocks}, 1] (one "
                "row per block) or [1, 1] (one range for every block)"
            )
        t32 = t.detach().to(device=device, dtype=torch.float32)
        n_bad = int((~torch.isfinite(t32)).sum())
        if n_bad:
            raise ValueError(
                f"ranges.{name} holds {n_bad} value(s) that are not finite in float32 "
                f"(out of {t32.numel()})"
            )
        ends.append(t32.expand(n_blocks, 1))
    lo, hi = ends
    inverted = lo > hi
    if bool(inverted.any()):
        block = int(inverted.reshape(-1).nonzero()[0])
        raise ValueError(
            f"ranges has lo > hi in {int(inverted.sum())} block(s), first block {block}: "
            f"lo={float(lo[block]):.6g} > hi={float(hi[block]):.6g}"
        )
    if mode is Mode.SYMMETRIC:
        return BlockRange(*symmetric_ends(lo, hi))
    return BlockRange(lo.contiguous(), hi.contiguous())


def quantize(
    x: torch.Tensor,
    cfg: QuantConfig,
    generator: torch.Generator | None = None,
    *,
    range_mask: torch.Tensor | None = None,
    ranges: BlockRange | None = None,
    importance: torch.Tensor | None = None,
) -> QuantizedTensor:
    """Quantize ``x`` (float16/bfloat16/float32/float64, 1-D or more, finite) under ``cfg``.

    Computation runs in float32 on ``x``'s device, detached from autograd. ``generator``
    drives stochastic rounding; without one, a generator seeded with ``cfg.seed`` is used,
    so results are reproducible. Raises ``TypeError``/``ValueError`` for bad input (see
    ``check_float_tensor``, ``layout_for``; a float64 value beyond float32's range is a
    ``ValueError`` too).

    The formulas are the module's. In asymmetric mode ``cfg.zero_point`` decides where a
    block's grid sits; the default, ``ZeroPoint.INCLUDE_ZERO``, widens each range to
    contain 0 (as torchao and PyTorch's observers do), ``FLOAT_MIN`` stores a float offset
    per block (``QuantizedTensor.offset``) and ``COURSE_CLAMP`` clamps the integer zero
    point as the course does. Example, 4 bits asymmetric, ``x = [0.7, 1.0, 1.3]``:
    include-zero fits ``[0, 1.3]`` (``s = 1.3/15``, ``z = -8``), float-min fits
    ``[0.7, 1.3]`` (``s = 0.04``, ``m = 1.02``), the course clamp gives ``z = -8`` on
    ``s = 0.04``, a grid ``[0, 0.6]`` on which every value saturates at 0.6.

    ``range_mask`` (bool, ``x``'s shape): only the cells it marks choose each block's range
    (min-max, percentile or MSE); the others are quantized under that range but influence
    no scale (for stand-ins of missing values). A block with no marked cell uses all.

    ``ranges`` (a ``BlockRange``, ``lo``/``hi`` float tensors of shape ``[n_blocks, 1]``, or
    ``[1, 1]`` for one range shared by every block, finite, ``lo <= hi``): every block's
    range is given instead of chosen from ``x`` (``cfg.range_method`` is then unused), and
    scales and zero points follow from it exactly as from a chosen range; symmetric and
    codebook formats use ``max(|lo|, |hi|)``. This applies a static (calibrated) range to
    new data, or one group's grid to one column of it. Values outside the range are clamped
    to its end codes (``clip_stats`` counts them). With ``range_mask`` it is a
    ``ValueError``: a given range leaves nothing for the mask to choose.

    ``importance`` (a float tensor of shape ``[x.shape[-1]]``, finite, ``>= 0``): llama.cpp's
    importance matrix entry of this tensor (``llama-imatrix``: one weight per input column,
    the mean square of the activations it multiplies), for ``Recipe.LLAMA_CPP`` configs of
    the K-quants and IQ4, whose weighted quantizers (``quant_weights`` in ggml-quants.c)
    then choose the scales and codes, as ``llama-quantize --imatrix`` does.
    """
    return _quantize(x, cfg, generator, range_mask, ranges, importance, values=False)[0]


@dataclass(frozen=True, eq=False)
class RoundTrip:
    """``quantize_dequantize``'s result: ``quantized``, the ``QuantizedTensor`` that
    ``quantize`` returns, and ``values``, float32 in ``x``'s shape, bit for bit
    ``quantized.dequantize()``."""

    quantized: QuantizedTensor
    values: torch.Tensor


def quantize_dequantize(
    x: torch.Tensor,
    cfg: QuantConfig,
    generator: torch.Generator | None = None,
    *,
    importance: torch.Tensor | None = None,
) -> RoundTrip:
    """``quantize(x, cfg, generator, importance=importance)`` and its ``dequantize()``, for
    a caller that wants both: the same codes, parameters and values bit for bit, with the
    same errors.

    Where the format has a fused pass, the values are written in the loop that writes the
    codes, from the float code (``round(x / d) d`` on the stored ``d``), instead of by a
    second pass that reads the codes back: llama.cpp's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0,
    TQ2_0 without importance (``formats.llama_cpp.fuses_values``); on the compiled path,
    llama.cpp's MXFP4 and NVFP4 (presets MXFP4_GGUF, NVFP4_GGUF: llama.cpp's own FP4
    search, ties towards zero) and Q1_0 without importance, and IQ4_NL, IQ4_XS (after
    their scale search), their encoder and the table's decode in one loop
    (``llama_cpp.fuses_values_compiled``, ``kernels.encode_values_with``); the lab's
    integer formats of up to 8 bits with nearest rounding on the compiled path
    (``kernels.encode_int_values``: MXINT8, the sidebar's int configs), and the lab's FP4,
    FP6, NF4 and ternary codebook formats with nearest rounding on the compiled path,
    outside ``PerBlock`` tiles
    (``kernels.encode_codebook_values``: MXFP4, MXFP6, NVFP4, NF4_DQ, BITNET, and MXFP8,
    whose FP8 codes come from rounding the float32 bits: the float8 cast ran as a scalar
    loop). 4096 x 4096 Q8_0, one thread: 3.5 -> 2.7 times a ``x.clone()``. Every other
    format (the K-quants, FP8_BLOCK), and the eager
    path of the lab's and of the llama.cpp types fused only compiled, quantizes, then
    dequantizes. So does a tensor whose stored scales overflowed (``scales_finite``): the
    fused passes saturate to float32's range, ``dequantize`` decodes such a block as the
    format's owner does (+-inf, NaN)."""
    q, values, finite_scales = _quantize(x, cfg, generator, None, None, importance, values=True)
    if values is None or not (finite_scales or q.scales_finite()):
        values = q.dequantize()
    return RoundTrip(q, values)


def _quantize(
    x: torch.Tensor,
    cfg: QuantConfig,
    generator: torch.Generator | None,
    range_mask: torch.Tensor | None,
    ranges: BlockRange | None,
    importance: torch.Tensor | None,
    *,
    values: bool,
) -> tuple[QuantizedTensor, torch.Tensor | None, bool]:
    """``quantize``, and where ``values`` asks and the format has a fused pass, the
    dequantized values in ``x``'s shape (else ``None``); last, whether the stored scales
    are known finite without a ``scales_finite`` pass (``llama_cpp.Quantized.finite_scales``)."""
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    check_float_tensor(x, allow_nonfinite=True)
    check_super_blocks(tuple(x.shape), cfg)
    layout = layout_for(x.shape, cfg.granularity)
    if (
        layout.tile is not None
        and cfg.format is not Format.INT
        and range_mask is None
        and ranges is None
        and importance is None
    ):
        tiled = _quantize_tiles(x, cfg, layout)
        if tiled is not None:
            return tiled, None, False
    blocks = layout.to_blocks(x.detach().to(torch.float32))
    # MX and NVFP4: extremes, finiteness, range and scales from one compiled pass
    fitted = None
    if (
        cfg.recipe is Recipe.LAB
        and cfg.two_level
        and cfg.range_method is RangeMethod.MINMAX
        and cfg.mode is Mode.SYMMETRIC
        and range_mask is None
        and ranges is None
        and importance is None
    ):
        fitted = fit_from_blocks(blocks, cfg)
        if fitted is not None and not bool(fitted.peaks.isfinite().all()):
            raise_nonfinite(x)
    # llama.cpp's legacy types check finiteness on their own pass's per-block reduction
    late_check = cfg.recipe is Recipe.LLAMA_CPP and llama_cpp.checks_finiteness(cfg)
    if not late_check and fitted is None:
        # One pass gives each block's extremes, the finiteness check (NaN propagates; an
        # Inf, or a float64 value beyond float32, is an extreme) and the min-max range.
        lo, hi = block_extremes(blocks)
        (finite,) = map_rows(_all_finite_rows, lo, hi)
        if not bool(finite.all()):
            raise_nonfinite(x)
    if cfg.rounding is Rounding.STOCHASTIC and generator is None:
        generator = torch.Generator(device=x.device).manual_seed(cfg.seed)

    if importance is not None and cfg.recipe is not Recipe.LLAMA_CPP:
        raise ValueError(
            "importance weights llama.cpp's quantizers (recipe=llama_cpp configs such as "
            f"QuantConfig.from_name('Q4_K')), not {cfg.describe()!r}"
        )
    if cfg.recipe is Recipe.LLAMA_CPP:
        if range_mask is not None or ranges is not None:
            raise ValueError(
                "llama.cpp's recipe chooses every block's scale itself: range_mask and "
                "ranges are for the lab's recipe"
            )
        if importance is not None:
            importance = llama_cpp.check_importance(importance, x.shape[-1])
        done = llama_cpp.quantize_blocks(blocks, cfg, layout, importance, values=values)
        if late_check:
            peaks = blocks if done.peaks is None else done.peaks
            if not bool(torch.isfinite(peaks).all()):
                raise_nonfinite(x)
        fused = None if done.values is None else layout.from_blocks(done.values)
        q = _result(x, cfg, layout, done.codes, done.params, None)
        return q, fused, done.finite_scales
    cb = None if cfg.format is Format.INT else codebook_for(cfg.format, x.device)
    mask_blocks = None
    if range_mask is not None and ranges is not None:
        raise ValueError(
            "pass range_mask or ranges, not both: ranges fixes every block's range, so no "
            "cell is left to choose it"
        )
    if range_mask is not None:
        if not isinstance(range_mask, torch.Tensor) or range_mask.dtype != torch.bool:
            raise TypeError("range_mask must be a bool tensor")
        if tuple(range_mask.shape) != tuple(x.shape):
            raise ValueError(
                f"range_mask shape {tuple(range_mask.shape)} differs from x {tuple(x.shape)}"
            )
        mask_blocks = layout.to_blocks(range_mask.to(blocks.device))
    if fitted is not None:
        params, rng = fitted.params, fitted.range
    else:
        if ranges is not None:
            rng = _given_ranges(ranges, layout.n_blocks, cfg.mode, blocks.device)
        else:
            rng = choose_range(
                blocks, cfg, _squared_error_fn(cfg, cb), BlockRange(lo, hi), mask_blocks
            )
        params = _fit(rng, cfg, cb, layout)
    if cb is None:
        m_enc = params.offset if params.offset is not None else torch.zeros_like(params.scale)
        if values and cfg.rounding is Rounding.NEAREST:
            both = kernels.encode_int_values(
                blocks,
                params.encode_scale,
                params.zero_point,
                m_enc,
                cfg.qmin,
                cfg.qmax,
                torch.int8 if cfg.bits <= 8 else torch.int16,
                _decode_terms(params, cfg),
            )
            if both is not None:
                codes, fused = both
                q = _result(x, cfg, layout, codes, params, rng)
                return q, layout.from_blocks(fused), _fit_scales_finite(fitted)
        codes = encode_int(blocks, params.encode_scale, params.zero_point, m_enc, cfg, generator)
    else:
        if values and cfg.rounding is Rounding.NEAREST:
            both = kernels.encode_codebook_values(
                blocks, params.encode_scale, cb, params.encode_inverse, params.scale
            )
            if both is not None:
                codes, fused = both
                q = _result(x, cfg, layout, codes, params, rng)
                return q, layout.from_blocks(fused), _fit_scales_finite(fitted)
        codes = encode_codebook(
            blocks, params.encode_scale, cb, cfg, generator, params.encode_inverse
        )
    return _result(x, cfg, layout, codes, params, rng), None, False


def _fit_scales_finite(fitted: BlockFit | None) -> bool:
    """Whether ``fit_from_blocks``' pass found every scale finite (its ``scale_peaks``):
    then ``quantize_dequantize`` skips ``scales_finite``'s pass over the scales (the fit
    makes no offset). ``False`` without a fit: the caller checks."""
    return fitted is not None and bool(torch.isfinite(fitted.scale_peaks).all())


def _decode_terms(
    params: BlockParams, cfg: QuantConfig
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The ``(s, z, m)`` that ``QuantizedTensor.dequantize`` applies to integer codes with
    ``params``: ``z`` only where it subtracts the zero point (``cfg.has_zero_point``, and
    under an offset only a nonzero one: GGUF's ``d u + min``), ``m`` the offset or
    ``None``, as its choice between ``decode_int`` and ``decode_int_offset``."""
    z = params.zero_point if cfg.has_zero_point else None
    m = params.offset
    if m is not None and (z is None or bool((z == 0).all())):
        z = None
    return params.scale, z, m


def _fit(
    rng: BlockRange, cfg: QuantConfig, cb: Codebook | None, layout: BlockLayout
) -> BlockParams:
    """The block parameters of blocks with ranges ``rng`` (the module's formulas)."""
    if cfg.two_level:
        return fit_scales(rng, cfg, layout)
    s, z, m = map_rows(lambda lo, hi: _block_qparams(BlockRange(lo, hi), cfg, cb), rng.lo, rng.hi)
    return BlockParams(s, z, m if cfg.float_offset else None, s)


def block_params(
    blocks: torch.Tensor, cfg: QuantConfig, layout: BlockLayout, extremes: BlockRange
) -> tuple[BlockParams, Codebook | None]:
    """What ``quantize(x, cfg)`` computes before its codes, for a lab-recipe ``cfg`` with
    ``blocks = layout.to_blocks(x)`` (float32, finite) and ``extremes`` their per-block
    ``(min, max)`` (``chunks.block_extremes``'): each block's parameters (the same code,
    so the same bits) and ``cfg``'s codebook (``None`` for ``Format.INT``). For a caller
    that needs the quantization error but not the codes (``quant_core.mixed.sums``)."""
    if cfg.recipe is not Recipe.LAB:
        raise ValueError(f"block_params is for the lab's recipe, not {cfg.describe()!r}")
    cb = None if cfg.format is Format.INT else codebook_for(cfg.format, blocks.device)
    rng = choose_range(blocks, cfg, _squared_error_fn(cfg, cb), extremes)
    return _fit(rng, cfg, cb, layout), cb


def _quantize_tiles(
    x: torch.Tensor, cfg: QuantConfig, layout: BlockLayout
) -> QuantizedTensor | None:
    """A codebook format in ``PerBlock`` tiles (FP8_BLOCK's 128 x 128) with min-max
    ranges and nearest rounding, on the matrix's own layout: the compiled kernels take
    ``x`` viewed ``[R/r, r, C/c, c]`` and each tile's scale broadcast, so ``x`` is not
    gathered into tiles (a full-size float32 copy) nor the codes scattered back. The same
    extremes (exact in any order), the same per-tile scales from the same code, the same
    elementwise formula: ``quantize``'s codes and scales. ``None`` where this does not
    apply (another range method or rounding, two-level scales, the eager path, a
    non-contiguous ``x``): ``quantize`` goes on as for any layout."""
    if (
        cfg.recipe is not Recipe.LAB
        or cfg.range_method is not RangeMethod.MINMAX
        or cfg.rounding is not Rounding.NEAREST
        or cfg.two_level
        or cfg.float_offset
    ):
        return None
    x32 = x.detach().to(torch.float32)
    if not x32.is_contiguous():
        return None
    (rows, cols), (r, c) = layout.shape, layout.tile
    grid = x32.view(rows // r, r, cols // c, c)
    ext = kernels.tile_extremes(grid)
    if ext is None:
        return None
    lo, hi = ext
    (finite,) = map_rows(_all_finite_rows, lo, hi)
    if not bool(finite.all()):
        raise_nonfinite(x)
    cb = codebook_for(cfg.format, x.device)
    rng = choose_range(grid, cfg, _squared_error_fn(cfg, cb), BlockRange(lo, hi))
    s, z, _ = map_rows(lambda lo, hi: _block_qparams(BlockRange(lo, hi), cfg, cb), rng.lo, rng.hi)
    params = BlockParams(s, z, None, s)
    inverse = params.encode_inverse
    codes = kernels.encode_codebook(grid, params.encode_scale, cb, inverse)
    if codes is None:
        return None
    return _result(x, cfg, layout, codes.reshape(rows, cols), params, rng, natural=True)


def _result(
    x: torch.Tensor,
    cfg: QuantConfig,
    layout: BlockLayout,
    codes: torch.Tensor,
    params: BlockParams,
    rng: BlockRange | None,
    natural: bool = False,
) -> QuantizedTensor:
    """The ``QuantizedTensor`` of ``codes`` (blocks; ``natural``: already in ``x``'s
    layout) and ``params`` (per block)."""
    shape = layout.scale_shape
    stored = params.stored
    if stored is not None:
        stored = StoredScales(
            codes=stored.codes.reshape(shape),
            min_codes=None if stored.min_codes is None else stored.min_codes.reshape(shape),
            super_scale=stored.super_scale,
            super_min=stored.super_min,
        )
    return QuantizedTensor(
        codes=codes if natural else layout.from_blocks(codes),
        scale=params.scale.reshape(shape),
        zero_point=params.zero_point.reshape(shape),
        config=cfg,
        layout=layout,
        input_dtype=x.dtype,
        chosen_range=rng,
        offset=None if params.offset is None else params.offset.reshape(shape),
        stored=stored,
    )
