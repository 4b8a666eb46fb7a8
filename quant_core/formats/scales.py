"""Scales are quantized too: the second level of two-level formats, modelled once.

A block's scale ``s`` (and, for float-min schemes, its min) is chosen from the block's range
as on one level; then it is stored in the config's ``scale_format``:

- ``FloatScales``: a float of ``scale_dtype`` (the one-level formats; nothing here).
- ``PowerOfTwoScales`` (E8M0, OCP microscaling): ``e = clamp(floor(log2 a) - emax, -127,
  128) + 127`` from the block's absmax ``a`` (its float32 exponent bits, as torchao's FLOOR
  mode), scale ``2^(e - 127)``; float codes are computed on ``max(2^(e - 127), 2^-126)``,
  as torchao does, so that an all-zero block does not divide by a subnormal. An INT
  element (MXINT8, which torchao lacks) is ``q 2^(e - 127 - 6)`` with ``q`` in -127..127
  (the OCP spec's symmetric INT8, ``QuantConfig.qmin``) rounded half to even on that
  very scale.
- ``FP8Scales`` (NVFP4): a tensor scale ``t = amax / (448 * vmax)`` (float32; 1 for an
  all-zero tensor), block scales ``sc = e4m3(clamp(a / vmax / t, 2^-6, 448))``, dequantized
  as ``(t * sc) * v``; codes round ``x * ((1 / t) / sc)``, torchao's order of operations.
  Without a tensor scale (``tensor_scale=False``, GGUF's NVFP4 layout) ``t = 1``.
- ``SuperBlockScales``: per super-block, ``d = max s_j / smax`` in ``scale_dtype`` (fp16),
  block integers ``sc_j = clamp(round(s_j / d), 0, smax)``, scale ``d sc_j`` (exact in
  float32); float-min schemes store the min ``-m_j >= 0`` of each block the same way
  (``dmin``), with the block's range widened to contain 0 as llama.cpp's K-quants do, and
  levels ``d sc_j (q - qmin) - dmin m_j``.
- ``DoubleQuantScales`` (bitsandbytes): the float32 scales minus their mean ``c``, in runs
  of ``block`` with a float32 absmax ``A`` per run, each ``c`` stored as an index into the
  8-bit dynamic map the way bitsandbytes' CPU ``quantize_blockwise`` finds it (a lookup
  table, not the nearest entry): ``v = clamp(c * fl(1 / A), -1, 1)``,
  ``k = trunc((v + 1) / 2 * 65535 + 0.5)`` (float32),
  and the code is that of the map entry nearest the grid point ``-1 + 2k / 65535`` (the
  lower one on a tie); a run with ``A = 0`` stores code 0. The NF4 codes round
  ``x * (1 / max(s, 1e-38))`` on the float32 scale ``s`` (as
  ``bitsandbytes.functional.quantize_4bit`` does: it compresses the statistics after
  encoding), the dequantized values use the stored one, ``map[code] A + mean``.

``fit_scales`` returns a ``BlockParams``: the scale, zero point and offset dequantization
uses (``[n_blocks, 1]`` float32, int32, float32), the scale (or reciprocal) the codes are
computed on, and ``StoredScales``: what the second level stores. ``scales_from_stored`` goes
back: from the stored second level to the scale, zero point and offset (what a file that
stores only the second level reopens to).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from ..config import (
    DoubleQuantScales,
    FloatScales,
    Format,
    FP8Scales,
    Mode,
    PowerOfTwoScales,
    QuantConfig,
    ScaleDtype,
    SuperBlockScales,
)
from ..granularity import BlockLayout, layout_for
from ..kernels import canonical_zeros, switch
from ..ranges import BlockRange, symmetric_ends
from .codebooks import codebook_for
from .gguf_types import ggml_type
from .integer import round_half_even_

__all__ = [
    "BlockFit",
    "BlockParams",
    "StoredScales",
    "check_shape",
    "dynamic_map",
    "fit_from_blocks",
    "fit_scales",
    "power_of_two",
    "scales_from_stored",
    "super_block_shape",
    "ue4m3_values",
]

_F32_MIN_NORMAL = 2.0**-126
_E4M3_MAX = 448.0
_E4M3_TINY = 2.0**-6  # torch.finfo(torch.float8_e4m3fn).tiny, torchao's E4M3_EPS
_HALF = {ScaleDtype.FP16: torch.float16, ScaleDtype.BF16: torch.bfloat16}


@dataclass(frozen=True, eq=False)
class StoredScales:
    """What a two-level format stores for its block scales.

    ``codes`` (int32, the layout's ``scale_shape``): per block, the stored integer: the
    E8M0 biased exponent ``e`` (scale ``2^(e - 127)``), the E4M3 bit pattern of NVFP4's
    block scale, the super-block integer ``sc`` (signed for signed formats) or the 8-bit
    double-quantization code.
    ``min_codes`` (int32, ``scale_shape``, or ``None``): the super-block integers ``m`` of
    float-min schemes (``x = d sc (q - qmin) - dmin m``).
    ``super_scale`` (float32, or ``None``): ``d`` per super-block
    (``super_block_shape``); NVFP4's tensor scale ``t`` (shape ``[]``); the float32 absmax of
    each run of double-quantized scales (``[ceil(n_blocks / block)]``).
    ``super_min`` (float32, or ``None``): ``dmin`` per super-block; double quantization's
    mean offset (shape ``[]``).
    """

    codes: torch.Tensor
    min_codes: torch.Tensor | None = None
    super_scale: torch.Tensor | None = None
    super_min: torch.Tensor | None = None


@dataclass(frozen=True, eq=False)
class BlockParams:
    """Per-block parameters of one quantization (each ``[n_blocks, 1]``).

    ``scale``, ``zero_point``, ``offset``: dequantization's ``x_hat = s (q - z) + m``
    (or ``s v[q]`` for codebooks); ``offset`` is ``None`` where ``m = 0``.
    ``encode_scale``: the scale codes are rounded on (``r / s_enc``), or
    ``encode_inverse``: a reciprocal codes are rounded on (``r * inv``) where the format's
    owner multiplies; at most one differs from ``scale``.
    ``stored``: the second level, or ``None`` for one-level formats.
    """

    scale: torch.Tensor
    zero_point: torch.Tensor
    offset: torch.Tensor | None
    encode_scale: torch.Tensor
    encode_inverse: torch.Tensor | None = None
    stored: StoredScales | None = None


@dataclass(frozen=True, eq=False)
class BlockFit:
    """``fit_from_blocks``' result: the per-block ``params`` and symmetric ``range``
    (``[n_blocks, 1]`` each), and ``peaks``, ``[min lo, max hi]`` over all blocks: either
    is NaN or infinite exactly when some block is (the finiteness check); ``scale_peaks``,
    ``[min s, max s]`` over the blocks' scales ``params.scale``, from the same pass: both
    finite exactly when every scale is (``QuantizedTensor.scales_finite``'s answer without
    its ``aminmax`` over the scales, 0.2 to 0.3 clones of a 4096 x 4096 input)."""

    params: BlockParams
    range: BlockRange
    peaks: torch.Tensor
    scale_peaks: torch.Tensor


def super_block_shape(layout: BlockLayout, sf: SuperBlockScales) -> tuple[int, ...]:
    """Shape of the per-super-block ``d`` of a ``PerGroup`` layout: ``shape[:-1] +
    [shape[-1] / super_block]``."""
    return (*layout.shape[:-1], layout.shape[-1] // sf.super_block)


def check_super_blocks(shape: tuple[int, ...], cfg: QuantConfig) -> None:
    """``ValueError`` naming the super-block when rows of ``shape`` do not divide into
    them. Called before ``layout_for``: a row of 250 values fails the 32-value blocks too,
    and the super-block is the constraint a user of the format needs to hear about."""
    sf = cfg.scale_format
    shape = tuple(shape)
    if isinstance(sf, SuperBlockScales) and shape and shape[-1] % sf.super_block:
        raise ValueError(
            f"{cfg.name} stores its scales per super-block of {sf.super_block} values: "
            f"rows of {shape[-1]} values (shape {shape}) do not divide into "
            f"super-blocks of {sf.super_block}"
        )


def check_shape(shape: tuple[int, ...], cfg: QuantConfig) -> BlockLayout:
    """The block layout of a tensor of ``shape`` under ``cfg``, or ``ValueError`` saying
    why ``cfg`` cannot store it, from the shape alone, so a page can say so before it
    spends time on a run that can only fail. The super-block is named first
    (``check_super_blocks``), then the block (``layout_for``), each with the row length:
    Q4_K on rows of 250 values names its 256-value super-blocks, Q4_0 its group size of
    32; these are the refusals ``quantize`` and ``storage_cost`` make, word for word. A GGUF
    type's own block (``ggml_type(name).block_size``) must divide the rows too: where it
    is larger than the lab's blocks (GGUF's NVFP4 holds 4 scales of 16 in each block of
    64) the file cannot hold rows of 32, though ``quantize`` can."""
    shape = tuple(int(d) for d in shape)
    check_super_blocks(shape, cfg)
    layout = layout_for(shape, cfg.granularity)
    name = cfg.gguf_type
    if name is not None and shape[-1] % (block := ggml_type(name).block_size):
        raise ValueError(
            f"{name} stores blocks of {block} values: rows of {shape[-1]} values "
            f"(shape {shape}) do not divide into them"
        )
    return layout


def fit_scales(rng: BlockRange, cfg: QuantConfig, layout: BlockLayout) -> BlockParams:
    """The block parameters of a two-level (lab recipe) config from each block's range
    ``rng`` (``[n_blocks, 1]``; ``[-a, a]`` when symmetric). The formulas are the module's."""
    sf = cfg.scale_format
    if isinstance(sf, PowerOfTwoScales):
        return _power_of_two(rng, cfg)
    if isinstance(sf, FP8Scales):
        return _fp8(rng, cfg, sf)
    if isinstance(sf, SuperBlockScales):
        return _super_blocks(rng, cfg, sf, layout)
    if isinstance(sf, DoubleQuantScales):
        return _double_quant(rng, cfg, sf)
    if isinstance(sf, FloatScales):
        raise ValueError("FloatScales is one level: quantize fits it directly")
    raise TypeError(f"unknown scale format {sf!r}")


