"""GPTQ (Frantar et al., 2022): round one column at a time and push its error onto the
columns not yet quantized, weighted by the inverse Hessian of the layer's output error.

For a linear layer ``Y = X Wᵀ`` with calibration inputs ``X [tokens, in]``, the output
error of a weight change ``ΔW`` is ``||X ΔWᵀ||² = tr(ΔW H ΔWᵀ) / 2`` per token with
``H = 2 XᵀX / tokens`` (the mean over tokens, as the reference accumulates it; scaling
``H`` changes nothing below). Steps, with ``U`` the upper Cholesky factor of ``H⁻¹``
(``H⁻¹ = Uᵀ U``):

1. dead columns (``H_jj = 0``: an input that is always 0) get ``H_jj = 1`` and ``W_:j = 0``;
2. dampening: ``H += λ I`` with ``λ = damp · mean(diag H)`` (default 1%);
3. for each column ``j``, in blocks of ``block_size`` (lazy batch updates):
   ``q_j = Q(w_j)`` on the column's grid, ``e_j = (w_j - q_j) / U_jj``, and
   ``W_:,k -= e_j U_jk`` for every later column ``k`` (inside the block at once, after the
   block for the columns beyond it: ``W_:,B' -= E U_B,B'``).

Grids are those of round-to-nearest (``quantize``) under the same config: per tensor and
per channel (one grid per output row) from the original weight; per group, each group's
grid when its first column is reached, from its columns as ``GPTQOptions.group_grid``
says: ``GroupGrid.BLOCK_START`` (the default, as the reference code does) as they were when
the current lazy block began, ``GroupGrid.CURRENT`` as they are now (the error of the
block's columns already rounded pushed onto them too); ``PerChannel(axis=1)`` (one grid per
input column) from that column when it is reached. With ``act_order`` (columns in order of
decreasing ``H_jj``) and groups, the groups' grids are static: computed from the weight
before the permutation (after the dead-column step), so each group still holds
consecutive original columns (and both ``group_grid`` settings agree).

The result is a ``QuantizedTensor`` built by ``quantize(w_seen, cfg, ranges=grids)``,
where ``w_seen`` holds each column as it was when rounded: its ``dequantize()`` is exactly
the weight GPTQ's error feedback used.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import torch

from .algo_checks import check_calibration, check_config, check_weight, emit
from .config import Mode, PerChannel, PerGroup, PerTensor, QuantConfig
from .granularity import layout_for
from .hessian import DEFAULT_DAMP, gptq_hessian, inverse_hessian_factor
from .quantize import QuantizedTensor, quantize
from .ranges import BlockRange

__all__ = ["GPTQOptions", "GPTQResult", "GroupGrid", "gptq_hessian", "gptq_quantize"]

_F32_MAX = torch.finfo(torch.float32).max


class GroupGrid(enum.Enum):
    """Which values of a group's columns GPTQ fits the group's grid to, when the group's
    first column ``j`` is reached, in the lazy block ``[i1, i2)`` that holds it.

    ``BLOCK_START`` (the default): the columns as they were when the block began, with
    the error of every earlier block pushed onto them but not that of the block's columns
    ``i1 .. j-1``. The reference code does this (IST-DASLab's ``gptq``, reused by AutoGPTQ
    and GPTQModel: ``find_params(W[:, j:j+g])`` reads ``W``, which the block's updates, made
    on a copy ``W1``, reach only when the block ends), so codes match the tools people use.
    ``CURRENT``: the columns as they are at ``j``, every update so far included (the
    paper's algorithm without lazy blocks; this library's only convention before).

    Example: group 32, block 128. The groups starting at columns 0, 128, ... begin a
    block and get the same grid either way; the group of columns 32-63 is fitted, under
    ``BLOCK_START``, on those columns before columns 0-31 of its block pushed their error
    onto them, under ``CURRENT`` after. Over MiniLM's 37 layers (int4 asymmetric, damp
    0.01, the bundled calibration sentences) 29.5% of the codes differ at group 32, none
    at group 128. Under ``BLOCK_START`` the result depends on ``GPTQOptions.block_size``
    (under ``CURRENT`` it does not)."""

    BLOCK_START = "block_start"
    CURRENT = "current"


@dataclass(frozen=True)
class GPTQOptions:
    """``damp``: relative dampening ``λ / mean(diag H)`` (>= 0; default 0.01, the paper's).
    With few calibration tokens per input feature the paper's 1% overfits: on MiniLM with
    32 sentences (568 tokens for 384 or 1536 inputs) 6 of 37 layers then have a higher
    held-out output error than RTN, while ``damp=0.3`` (with ``act_order``) lowers it on
    every layer (``benchmarks/algorithms.py``).
    ``block_size``: columns per lazy batch update (>= 1; 128 as in the reference). Beyond
    floating-point rounding, the result depends on it only through per-group grids under
    ``GroupGrid.BLOCK_START``.
    ``act_order``: quantize columns in order of decreasing ``H_jj`` (most active inputs
    first); with groups, the grids are static (see the module docstring).
    ``group_grid``: which values a group's grid is fitted to (``GroupGrid``; the reference
    code's ``BLOCK_START`` by default)."""

    damp: float = DEFAULT_DAMP
    block_size: int = 128
    act_order: bool = False
    group_grid: GroupGrid = GroupGrid.BLOCK_START

    def __post_init__(self) -> None:
        if isinstance(self.damp, bool) or not isinstance(self.damp, int | float):
            raise TypeError(f"damp must be a number, got {self.damp!r}")
        if not (math.isfinite(self.damp) and self.damp >= 0):
            raise ValueError(f"damp={self.damp} must be finite and >= 0")
        if isinstance(self.block_size, bool) or not isinstance(self.block_size, int):
            raise TypeError(f"block_size must be an int, got {self.block_size!r}")
        if self.block_size < 1:
            raise ValueError(f"block_size={self.block_size} must be >= 1")
        if not isinstance(self.act_order, bool):
            raise TypeError(f"act_order must be a bool, got {self.act_order!r}")
        if not isinstance(self.group_grid, GroupGrid):
            raise TypeError(f"group_grid must be a GroupGrid, got {self.group_grid!r}")


@dataclass(frozen=True, eq=False)
class GPTQResult:
    """What ``gptq_quantize`` returns.

    ``quantized``: codes, scales and zero points in ``quantize``'s layout.
    ``damp``: the relative dampening finally used (larger than asked when the Cholesky
    factorisation needed retries), ``damp_absolute`` the ``λ`` added to ``diag H``.
    ``n_tokens``: calibration rows; ``dead_columns``: inputs that were always 0.
    ``permutation``: the column order under ``act_order`` (int64 ``[in]``), else ``None``.
    ``proxy_loss``: ``Σ_j ||w_j - q_j||² / (2 U_jj²)``, GPTQ's own estimate of the added
    output error (the reference's "error"). ``warnings``: messages also raised as
    ``AlgorithmWarning``.
    """

    quantized: QuantizedTensor
    damp: float
    damp_absolute: float
    n_tokens: int
    dead_columns: int
    permutation: torch.Tensor | None
    proxy_loss: float
    warnings: tuple[str, ...]


def _row_config(cfg: QuantConfig) -> QuantConfig:
    """The config that gives a ``[out, cols]`` piece one grid per row, as ``PerGroup`` and
    ``PerChannel(0)`` give each row of their blocks."""
    return replace(cfg, granularity=PerChannel(axis=0))


def _grid(piece: torch.Tensor, cfg: QuantConfig) -> tuple[torch.Tensor, ...]:
    """Scale, zero point, float offset (float32, one per block of ``piece`` under ``cfg``;
    the offset is 0 but under ``ZeroPoint.FLOAT_MIN``) and the range ``lo``/``hi`` that
    ``quantize`` fits to ``piece``."""
    qt = quantize(piece, cfg)
    rng = qt.chosen_range
    if rng is None:  # quantize always records it
        raise RuntimeError("quantize returned no chosen_range")
    scale = qt.scale.reshape(-1)
    offset = torch.zeros_like(scale) if qt.offset is None else qt.offset.reshape(-1)
    return (
        scale,
        qt.zero_point.reshape(-1).to(torch.float32),
        offset,
        rng.lo.reshape(-1),
        rng.hi.reshape(-1),
    )


def _fake_quant(
    w32: torch.Tensor, s: torch.Tensor, z: torch.Tensor, m: torch.Tensor, cfg: QuantConfig
) -> torch.Tensor:
    """Dequantized values of one column with ``quantize``'s float32 arithmetic, op for op,
    so they are bit-identical to ``quantize(...).dequantize()``: ``q = clamp(round(w/s + z))``
    and ``w_hat = s (q - z)``, or under ``ZeroPoint.FLOAT_MIN`` ``q = clamp(round((w - m)/s))``
    and ``w_hat = s q + m``."""
    if cfg.float_offset:
        v = torch.sub(w32, m).div_(s).round_().clamp_(cfg.qmin, cfg.qmax)
        return v.mul_(s).add_(m).clamp_(-_F32_MAX, _F32_MAX)
    v = torch.div(w32, s)
    asym = cfg.mode is Mode.ASYMMETRIC
    if asym:
        v.add_(z)
    v.round_().clamp_(cfg.qmin, cfg.qmax)
    if asym:
        v.sub_(z)
    return v.mul_(s).clamp_(-_F32_MAX, _F32_MAX)


def _check_granularity(cfg: QuantConfig, shape: tuple[int, int]) -> str:
    """``"tensor"``, ``"rows"``, ``"columns"`` or ``"groups"``: how the weight's grids run."""
    layout = layout_for(shape, cfg.granularity)  # raises for a group size not dividing in
    gran = cfg.granularity
    if isinstance(gran, PerTensor):
        return "tensor"
    if isinstance(gran, PerGroup):
        return "groups"
    return "rows" if layout.axis == 0 else "columns"


def gptq_quantize(
    w: torch.Tensor,
    calibration: torch.Tensor,
    cfg: QuantConfig,
    options: GPTQOptions | None = None,
) -> GPTQResult:
    """GPTQ-quantize a linear weight ``w [out, in]`` with calibration inputs
    ``calibration [tokens, in]`` (the layer's inputs) under an integer ``cfg``.

    Any bit width, both modes, every range method and granularity (the grids are
    ``quantize``'s; see the module docstring). Runs on ``w``'s device; ``H``, its Cholesky
    factors and the error feedback are float64, rounding is float32 as in ``quantize``.
    Fewer tokens than input features warns (``H`` is then singular and only the dampening
    makes it invertible); a Hessian that is not positive definite gets 10x more dampening,
    a few times, with a warning. Raises ``ValueError`` for a non-integer format,
    stochastic rounding or mismatched shapes.
    """
    w = check_weight(w)
    cfg = check_config(cfg, "GPTQ", integer_only=True)
    options = GPTQOptions() if options is None else options
    if not isinstance(options, GPTQOptions):
        raise TypeError(f"options must be GPTQOptions, got {type(options).__name__}")
    out_features, in_features = w.shape
    x = check_calibration(calibration, in_features)
    kind = _check_granularity(cfg, (out_features, in_features))
    messages: list[str] = []
    device = w.device
    n_tokens = x.shape[0]
    if n_tokens < in_features:
        emit(
            messages,
            f"GPTQ: {n_tokens} calibration tokens for {in_features} input features: "
            f"H = 2XᵀX/n has rank at most {n_tokens} < {in_features}, so only the dampening "
            "(damp) makes it invertible; calibrate on more text for a better Hessian",
        )

    h = gptq_hessian(x.to(device))
    # The weight transposed, [in, out]: column j of W is row j, contiguous, so the
    # per-column work and the rank-1 updates touch contiguous memory.
    wt = w.detach().to(torch.float64).T.contiguous()
    grid_rows = _row_config(cfg)
    # Per tensor and per row, the grid comes from the weight as given (the reference fits
    # it before the dead-column step).
    fixed = None
    if kind == "tensor":
        fixed = _grid(w.detach().to(torch.float32), cfg)
    elif kind == "rows":
        fixed = _grid(w.detach().to(torch.float32), grid_rows)

    dead = torch.diagonal(h) == 0
    n_dead = int(dead.sum())
    if n_dead:
        h[dead, dead] = 1.0
        wt[dead] = 0.0

    g = cfg.granularity.group_size if isinstance(cfg.granularity, PerGroup) else 0
    n_groups = in_features // g if g else 0
    static = None
    if kind == "groups" and options.act_order:
        pieces = [
            _grid(wt[k * g : (k + 1) * g].T.to(torch.float32), grid_rows) for k in range(n_groups)
        ]
        static = tuple(torch.stack([p[i] for p in pieces], dim=1) for i in range(5))

    perm = None
    if options.act_order:
        perm = torch.argsort(torch.diagonal(h), descending=True, stable=True)
        wt = wt[perm]
        h = h[perm][:, perm]
    u, damp_used, lam = inverse_hessian_factor(h, float(options.damp), messages)
    del h

    # Row j (in quantization order): the float32 values column j was rounded from, and its
    # dequantized values. The grids' ranges: per group and row, or per input column.
    seen = torch.empty((in_features, out_features), dtype=torch.float32, device=device)
    q_all = torch.empty_like(seen)
    grid_lo = grid_hi = torch.empty(0)
    if kind == "groups":
        grid_lo = torch.empty((out_features, n_groups), dtype=torch.float32, device=device)
        grid_hi = torch.empty_like(grid_lo)
    elif kind == "columns":
        grid_lo = torch.empty((in_features,), dtype=torch.float32, device=device)
        grid_hi = torch.empty_like(grid_lo)
    grid_column = replace(cfg, granularity=PerTensor())
    s = z = m = torch.empty(0)
    if fixed is not None:
        s, z, m = (t.expand(out_features) for t in fixed[:3])
    perm_list = perm.tolist() if perm is not None else None
    err_sq = torch.zeros((), dtype=torch.float64, device=device)
    bs = options.block_size
    at_block_start = (
        kind == "groups" and static is None and options.group_grid is GroupGrid.BLOCK_START
    )
    for i1 in range(0, in_features, bs):
        i2 = min(i1 + bs, in_features)
        w1 = wt[i1:i2]  # a view: the block is updated in place
        start1 = w1.clone() if at_block_start else None  # the block as it began
        u1 = u[i1:i2, i1:i2]
        err1 = torch.zeros_like(w1)
        for i in range(i2 - i1):
            j = i1 + i
            if static is not None:
                k = (perm_list[j] if perm_list is not None else j) // g
                s, z, m = static[0][:, k], static[1][:, k], static[2][:, k]
            elif kind == "groups" and j % g == 0:
                if start1 is not None:
                    # The columns past the block get this block's updates only when it ends.
                    piece = start1[i : i + g]
                    if j + g > i2:
                        piece = torch.cat([start1[i:], wt[i2 : j + g]])
                else:
                    piece = w1[i : i + g]
                    if j + g > i2:  # past this block: add the block's pending updates
                        rest = wt[i2 : j + g] - u[i1:j, i2 : j + g].T @ err1[:i]
                        piece = torch.cat([w1[i:], rest])
                s, z, m, lo, hi = _grid(piece.T.to(torch.float32), grid_rows)
                grid_lo[:, j // g], grid_hi[:, j // g] = lo, hi
            elif kind == "columns":
                one = _grid(w1[i : i + 1].T.to(torch.float32), grid_column)
                pos = perm_list[j] if perm_list is not None else j
                grid_lo[pos], grid_hi[pos] = one[3][0], one[4][0]
                s, z, m = (t.expand(out_features) for t in one[:3])
            col = w1[i]
            col32 = seen[j]
            col32.copy_(col)
            deq = _fake_quant(col32, s, z, m, cfg)
            q_all[j] = deq
            e = torch.sub(col, deq, out=err1[i]).div_(u1[i, i])
            if i + 1 < i2 - i1:
                w1[i + 1 :].addr_(u1[i, i + 1 :], e, alpha=-1.0)
        err_sq += err1.square().sum()
        if i2 < in_features:
            wt[i2:].addmm_(u[i1:i2, i2:].T, err1, alpha=-1.0)

    if perm is not None:
        inverse = torch.argsort(perm)
        seen, q_all = seen[inverse], q_all[inverse]
    if static is not None:
        grid_lo, grid_hi = static[3], static[4]
    if fixed is not None:
        grid_lo, grid_hi = fixed[3], fixed[4]
    ranges = BlockRange(grid_lo.reshape(-1, 1), grid_hi.reshape(-1, 1))
    qt = quantize(seen.T, cfg, ranges=ranges)
    if not torch.equal(qt.dequantize(), q_all.T):
        # The loop's rounding mirrors quantize's; a mismatch is a bug here, never bad input.
        raise RuntimeError("GPTQ: per-column rounding disagrees with quantize(ranges=...)")
    return GPTQResult(
        quantized=replace(qt, input_dtype=w.dtype),
        damp=damp_used,
        damp_absolute=lam,
        n_tokens=n_tokens,
        dead_columns=n_dead,
        permutation=perm,
        proxy_loss=float(err_sq) / 2,
        warnings=tuple(messages),
    )
