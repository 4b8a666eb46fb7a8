"""How much of an OCP MX format's error on a tensor comes from values its block scale clips.

An MX block of 32 values stores one E8M0 scale ``2^e`` with ``e = floor(log2(amax)) - emax``
(``emax`` the element format's largest exponent: 2 for FP4 E2M1, whose largest level is
``6 = 1.5 * 2^2``; OCP MX v1.0 section 6.3, torchao's ``ScaleCalculationMode.FLOOR``,
llama.cpp's ``quantize_row_mxfp4_ref``). Rounding the exponent down puts ``amax / 2^e`` in
``[4, 8)`` for FP4, so a block's largest values above ``6 * 2^e`` clip to ``6 * 2^e``: an
error of up to a quarter of ``amax`` on the values that matter most, which a scale per
block fitted to ``amax`` (Q4_K, NVFP4's E4M3) never makes. Computed, not assumed: a value
is counted as clipped when its magnitude is above its block's largest representable
level (``QuantizedTensor.representable_range``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from quant_core import PerGroup, PowerOfTwoScales, QuantConfig, quantize

__all__ = ["MXClipping", "is_mx", "mx_clipping"]


@dataclass(frozen=True)
class MXClipping:
    """``clipped`` of ``total`` weights lie above their block's largest level (in
    ``blocks`` of ``n_blocks`` blocks of ``block_len``); ``level``: that level in units of
    the block's scale ``2^e`` (6 for FP4 E2M1), ``emax = floor(log2(level))``;
    ``output_mse``: the weight-only output error ``mean((X (W - W_hat)^T)^2)``,
    ``clipped_mse``: the same with only the clipped weights' errors kept."""

    clipped: int
    total: int
    blocks: int
    n_blocks: int
    block_len: int
    level: float
    output_mse: float
    clipped_mse: float

    @property
    def matters(self) -> bool:
        """Whether the clipped weights make a tenth or more of the output error: below
        that (MXINT8's 127.x clipped to 127) a note would explain nothing."""
        return self.output_mse > 0 and self.clipped_mse >= 0.1 * self.output_mse

    @property
    def emax(self) -> int:
        return math.floor(math.log2(self.level))

    def describe(self, name: str) -> str:
        """Markdown for the layer page (numbers computed, ``name`` the format's name)."""
        pct = 100 * self.clipped / max(self.total, 1)
        lvl = f"{self.level:g}"
        share = 100 * self.clipped_mse / self.output_mse if self.output_mse > 0 else 0.0
        return (
            f"**{name} clips weights.** {self.clipped:,} of {self.total:,} weights "
            f"({pct:.2f} %, in {self.blocks:,} of {self.n_blocks:,} blocks of "
            f"{self.block_len}) lie above their block's largest level {lvl}·2^e and are "
            f"stored as {lvl}·2^e: the OCP MX scale 2^e is a power of two rounded down, "
            f"e = floor(log2(block max |w|)) − {self.emax}, so a block's largest magnitude "
            f"can reach {2 ** (self.emax + 1):g}·2^e. Those weights' errors alone give an "
            f"output MSE of {self.clipped_mse:.4g} ({share:.0f} % of the weight-only output "
            f"MSE, {self.output_mse:.4g})."
        )


def is_mx(cfg: object) -> bool:
    """Whether ``cfg`` stores an OCP MX (E8M0, power-of-two) scale per group."""
    return (
        isinstance(cfg, QuantConfig)
        and isinstance(cfg.scale_format, PowerOfTwoScales)
        and isinstance(cfg.granularity, PerGroup)
    )


def mx_clipping(w: torch.Tensor, x: torch.Tensor, cfg: QuantConfig) -> MXClipping | None:
    """The clipping of a weight ``w`` ``[out, in]`` under ``cfg`` and what it costs the
    layer's output on inputs ``x`` ``[tokens, in]``; ``None`` when ``cfg`` is not an MX
    format or clips nothing. Blocks are the groups of ``cfg.granularity`` along ``in``, in
    row-major order (as ``scale``)."""
    if not is_mx(cfg):
        return None
    w = w.detach().to(torch.float32)
    q = quantize(w, cfg)
    g = cfg.granularity.group_size
    blocks = w.reshape(-1, g)
    rng = q.representable_range()
    top = torch.maximum(rng.lo.abs(), rng.hi.abs()).reshape(-1, 1)
    over = blocks.abs() > top
    if not bool(over.any()):
        return None
    scale = q.scale.reshape(-1, 1).to(torch.float32)
    live = scale > 0
    level = float((top[live] / scale[live]).max())
    diff = w - q.dequantize().to(torch.float32)
    x = x.detach().to(torch.float32)
    clipped_diff = torch.where(over.reshape(w.shape), diff, torch.zeros_like(diff))
    return MXClipping(
        clipped=int(over.sum()),
        total=blocks.numel(),
        blocks=int(over.any(dim=1).sum()),
        n_blocks=blocks.shape[0],
        block_len=g,
        level=level,
        output_mse=float((x @ diff.T).square().mean(dtype=torch.float64)),
        clipped_mse=float((x @ clipped_diff.T).square().mean(dtype=torch.float64)),
    )