def fit_from_blocks(
    blocks: torch.Tensor, cfg: QuantConfig
) -> BlockFit | None:
    """``quantize``'s steps before the codes for a symmetric min-max two-level config with
    E8M0 scales (MXINT8, MXFP4, MXFP6, MXFP8) or NVFP4's E4M3 scales under a tensor scale,
    in one compiled pass over ``blocks`` (float32 ``[n, L]``): each block's extremes (as
    ``chunks.block_extremes``: ``+0`` for a zero one), the symmetric range ``[-a, a]``
    (``ranges.symmetric_ends``), the scales (``_power_of_two``'s or ``_fp8``'s pass) and,
    for the finiteness check, ``[min lo, max hi]`` (``quantize._all_finite_rows``'s two
    values: either is NaN or infinite exactly when a block is). The same operations in the
    same order as the eager steps, so the same bits; what it saves is the eager ops on the
    ``[n, 1]`` columns between them (about a third of MXINT8's quantize + dequantize on two
    threads: the check, the range, the scale pass's call and ``_zeros``' fill).

    Returns the ``BlockFit``, or ``None`` where it does not apply (another scale
    format or range, the eager path): ``quantize`` takes its own steps."""
    sf = cfg.scale_format
    if blocks.dtype != torch.float32 or blocks.dim() != 2 or not blocks.numel():
        return None
    if isinstance(sf, PowerOfTwoScales):
        shift = 0 if cfg.format is not Format.INT else cfg.bits - 2
        consts = torch.tensor([cfg.format.max_exponent, shift], dtype=torch.int32)
        fit = _e8m0_int_blocks_pass if cfg.format is Format.INT else _e8m0_float_blocks_pass
        out = switch.try_compiled(fit, "blocks_scales", blocks, consts[0], consts[1])
        if out is None:
            return None
        s, s_enc, biased, lo, hi, peaks, scale_peaks = out
        params = BlockParams(s, _zeros(s, cfg), None, s_enc, None, StoredScales(codes=biased))
        return BlockFit(params, BlockRange(lo, hi), peaks, scale_peaks)
    if isinstance(sf, FP8Scales) and sf.tensor_scale:
        vmax = _value_max(cfg)
        top = _E4M3_MAX * vmax
        if float(torch.tensor(top, dtype=torch.float32)) != top:
            return None
        consts = torch.tensor([vmax, top], dtype=torch.float32)
        out = switch.try_compiled(_fp8_blocks_pass, "blocks_scales", blocks, consts[0], consts[1])
        if out is None:
            return None
        s, inverse, codes, t, lo, hi, peaks, scale_peaks = out
        stored = StoredScales(codes=codes, super_scale=t.reshape(()))
        params = BlockParams(s, _zeros(s, cfg), None, s, inverse, stored)
        return BlockFit(params, BlockRange(lo, hi), peaks, scale_peaks)
    return None


