"""``QuantizedTensor``: what ``quantize`` returns (codes, scales, zero points or offsets,
the layout that maps blocks to the input's shape), and its dequantization."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import kernels
from .chunks import chunk_slices, for_each_piece, map_rows
from .config import Format, QuantConfig
from .formats import codebook_for
from .formats.scales import StoredScales
from .granularity import BlockLayout
from .ranges import BlockRange

__all__ = ["QuantizedTensor"]

_F32_MAX = torch.finfo(torch.float32).max


@dataclass(frozen=True, eq=False)
class QuantizedTensor:
    """Codes, scales and zero points of one quantized tensor.

    Every linear block dequantizes as ``r_hat = s (q - z) + m``:

    - ``codes`` (``q``): same shape as the input; int8 (bits <= 8) or int16 in
      ``[qmin, qmax]`` for ``Format.INT``; uint8 codebook codes (NF4 index, FP4/FP8 bit
      pattern) otherwise.
    - ``scale`` (``s``, float32, holding values of ``config.scale_dtype``) and
      ``zero_point`` (``z``, int32; zeros when symmetric, under ``ZeroPoint.FLOAT_MIN`` and
      for codebooks) have ``layout.scale_shape``: ``[]`` per tensor, ``[C]`` per channel,
      ``shape[:-1] + [C/g]`` per group; ``.flatten()`` lists them block by block.
    - ``offset`` (``m``): the float zero point of ``ZeroPoint.FLOAT_MIN``, float32 (values
      of the scale dtype), ``layout.scale_shape``: the value code 0 dequantizes to, so a
      block's levels run from ``m + s qmin`` to ``m + s qmax``. ``None`` under every other
      scheme (``m = 0``); it must be given exactly when ``config.float_offset``.
      A zero point in another float convention converts to it: tinygemm's and torchao's
      float ``zero_point`` (codes ``u = q - qmin``, ``r_hat = (u - 2^(b-1)) s + zp``) is
      ``m`` itself; GGUF Q4_1's ``min`` (``r_hat = d u + min``) is ``m + s qmin``; HQQ's
      ``r_hat = s (u - z_f)`` with a float ``z_f`` is ``m = -s (qmin + z_f)``.
    - ``chosen_range``: the range each block's grid was fitted to (``[n_blocks, 1]`` each;
      the data's extremes under min-max, the clipping range under percentile/MSE, the
      caller's under ``quantize(..., ranges=)``; ``[-a, a]`` when symmetric), before the
      zero point convention widens it (``INCLUDE_ZERO``) or rounds and clamps ``z``;
      ``None`` when not known.
    - ``stored``: the second level of a two-level format (``config.two_level``): the block
      scales (and mins) as the format stores them (``StoredScales``: E8M0 exponents, FP8
      scale bits, super-block integers and their ``d``/``dmin``, double-quantized codes);
      ``scale`` (and ``offset``) then hold their exact float32 values. ``None`` otherwise.

    Scales may be negative or zero where a format's owner stores them so (GGUF Q4_0's ``d``
    is ``max / -8`` with ``max`` the signed value of largest magnitude; Q3_K's and Q6_K's
    block integers are signed).
    """

    codes: torch.Tensor
    scale: torch.Tensor
    zero_point: torch.Tensor
    config: QuantConfig
    layout: BlockLayout
    input_dtype: torch.dtype
    chosen_range: BlockRange | None = None
    offset: torch.Tensor | None = None
    stored: StoredScales | None = None

    def __post_init__(self) -> None:
        wants = self.config.float_offset
        if wants and not isinstance(self.offset, torch.Tensor):
            raise ValueError(
                f"config {self.config.describe()!r} stores a float offset m per block: "
                "pass offset (float32, the scale's shape)"
            )
        if not wants and self.offset is not None:
            raise ValueError(
                f"config {self.config.describe()!r} has no float offset; offset must be None "
                "(use ZeroPoint.FLOAT_MIN for x_hat = s q + m)"
            )
        if self.offset is not None and tuple(self.offset.shape) != tuple(self.scale.shape):
            raise ValueError(
                f"offset shape {tuple(self.offset.shape)} differs from the scale's "
                f"{tuple(self.scale.shape)}"
            )
        if self.config.two_level and self.stored is None:
            raise ValueError(
                f"config {self.config.describe()!r} quantizes its scales: pass stored "
                "(the StoredScales of its second level)"
            )

    @property
    def shape(self) -> torch.Size:
        return self.codes.shape

    def to_ggml_bytes(self) -> bytes:
        """The block bytes llama.cpp stores for this tensor (its config a GGUF type:
        ``config.gguf_type``); ``formats.gguf_bytes``."""
        from .formats.gguf_bytes import to_ggml_bytes

        return to_ggml_bytes(self)

    @classmethod
    def from_ggml_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        type_name: str,
        shape: tuple[int, ...],
        *,
        signed_zero: bool = False,
    ) -> QuantizedTensor:
        """The tensor that GGUF block bytes ``data`` of type ``type_name`` (``"Q4_K"``) and
        ``shape`` store, read as llama.cpp reads them (``signed_zero``: FP4 code 8 stays
        OCP's ``-0``); ``formats.gguf_bytes``."""
        from .formats.gguf_bytes import from_ggml_bytes

        return from_ggml_bytes(data, type_name, shape, signed_zero=signed_zero)

    @property
    def n_blocks(self) -> int:
        return self.layout.n_blocks

    def scales_finite(self) -> bool:
        """Whether every block's scale (and offset) is finite. The lab's quantizers store
        finite ones except where a format's own scale overflows (Q8_0's fp16 ``d`` for values
        past ``65504 * 127``, as llama.cpp stores it); a file can hold any bits. Blocks that
        are not finite decode with IEEE arithmetic (``dequantize``)."""
        return _all_finite(self.scale) and (self.offset is None or _all_finite(self.offset))

    def _scale_col(self) -> torch.Tensor:
        return self.scale.reshape(-1, 1)

    def _zp_col(self) -> torch.Tensor:
        return self.zero_point.reshape(-1, 1).to(torch.float32)

    def _offset_col(self) -> torch.Tensor | None:
        return None if self.offset is None else self.offset.reshape(-1, 1).to(torch.float32)

    def dequantize(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """``r_hat = s (q - z) + m`` (linear; ``m`` only under ``ZeroPoint.FLOAT_MIN``) or
        ``s * value[q]`` (codebook): float32, input shape, saturated to float32's range where
        the block's scale and offset are finite (a block with a non-finite stored scale, a
        file's, decodes with IEEE arithmetic as the format's owner does: +-inf, NaN).
        A compiled kernel where ``kernels`` allows, else torch operators over pieces.

        ``out``: a contiguous float32 tensor of the input's shape on the codes' device,
        written and returned, so a caller that dequantizes again and again can reuse one
        buffer instead of a fresh full-size one each time (fresh memory is faulted in page
        by page). Raises ``TypeError``/``ValueError`` naming what does not fit."""
        if self.layout.tile is not None and self.config.format is not Format.INT:
            fast = self._dequantize_tiles(out)
            if fast is not None:
                return fast
        dest = None if out is None else self.layout.to_blocks(self._checked_out(out))
        codes = self.layout.to_blocks(self.codes)
        s = self._scale_col()
        if self.config.format is Format.INT:
            # int32 zero points subtract from float32 exactly (|z| <= 2^15)
            zp = self.zero_point.reshape(-1, 1) if self.config.has_zero_point else None
            m = self._offset_col()
            if m is not None and zp is not None and not bool((zp == 0).all()):
                # GGUF's min convention: s (q - qmin) + min (see the class docstring)
                fast = kernels.decode_int_offset(codes, s, zp, m, out=dest)
            else:
                fast = kernels.decode_int(codes, s, zp if m is None else None, m, out=dest)
                if m is not None:
                    zp = None
        else:
            zp = m = None
            table = codebook_for(self.config.format, codes.device).decode_table
            fast = kernels.decode_codebook(codes, s, table, out=dest)
        if fast is not None:
            self._unsaturate(fast, codes, s, zp, m)
            return self._into(out, self.layout.from_blocks(fast))
        blocks = dest if dest is not None else torch.empty(
            codes.shape, dtype=torch.float32, device=codes.device
        )
        if self.config.format is Format.INT:

            def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
                part = blocks[rows, cols]
                part.copy_(codes[rows, cols])
                if zp is not None:
                    part.sub_(zp[rows])
                part.mul_(s[rows])
                if m is not None:
                    part.add_(m[rows])
                part.clamp_(-_F32_MAX, _F32_MAX)

        else:

            def work(rows: slice, cols: slice, scratch: dict[str, torch.Tensor]) -> None:
                part = torch.mul(table[codes[rows, cols].long()], s[rows], out=blocks[rows, cols])
                part.clamp_(-_F32_MAX, _F32_MAX)

        for_each_piece(chunk_slices(codes), work)
        self._unsaturate(blocks, codes, s, zp, m)
        return self._into(out, self.layout.from_blocks(blocks))

    def _unsaturate(
        self,
        values: torch.Tensor,
        codes: torch.Tensor,
        s: torch.Tensor,
        zp: torch.Tensor | None,
        m: torch.Tensor | None,
    ) -> None:
        """Rewrite, in ``values`` ``[n_blocks, block]``, the blocks whose scale (or offset)
        is not finite with the same formula unsaturated: IEEE arithmetic, as the format's
        owner decodes such a block (``gguf.quants.dequantize`` of a Q8_0 block whose fp16
        ``d`` is inf gives +-inf, and NaN for code 0), not +-float32's maximum. The lab's
        own quantizers store finite scales only; a file can hold any bits. One sum over
        the ``n_blocks`` scales (and offsets), nothing more where it is finite."""
        # A sum is finite only if every term is (an inf or NaN term makes it inf or NaN),
        # and one reduction is a third of an elementwise isfinite plus any() (Q2_K's 1M
        # scales and 1M offsets: about 10 ms of a 37 ms dequantize). A finite tensor whose
        # sum overflows falls through to the exact check below.
        if math.isfinite(float(s.sum())) and (m is None or math.isfinite(float(m.sum()))):
            return
        bad = ~torch.isfinite(s.reshape(-1))
        if m is not None:
            bad |= ~torch.isfinite(m.reshape(-1))
        if not bool(bad.any()):
            return
        rows = bad.nonzero().flatten()
        q = codes[rows]
        if self.config.format is Format.INT:
            part = q.to(torch.float32)
            if zp is not None:
                part = part - zp[rows].to(torch.float32)
            part = part * s[rows]
            if m is not None:
                part = part + m[rows]
        else:
            table = codebook_for(self.config.format, codes.device).decode_table
            part = table[q.long()] * s[rows]
        values[rows] = part

    def _dequantize_tiles(self, out: torch.Tensor | None) -> torch.Tensor | None:
        """A codebook matrix in ``PerBlock`` tiles, dequantized by the compiled kernel on
        the matrix's own layout (codes ``[R/r, r, C/c, c]``, a view, scales ``[R/r, 1,
        C/c, 1]`` broadcast): the same formula on the same values as on the tiles' rows,
        without gathering the codes into tiles and the result back (a full-size float32
        copy); ``None``: the kernel cannot run, dequantize as for any layout."""
        (rows, cols), (r, c) = self.layout.shape, self.layout.tile
        grid = (rows // r, r, cols // c, c)
        dest = None if out is None else self._checked_out(out).view(grid)
        codes = self.codes.reshape(grid)
        s = self.scale.reshape(rows // r, 1, cols // c, 1)
        table = codebook_for(self.config.format, codes.device).decode_table
        fast = kernels.decode_codebook(codes, s, table, out=dest)
        return None if fast is None else self._into(out, fast.reshape(self.layout.shape))

    def _checked_out(self, out: object) -> torch.Tensor:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
        want = f"a contiguous float32 tensor of shape {list(self.shape)} on {self.codes.device}"
        if (
            out.dtype != torch.float32
            or tuple(out.shape) != tuple(self.shape)
            or out.device != self.codes.device
            or not out.is_contiguous()
        ):
            layout = "contiguous" if out.is_contiguous() else "non-contiguous"
            raise ValueError(
                f"out must be {want}, got a {layout} {str(out.dtype).removeprefix('torch.')} "
                f"tensor of shape {list(out.shape)} on {out.device}"
            )
        if out.requires_grad:
            raise ValueError("out must not require grad: dequantize writes into it in place")
        return out

    @staticmethod
    def _into(out: torch.Tensor | None, result: torch.Tensor) -> torch.Tensor:
        """``result`` itself without ``out``; else ``out``, holding ``result`` (written there
        already, or copied: a kernel that could not take ``out`` made its own)."""
        if out is None:
            return result
        if result.data_ptr() != out.data_ptr() or result.stride() != out.stride():
            out.copy_(result)
        return out

    def levels(self, block: int = 0) -> torch.Tensor:
        """Every value block ``block`` can dequantize to, ascending (float32, <= ``2^bits``)."""
        if not 0 <= block < self.n_blocks:
            raise ValueError(f"block {block} out of range: this tensor has {self.n_blocks} blocks")
        s = self.scale.reshape(-1)[block]
        if self.config.format is Format.INT:
            q = torch.arange(self.config.qmin, self.config.qmax + 1, device=s.device)
            z = self.zero_point.reshape(-1)[block] if self.config.has_zero_point else 0
            levels = (q - z).to(torch.float32) * s
            if self.offset is not None:
                levels = levels + self.offset.reshape(-1)[block]
        else:
            levels = codebook_for(self.config.format, s.device).values * s
        # a negative scale (GGUF Q4_0, Q3_K, Q6_K) lists its levels in descending order
        return levels.clamp_(-_F32_MAX, _F32_MAX).sort().values

    def representable_range(self) -> BlockRange:
        """Per block, the lowest and highest dequantized value, ``[n_blocks, 1]`` each."""
        cfg = self.config
        if cfg.format is Format.INT:
            m = self._offset_col()
            columns = [self._scale_col(), self._zp_col()] + ([] if m is None else [m])

            def ends(
                s: torch.Tensor, z: torch.Tensor, *m: torch.Tensor
            ) -> tuple[torch.Tensor, ...]:
                if not cfg.has_zero_point:
                    z = torch.zeros_like(z)
                lo, hi = s * (cfg.qmin - z), s * (cfg.qmax - z)
                if m:
                    lo, hi = lo + m[0], hi + m[0]
                lo, hi = torch.minimum(lo, hi), torch.maximum(lo, hi)  # negative scales
                return lo.clamp_(-_F32_MAX, _F32_MAX), hi.clamp_(-_F32_MAX, _F32_MAX)

        else:
            values = codebook_for(cfg.format, self.scale.device).values
            columns = [self._scale_col()]

            def ends(s: torch.Tensor) -> tuple[torch.Tensor, ...]:
                lo, hi = s * values[0], s * values[-1]
                lo, hi = torch.minimum(lo, hi), torch.maximum(lo, hi)  # negative scales
                return lo.clamp_(-_F32_MAX, _F32_MAX), hi.clamp_(-_F32_MAX, _F32_MAX)

        # per-block columns in pieces below torch's parallel grain (see ``chunks``)
        lo, hi = map_rows(ends, *columns)
        return BlockRange(lo, hi)


def _all_finite(t: torch.Tensor) -> bool:
    """Whether every element of ``t`` is finite, from its least and greatest elements
    (either is NaN where any element is, +-inf where one is): one reduction without the
    boolean tensor ``isfinite`` writes, which cost about a copy of a 4096 x 4096 input
    over NVFP4's 1M block scales."""
    if t.numel() == 0 or not t.is_floating_point():
        return True
    if t.element_size() == 1:  # float8: no aminmax (nor isfinite) kernel
        t = t.float()
    lo, hi = torch.aminmax(t)
    return bool(torch.isfinite(lo) & torch.isfinite(hi))