def _symmetric_blocks(
    blocks: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(-a, a, [min lo, max hi])`` of ``blocks``' per-row extremes ``lo``, ``hi``: the
    eager steps' operations (``chunks.block_extremes``, ``ranges.symmetric_ends``,
    ``quantize._all_finite_rows``), traced into ``fit_from_blocks``' kernels."""
    lo = canonical_zeros(blocks.amin(dim=1, keepdim=True))
    hi = canonical_zeros(blocks.amax(dim=1, keepdim=True))
    neg, a = symmetric_ends(lo, hi)
    return neg, a, torch.stack([lo.amin(), hi.amax()])


def _e8m0_int_blocks_pass(blocks, emax, shift):  # type: ignore[no-untyped-def]
    """``_e8m0_int_pass`` on the symmetric ranges of ``blocks``: ``fit_from_blocks``."""
    lo, hi, peaks = _symmetric_blocks(blocks)
    fit = _e8m0_int_pass(lo, hi, emax, shift)
    return (*fit, lo, hi, peaks, _scale_peaks(fit[0]))


def _e8m0_float_blocks_pass(blocks, emax, shift):  # type: ignore[no-untyped-def]
    """``_e8m0_float_pass`` on the symmetric ranges of ``blocks``: ``fit_from_blocks``."""
    lo, hi, peaks = _symmetric_blocks(blocks)
    fit = _e8m0_float_pass(lo, hi, emax, shift)
    return (*fit, lo, hi, peaks, _scale_peaks(fit[0]))


def _fp8_blocks_pass(blocks, vmax, top):  # type: ignore[no-untyped-def]
    """``_fp8_tensor_pass`` on the symmetric ranges of ``blocks``: ``fit_from_blocks``."""
    lo, hi, peaks = _symmetric_blocks(blocks)
    fit = _fp8_tensor_pass(lo, hi, vmax, top)
    return (*fit, lo, hi, peaks, _scale_peaks(fit[0]))


def _scale_peaks(s: torch.Tensor) -> torch.Tensor:
    """``[min s, max s]`` (``BlockFit.scale_peaks``): NaN where any scale is, +-inf where
    one is, as ``quantized_tensor._all_finite``'s ``aminmax``."""
    return torch.stack([s.amin(), s.amax()])


def _absmax(rng: BlockRange) -> torch.Tensor:
    return torch.maximum(rng.lo.abs(), rng.hi.abs())


def _value_max(cfg: QuantConfig) -> float:
    if cfg.format is Format.INT:
        return float(cfg.qmax)
    return codebook_for(cfg.format).max_abs


def _zeros(like: torch.Tensor, cfg: QuantConfig) -> torch.Tensor:
    """The int32 zero points (``like``'s shape, all 0) of a two-level config, whose levels
    are symmetric. For codebook elements (MXFP4/6/8, NVFP4, NF4 with double quantization)
    one zero ``expand``ed (stride 0, read-only, as ``llama_cpp``'s types give theirs): no
    encoder, decode or export of theirs reads it but as 0, and a fresh ``torch.zeros`` of
    NVFP4's 1M blocks (4096 x 4096) is a fill of 4 MiB of new pages, about a tenth of a
    clone. Integer elements (MXINT8, the sidebar's INT configs with these scales) keep a
    fresh tensor: their encoders take the zero points as a kernel input
    (``kernels.encode_int``, ``encode_int_values``, the table's fused sums) shared with
    the one-level integer configs, whose zero points are dense, and a stride-0 input
    would be one compiled graph more of each (Dynamo specialises strides of 0)."""
    if cfg.format is not Format.INT:
        return torch.zeros((1,) * like.dim(), dtype=torch.int32, device=like.device).expand(
            like.shape
        )
    return torch.zeros(like.shape, dtype=torch.int32, device=like.device)


def power_of_two(k: torch.Tensor) -> torch.Tensor:
    """``2^k`` (float32) of integer exponents ``k`` (int32), built from its bits: exact,
    the subnormals ``2^-149..2^-127`` included, ``0`` below them and ``inf`` above
    ``2^127``: ``torch.ldexp(1, k)``'s values, which it computes through ``pow`` (10 ms
    per million blocks, a sixth of MXFP4's quantize on one thread)."""
    k = k.to(torch.int32)
    normal = (k + 127).clamp(0, 255) << 23
    subnormal = torch.ones_like(k) << (k + 149).clamp(0, 22)
    bits = torch.where(k >= -126, normal, torch.where(k >= -149, subnormal, 0))
    return torch.where(k > 127, 0x7F800000, bits).view(torch.float32)


def _power_of_two(rng: BlockRange, cfg: QuantConfig) -> BlockParams:
    emax = cfg.format.max_exponent
    # an INT element is q 2^-(b-2)
    shift = 0 if cfg.format is not Format.INT else cfg.bits - 2
    lo, hi = rng.lo.to(torch.float32), rng.hi.to(torch.float32)
    consts = torch.tensor([emax, shift], dtype=torch.int32, device=lo.device)
    fit = _e8m0_int_pass if cfg.format is Format.INT else _e8m0_float_pass
    s, s_enc, biased = switch.compiled_or(fit, "scales", lo, hi, consts[0], consts[1])
    stored = StoredScales(codes=biased)
    return BlockParams(s, _zeros(s, cfg), None, s_enc, None, stored)


def _e8m0_biased(
    lo: torch.Tensor, hi: torch.Tensor, emax: torch.Tensor, shift: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each block's E8M0 code ``clamp(E - emax, -127, 128) + 127`` (``E`` the unbiased
    float32 exponent of ``a = max(|lo|, |hi|)``, int32) and ``s = 2^(code - 127 -
    shift)`` exactly (``2^-127`` is a float32 subnormal): integer arithmetic on the bits."""
    a = torch.maximum(lo.abs(), hi.abs())
    extracted = ((a.view(torch.int32) >> 23) & 0xFF) - 127
    biased = (extracted - emax).clamp(-127, 128) + 127
    return biased, power_of_two(biased - 127 - shift)


def _e8m0_int_pass(lo, hi, emax, shift):  # type: ignore[no-untyped-def]
    """MXINT8's ``(s, s_enc, code)``: the spec's codes on ``s`` itself (division by a
    subnormal ``2^-133`` is exact). A kernel (``switch.compiled_or``): these dozen
    operations on ``[n_blocks, 1]`` took ~50 ms eagerly for 4096 x 4096 in blocks of 32
    (one thread, on a loaded machine), integer operations, so the same bits compiled."""
    biased, s = _e8m0_biased(lo, hi, emax, shift)
    return s, s, biased


def _e8m0_float_pass(lo, hi, emax, shift):  # type: ignore[no-untyped-def]
    """The float elements' (MXFP4, MXFP6, MXFP8) ``(s, s_enc, code)``: codes rounded on a
    scale never below ``2^-126``, as torchao's; a kernel as ``_e8m0_int_pass``."""
    biased, s = _e8m0_biased(lo, hi, emax, shift)
    return s, power_of_two(biased.clamp(min=1) - 127 - shift), biased


def _to_e4m3(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(value as float32, bit pattern as int32)`` of ``v`` cast to FP8 E4M3 (IEEE round
    to nearest even; ``v`` already clamped to the format's range)."""
    fp8 = v.to(torch.float8_e4m3fn)
    return fp8.to(torch.float32), fp8.view(torch.uint8).to(torch.int32)


@functools.cache
def _ue4m3_table() -> torch.Tensor:
    b = torch.arange(256, dtype=torch.int32)
    exp, man = (b >> 3) & 0xF, (b & 7).to(torch.float32)
    # every value exact in float32: man 2^-9, or (8 + man) 2^(exp - 10)
    raw = torch.where(exp == 0, man * 2.0**-9, (8 + man) * power_of_two(exp - 10))
    return torch.where((b == 0) | (b == 0x7F), 0.0, raw)


def ue4m3_values(codes: torch.Tensor) -> torch.Tensor:
    """The float32 scales of GGUF NVFP4's scale bytes ``codes`` (integers 0..255, any
    shape), as llama.cpp decodes them (``ggml_ue4m3_to_fp32`` without its factor 0.5, which
    belongs to its doubled FP4 levels): bits ``eeee mmm`` (bit 7 ignored), ``man 2^-9`` for
    ``e = 0``, else ``(1 + man / 8) 2^(e - 7)``; ``0x00`` and ``0x7F`` are 0. ``0x38`` is
    1.0, ``0x7E`` 448 (the largest llama.cpp writes), ``0xFF`` 480 (bit 7 ignored)."""
    table = _ue4m3_table().to(codes.device)
    return table[codes.to(torch.int64)]


def _fp8(rng: BlockRange, cfg: QuantConfig, sf: FP8Scales) -> BlockParams:
    vmax = _value_max(cfg)
    top = _E4M3_MAX * vmax
    lo, hi = rng.lo.to(torch.float32), rng.hi.to(torch.float32)
    if sf.tensor_scale and lo.numel() and float(torch.tensor(top, dtype=torch.float32)) == top:
        # the divisors as float32 tensors: true divisions in the kernel, as eagerly
        consts = torch.tensor([vmax, top], dtype=torch.float32, device=lo.device)
        s, inverse, codes, t = switch.compiled_or(
            _fp8_tensor_pass, "scales", lo, hi, consts[0], consts[1]
        )
        stored = StoredScales(codes=codes, super_scale=t.reshape(()))
        return BlockParams(s, _zeros(s, cfg), None, s, inverse, stored)
    a = _absmax(rng).to(torch.float32)
    if not sf.tensor_scale:  # the E4M3 number is the scale itself
        sc, codes = _to_e4m3((a / vmax).clamp(_E4M3_TINY, _E4M3_MAX))
        return BlockParams(sc, _zeros(sc, cfg), None, sc, 1.0 / sc, StoredScales(codes=codes))
    # no blocks, or a top not exact in float32: eagerly, with the Python float divisors
    amax = a.max() if a.numel() else torch.zeros((), dtype=torch.float32)
    t = amax / top
    t = torch.where(t > 0, t, torch.ones_like(t))  # an all-zero tensor: any scale will do
    scaled = (a / vmax) / t
    sc, codes = _to_e4m3(scaled.clamp(_E4M3_TINY, _E4M3_MAX))
    s = t * sc
    inverse = (1.0 / t) / sc
    stored = StoredScales(codes=codes, super_scale=t.reshape(()))
    return BlockParams(s, _zeros(s, cfg), None, s, inverse, stored)


def _fp8_tensor_pass(lo, hi, vmax, top):  # type: ignore[no-untyped-def]
    """NVFP4's scales from the blocks' ranges ``[lo, hi]`` ``[n, 1]``, ``a = max(|lo|,
    |hi|)`` (``_absmax``: in the kernel, three fewer passes over the blocks eagerly): the
    tensor scale ``t = max a / top`` (``top = 448 vmax``; 1 for an all-zero tensor), each
    block's E4M3
    ``sc = e4m3(clamp((a / vmax) / t, 2^-6, 448))``, ``s = t sc``, the encoder's
    ``(1 / t) / sc``, and the E4M3 bits: ``_fp8``'s operations in its order (``vmax`` and
    ``top`` float32 0-d tensors, exact). A kernel (``switch.compiled_or``): eagerly, these
    operations on ``[n_blocks, 1]`` cost ~70 ms for 4096 x 4096 in blocks of 16 (one
    thread, a loaded machine); max is exact in any order, the float8 cast rounds to
    nearest even in both paths."""
    a = torch.maximum(lo.abs(), hi.abs())
    t = a.max() / top
    t = torch.where(t > 0, t, torch.ones_like(t))  # an all-zero tensor: any scale will do
    scaled = (a / vmax) / t
    sc, codes = _to_e4m3(scaled.clamp(_E4M3_TINY, _E4M3_MAX))
    return t * sc, (1.0 / t) / sc, codes, t


def _round_to(v: torch.Tensor, dtype: ScaleDtype) -> torch.Tensor:
    if dtype is ScaleDtype.FP32:
        return v
    info = torch.finfo(_HALF[dtype])
    return v.clamp(max=info.max).to(_HALF[dtype]).to(torch.float32)


def _super_quantize(
    values: torch.Tensor, per_super: int, smax: int, dtype: ScaleDtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Non-negative ``values`` ``[n, 1]`` in runs of ``per_super``: ``(d per run,
    integers, d * integer per value)``; ``d = max / smax`` rounded to ``dtype``."""
    runs = values.reshape(-1, per_super)
    d = _round_to(runs.amax(dim=1, keepdim=True) / smax, dtype)
    safe = torch.where(d > 0, d, torch.ones_like(d))
    ints = round_half_even_((runs / safe).clamp_(0, smax))
    ints = torch.where(d > 0, ints, torch.zeros_like(ints))
    return d, ints.to(torch.int32), (d * ints).reshape(-1, 1)


def _super_blocks(
    rng: BlockRange, cfg: QuantConfig, sf: SuperBlockScales, layout: BlockLayout
) -> BlockParams:
    smax = (1 << (sf.bits - 1)) - 1 if sf.signed else (1 << sf.bits) - 1
    per_super = sf.super_block // layout.block_len
    sup_shape = super_block_shape(layout, sf)
    if cfg.mode is Mode.SYMMETRIC:
        s_float = _absmax(rng) / cfg.qmax
        d, sc, s = _super_quantize(s_float, per_super, smax, cfg.scale_dtype)
        stored = StoredScales(
            codes=sc.reshape(layout.scale_shape), super_scale=d.reshape(sup_shape)
        )
        return BlockParams(s, _zeros(s, cfg), None, s, None, stored)
    # float-min: the range widened to contain 0; levels d sc (q - qmin) - dmin m
    lo, hi = rng.lo.clamp(max=0), rng.hi.clamp(min=0)
    s_float = (hi - lo) / (cfg.qmax - cfg.qmin)
    d, sc, s = _super_quantize(s_float, per_super, smax, cfg.scale_dtype)
    dmin, mn, neg_m = _super_quantize(-lo, per_super, smax, cfg.scale_dtype)
    z = torch.full(s.shape, cfg.qmin, dtype=torch.int32, device=s.device)
    stored = StoredScales(
        codes=sc.reshape(layout.scale_shape),
        min_codes=mn.reshape(layout.scale_shape),
        super_scale=d.reshape(sup_shape),
        super_min=dmin.reshape(sup_shape),
    )
    # A block whose scale integer rounds to 0 keeps one level: encode it on scale 1 (all
    # codes qmin then dequantize to -dmin m) instead of dividing by zero.
    s_enc = torch.where(s > 0, s, torch.ones_like(s))
    return BlockParams(s, z, -neg_m, s_enc, None, stored)


@functools.cache
def dynamic_map() -> torch.Tensor:
    """bitsandbytes' signed 8-bit dynamic map (``create_dynamic_map(signed=True)``), the
    256 values (ascending) its double quantization indexes."""
    data: list[float] = []
    max_exponent_bits, non_sign_bits = 7, 7
    for i in range(max_exponent_bits):
        items = 2 ** (i + non_sign_bits - max_exponent_bits) + 1
        bounds = torch.linspace(0.1, 1, items, dtype=torch.float32)
        means = (bounds[:-1] + bounds[1:]) / 2.0
        data += ((10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
        data += (-(10 ** (-(max_exponent_bits - 1) + i)) * means).tolist()
    data += [0.0, 1.0]
    data += [0.0] * (256 - len(data))
    return torch.tensor(sorted(data), dtype=torch.float32)


_LUT_SIZE = 65536
_BNB_MIN_ABSMAX = 1e-38  # quantize_4bit's absmax.clamp(min=1e-38) before its reciprocal


@functools.cache
def _dynamic_lut_cpu() -> torch.Tensor:
    """bitsandbytes' CPU lookup table (``build_quantize_lut`` in csrc/cpu_ops.cpp): for each
    of 65536 grid points ``g_k = -1 + 2k / 65535`` (float32), the index of the dynamic-map
    entry nearest to it, the number of midpoints ``(m_i + m_{i+1}) / 2 < g_k``."""
    table = dynamic_map()
    mids = 0.5 * (table[:-1] + table[1:])
    k = torch.arange(_LUT_SIZE, dtype=torch.float32)
    grid = -1.0 + (2.0 * k) / (_LUT_SIZE - 1)
    return torch.bucketize(grid, mids, right=False)


def _dynamic_lut(device: torch.device) -> torch.Tensor:
    return _dynamic_lut_cpu().to(device)


def _double_quant(rng: BlockRange, cfg: QuantConfig, sf: DoubleQuantScales) -> BlockParams:
    s_float = _absmax(rng).to(torch.float32) / _value_max(cfg)
    flat = s_float.reshape(-1)
    offset = flat.mean()
    if not bool(torch.isfinite(offset)):
        # bitsandbytes' float32 mean overflows the same way and stores NaN scales
        raise ValueError(
            f"{cfg.name} stores its block scales less their mean, and the mean of these "
            f"block scales (largest {float(flat.max()):.4g}) overflows float32: values this "
            "large have no double-quantized scales (bitsandbytes stores NaN for them)"
        )
    centred = flat - offset
    n = flat.numel()
    runs = math.ceil(n / sf.block)
    padded = torch.zeros(runs * sf.block, dtype=torch.float32, device=flat.device)
    padded[:n] = centred
    padded = padded.reshape(runs, sf.block)
    absmax2 = padded.abs().amax(dim=1, keepdim=True)
    inverse = 1.0 / torch.where(absmax2 > 0, absmax2, torch.ones_like(absmax2))
    normed = (padded * inverse).clamp_(-1, 1)
    # float32 as in C; whether the compiler fuses the multiply-add or not gives the same
    # index (adding 0.5 is exact on these magnitudes), and the cast truncates.
    grid = ((normed + 1) * 0.5 * (_LUT_SIZE - 1) + 0.5).to(torch.int64)
    codes = _dynamic_lut(flat.device)[grid]
    codes = torch.where(absmax2 > 0, codes, torch.zeros_like(codes))
    table = dynamic_map().to(flat.device)
    s = (table[codes] * absmax2).reshape(-1)[:n] + offset
    stored = StoredScales(
        codes=codes.reshape(-1)[:n].to(torch.int32).reshape(s_float.shape),
        super_scale=absmax2.reshape(-1),
        super_min=offset.reshape(()),
    )
    s = s.reshape(-1, 1)
    # bitsandbytes' codes: r * (1 / max(absmax, 1e-38)) (an all-zero block codes 0 as 0)
    inverse = 1.0 / s_float.clamp(min=_BNB_MIN_ABSMAX)
    return BlockParams(s, _zeros(s, cfg), None, s_float, inverse, stored)


def scales_from_stored(
    stored: StoredScales, cfg: QuantConfig, layout: BlockLayout
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(scale, zero_point, offset)`` (float32, int32, float32 or ``None``; the layout's
    ``scale_shape``) that the second level ``stored`` of a two-level config dequantizes to,
    computed as ``fit_scales`` computes them, so the values are the same bit for bit:

    - E8M0: ``2^(e - 127)`` (``2^(e - 127 - (b - 2))`` for an INT element);
    - FP8 E4M3: ``t * e4m3(code)``, or ``e4m3(code)`` without a tensor scale;
    - super-block: ``d sc`` per block, and under float-min ``m = -(dmin mn)``, ``z = qmin``;
    - double quantization: ``map[code] A + mean`` (``A`` of the code's run of ``block``).

    ``ValueError`` naming the part whose size does not fit the layout. (The llama.cpp
    recipe's own decodings, UE4M3 for GGUF's NVFP4 among them, live in ``gguf_bytes``.)"""
    sf, n, shape = cfg.scale_format, layout.n_blocks, layout.scale_shape
    codes = stored.codes.reshape(-1)
    if codes.numel() != n:
        raise ValueError(f"{cfg.name} stores {n:,} block scale codes; {codes.numel():,} given")

    def need(t: torch.Tensor | None, what: str, count: int) -> torch.Tensor:
        if t is None or t.numel() != count:
            got = "none" if t is None else f"{t.numel():,}"
            raise ValueError(f"{cfg.name} stores {count:,} {what}; {got} given")
        return t.to(torch.float32).reshape(-1)

    zp = torch.zeros(shape, dtype=torch.int32, device=codes.device)
    offset = None
    if isinstance(sf, PowerOfTwoScales):
        shift = 0 if cfg.format is not Format.INT else cfg.bits - 2
        s = power_of_two(codes.to(torch.int32) - 127 - shift)
    elif isinstance(sf, FP8Scales):
        sc = codes.to(torch.uint8).view(torch.float8_e4m3fn).to(torch.float32)
        s = need(stored.super_scale, "tensor scale", 1).reshape(()) * sc if sf.tensor_scale else sc
    elif isinstance(sf, SuperBlockScales):
        per_super = sf.super_block // layout.block_len
        runs = n // per_super
        d = need(stored.super_scale, "super-block scales d", runs).reshape(-1, 1)
        s = d * codes.to(torch.float32).reshape(runs, per_super)
        if cfg.float_offset:
            dmin = need(stored.super_min, "super-block mins dmin", runs).reshape(-1, 1)
            mins = need(stored.min_codes, "block min codes", n).reshape(runs, per_super)
            offset = (-(dmin * mins)).reshape(shape)
            zp = torch.full(shape, cfg.qmin, dtype=torch.int32, device=codes.device)
    elif isinstance(sf, DoubleQuantScales):
        runs = math.ceil(n / sf.block)
        absmax = need(stored.super_scale, f"absmax per {sf.block} scales", runs)
        mean = need(stored.super_min, "scale offset", 1).reshape(())
        table = dynamic_map().to(codes.device)
        per_code = absmax.repeat_interleave(sf.block)[:n]
        s = table[codes.to(torch.int64)] * per_code + mean
    else:
        raise ValueError(f"{cfg.describe()} stores its scales as floats: nothing to rebuild")
    return s.reshape(shape), zp, offset
