"""HQQ (Badri & Shaji, 2023): half-quadratic optimisation of a block's grid, data-free,
starting from round-to-nearest's.

HQQ minimises ``||W - W_r||_p^p`` with ``W_r = s (Q(W) - z)`` and
``Q(W) = clamp(round(W / s + z), qmin, qmax)``; ``p < 1`` is a sparsity-promoting norm that
lets a few outliers keep large errors instead of dragging the grid. Splitting the error
off as ``W_e`` and alternating, with ``β`` growing by ``κ`` each iteration:

1. ``W_e = shrink_p(W - W_r, β) = sign(e) max(|e| - |e|^(p-1) / β, 0)`` with ``e = W - W_r``
   (generalized soft-thresholding: the proximal step of the ``l_p`` norm);
2. a closed-form least-squares update of the grid so that ``W_r`` fits ``W - W_e``;
3. ``β = κ β``.

The paper updates the float zero point with ``s`` fixed:
``z = mean_block(Q(W) - (W - W_e) / s)``. It runs in code units here (``R = W / s + z - Q(W)``):
``z ← z - mean_block(clamp(R, -t, t))`` with ``t = s^(p-2) |R|^(p-1) / β``, the same update
in exact arithmetic with fewer passes over the weight. This is the solver under
``ZeroPoint.FLOAT_MIN``, whose float offset stores HQQ's zero point exactly as the core
stores float zero points: ``m = -s z`` (rounded to the scale dtype, the codes recomputed
from it).

An integer zero point (``INCLUDE_ZERO``, ``COURSE_CLAMP``) cannot hold HQQ's float ``z``,
and rounding it back undoes the optimisation (its moves are below half a code: measured on
MiniLM, the rounded ``z`` equals RTN's in 99.9% of blocks). So there ``z`` keeps RTN's
integer value (for ``INCLUDE_ZERO``, the code of 0) and the same half-quadratic solver
re-fits the scale instead: ``s = <W - W_e, q - z> / ||q - z||²`` per block, i.e.
``s ← s + <q - z, clamp(e, -t, t)> / ||q - z||²`` with ``t = |e|^(p-1) / β``. Symmetric grids
(``z = 0``) use this scale solver too. Scales are rounded to the scale dtype every step.

As the reference's early-stopping solver, each iterate's error ``mean|W - W_r|`` over the
whole tensor is measured first, and the run stops (keeping the best iterate) when it no
longer falls; iterate 0 is round-to-nearest's grid, so HQQ's mean absolute error is never
above RTN's under the same config.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

import torch

from .algo_checks import check_config, emit
from .config import Mode, QuantConfig, ScaleDtype
from .granularity import layout_for
from .quantize import QuantizedTensor, quantize
from .validation import to_float32

__all__ = ["HQQOptions", "HQQResult", "HQQVariable", "hqq_quantize"]

_F32_MAX = torch.finfo(torch.float32).max
_SCALE_DTYPES = {ScaleDtype.FP16: torch.float16, ScaleDtype.BF16: torch.bfloat16}


@dataclass(frozen=True)
class HQQOptions:
    """The solver's parameters, defaults as the reference's: ``lp_norm`` ``p`` in
    ``(0, 1]``; ``beta`` (> 0) the initial penalty, multiplied by ``kappa`` (> 1) after
    each iteration; ``iters`` (>= 1) zero-point updates at most; ``early_stop``: stop as
    soon as an iterate's error does not fall (else run all ``iters``; the best iterate is
    kept either way)."""

    lp_norm: float = 0.7
    beta: float = 10.0
    kappa: float = 1.01
    iters: int = 20
    early_stop: bool = True

    def __post_init__(self) -> None:
        for name in ("lp_norm", "beta", "kappa"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise TypeError(f"{name} must be a number, got {v!r}")
            if not math.isfinite(v):
                raise ValueError(f"{name}={v} must be finite")
        if not 0 < self.lp_norm <= 1:
            raise ValueError(f"lp_norm={self.lp_norm} must be in (0, 1]")
        if not self.beta > 0:
            raise ValueError(f"beta={self.beta} must be > 0")
        if not self.kappa > 1:
            raise ValueError(f"kappa={self.kappa} must be > 1")
        if isinstance(self.iters, bool) or not isinstance(self.iters, int):
            raise TypeError(f"iters must be an int, got {self.iters!r}")
        if self.iters < 1:
            raise ValueError(f"iters={self.iters} must be >= 1")
        if not isinstance(self.early_stop, bool):
            raise TypeError(f"early_stop must be a bool, got {self.early_stop!r}")


class HQQVariable(enum.Enum):
    """What the half-quadratic solver updates: ZERO_POINT (the paper's, a float zero
    point; under ``ZeroPoint.FLOAT_MIN``) or SCALE (integer or no zero point)."""

    ZERO_POINT = "zero_point"
    SCALE = "scale"


@dataclass(frozen=True, eq=False)
class HQQResult:
    """What ``hqq_quantize`` returns.

    ``quantized``: codes, scales and zero points (or float offsets under
    ``ZeroPoint.FLOAT_MIN``) in ``quantize``'s layout; ``quantized.chosen_range`` is the
    grid's representable range (no range was fitted).
    ``variable``: what the solver updated (see ``HQQVariable``).
    ``iterations``: updates in the kept iterate (0: RTN's grid was best).
    ``error_trace``: ``mean|W - W_r|`` of every iterate measured, ``error_trace[0]`` being
    RTN's; the kept one is ``error_trace[iterations]``, except when storing the best
    iterate (offsets and scales rounded to the scale dtype) made it worse than RTN, where
    RTN's grid is kept, ``iterations`` is 0 and ``warnings`` says so.
    ``stopped_early``: the run ended because the error stopped falling before ``iters``
    updates.
    ``zero_float``: the kept zero point per block (``[n_blocks]``, code units,
    ``W_r = s (q - z)``; integer-valued but under the zero-point solver) before storage.
    """

    quantized: QuantizedTensor
    variable: HQQVariable
    iterations: int
    error_trace: tuple[float, ...]
    stopped_early: bool
    zero_float: torch.Tensor
    warnings: tuple[str, ...] = ()


def _round_to_scale_dtype(m: torch.Tensor, scale_dtype: ScaleDtype) -> torch.Tensor:
    """``m`` rounded to the scale dtype (saturating), as ``quantize`` stores offsets."""
    dtype = _SCALE_DTYPES.get(scale_dtype)
    if dtype is None:
        return m
    info = torch.finfo(dtype)
    return m.clamp(-info.max, info.max).to(dtype).to(torch.float32)


def _stored_scale(s: torch.Tensor, previous: torch.Tensor, scale_dtype: ScaleDtype) -> torch.Tensor:
    """A solver scale as ``quantize`` would store it: positive (else the previous one kept)
    and rounded to the scale dtype (down to its smallest subnormal, up to its max)."""
    s = torch.where(s > 0, s, previous)
    dtype = _SCALE_DTYPES.get(scale_dtype)
    if dtype is None:
        return s
    info = torch.finfo(dtype)
    return s.clamp(min=info.tiny * info.eps, max=info.max).to(dtype).to(torch.float32)


def _mean_abs_error(blocks: torch.Tensor, approx: torch.Tensor) -> float:
    return float((blocks - approx).abs().sum(dtype=torch.float64)) / blocks.numel()


class _Run:
    """The early-stopping loop shared by both solvers: keep the best iterate, stop when the
    error does not fall (or after ``iters`` updates)."""

    def __init__(self, options: HQQOptions) -> None:
        self.options = options
        self.trace: list[float] = []
        self.best_err = math.inf
        self.best_it = 0
        self.stopped = False

    def accept(self, err: float, it: int) -> tuple[bool, bool]:
        """``(is_best, go_on)`` for iterate ``it`` of error ``err``."""
        self.trace.append(err)
        if err < self.best_err:
            self.best_err, self.best_it = err, it
            return True, it < self.options.iters
        if self.options.early_stop:
            self.stopped = True
            return False, False
        return False, it < self.options.iters


def _solve_zero(
    blocks: torch.Tensor, s: torch.Tensor, z: torch.Tensor, cfg: QuantConfig, run: _Run
) -> torch.Tensor:
    """The paper's solver: the float zero point (``[n_blocks, 1]``) of the best iterate."""
    v = blocks / s
    p = float(run.options.lp_norm)
    c = s.pow(p - 2.0) / float(run.options.beta)  # t = c |R|^(p-1), c shrinking by kappa
    numel = blocks.numel()
    best = z
    for it in range(run.options.iters + 1):
        r = v + z
        r.sub_(torch.round(r).clamp_(cfg.qmin, cfg.qmax))
        total = (r.abs().sum(dim=1, dtype=torch.float64) * s.reshape(-1)).sum()
        is_best, go_on = run.accept(float(total) / numel, it)
        if is_best:
            best = z
        if not go_on:
            break
        t = r.abs().pow_(p - 1.0).mul_(c)
        # |R|^(p-1) is inf at R = 0, where the clamp leaves R = 0 alone.
        z = z - torch.minimum(torch.maximum(r, t.neg()), t).mean(dim=1, keepdim=True)
        if cfg.scale_dtype is not ScaleDtype.FP32:
            # Keep only zero points whose offset m = -s z the scale dtype can store.
            z = -_round_to_scale_dtype(-s * z, cfg.scale_dtype) / s
        c = c / float(run.options.kappa)
    return best


def _solve_scale(
    blocks: torch.Tensor, s: torch.Tensor, z: torch.Tensor, cfg: QuantConfig, run: _Run
) -> torch.Tensor:
    """The scale solver (integer or no zero point): the scale (``[n_blocks, 1]``) of the
    best iterate, ``z`` fixed."""
    p = float(run.options.lp_norm)
    inv_beta = 1.0 / float(run.options.beta)
    asym = cfg.mode is Mode.ASYMMETRIC
    numel = blocks.numel()
    best = s
    for it in range(run.options.iters + 1):
        # q - z with quantize's op order (div, add z, round, clamp), then e = W - s (q - z).
        qz = torch.div(blocks, s)
        if asym:
            qz.add_(z)
        qz.round_().clamp_(cfg.qmin, cfg.qmax)
        if asym:
            qz.sub_(z)
        e = torch.sub(blocks, qz * s)
        is_best, go_on = run.accept(float(e.abs().sum(dtype=torch.float64)) / numel, it)
        if is_best:
            best = s
        if not go_on:
            break
        t = e.abs().pow_(p - 1.0).mul_(inv_beta)
        d = torch.minimum(torch.maximum(e, t.neg()), t)
        den = qz.square().sum(dim=1, keepdim=True)
        step = (qz * d).sum(dim=1, keepdim=True) / den.clamp(min=1.0)
        s = _stored_scale(s + step, s, cfg.scale_dtype)
        inv_beta /= float(run.options.kappa)
    return best


def hqq_quantize(w: torch.Tensor, cfg: QuantConfig, options: HQQOptions | None = None) -> HQQResult:
    """HQQ-quantize ``w`` (any float tensor, 1-D or more; a linear weight is ``[out, in]``)
    under an integer ``cfg`` (either mode, every granularity, range method and zero-point
    convention; see the module docstring), data-free.

    Raises ``ValueError`` for a non-integer format and stochastic rounding.
    """
    cfg = check_config(cfg, "HQQ", integer_only=True)
    options = HQQOptions() if options is None else options
    if not isinstance(options, HQQOptions):
        raise TypeError(f"options must be HQQOptions, got {type(options).__name__}")
    init = quantize(w, cfg)  # validates w; RTN's grid is iterate 0
    layout = layout_for(w.shape, cfg.granularity)
    blocks = layout.to_blocks(to_float32(w, "w"))
    s = init.scale.reshape(-1, 1)
    run = _Run(options)
    offset = None
    if cfg.float_offset:
        if init.offset is None:
            raise RuntimeError("quantize returned no offset under ZeroPoint.FLOAT_MIN")
        variable = HQQVariable.ZERO_POINT
        z = _solve_zero(blocks, s, -init.offset.reshape(-1, 1) / s, cfg, run)
        m = _round_to_scale_dtype(-s * z, cfg.scale_dtype)
        q = torch.sub(blocks, m).div_(s)
        zero = torch.zeros(s.shape, dtype=torch.int32, device=s.device)
        offset = m.reshape(layout.scale_shape)
    else:
        variable = HQQVariable.SCALE
        z = init.zero_point.reshape(-1, 1).to(torch.float32)
        s = _solve_scale(blocks, s, z, cfg, run)
        q = torch.div(blocks, s)
        if cfg.mode is Mode.ASYMMETRIC:
            q.add_(z)
        zero = init.zero_point.reshape(-1, 1)
    codes = q.round_().clamp_(cfg.qmin, cfg.qmax).to(init.codes.dtype)
    qt = QuantizedTensor(
        codes=layout.from_blocks(codes),
        scale=s.reshape(layout.scale_shape),
        zero_point=zero.reshape(layout.scale_shape),
        config=cfg,
        layout=layout,
        input_dtype=w.dtype,
        offset=offset,
    )
    iterations = run.best_it
    messages: list[str] = []
    if iterations == 0:
        # RTN's grid was best: return it as quantize stored it (rebuilding it from the
        # solver's float zero point would round the offset a second time).
        qt = init
    else:
        err = _mean_abs_error(blocks, layout.to_blocks(qt.dequantize()))
        rtn_err = _mean_abs_error(blocks, layout.to_blocks(init.dequantize()))
        if err > rtn_err:
            # Storing the solver's grid (codes recomputed from the stored offset) costs a
            # float rounding; never return worse than RTN's own grid.
            emit(
                messages,
                f"HQQ's best iterate ({iterations}, mean |error| {run.best_err:.3g}) came "
                f"out at {err:.3g} once stored in the scale dtype, above RTN's {rtn_err:.3g}: "
                "RTN's grid is kept",
            )
            qt, iterations = init, 0
    # No range was fitted: the grid came from the solver, so record what it spans.
    qt = replace(qt, chosen_range=qt.representable_range())
    return HQQResult(
        quantized=qt,
        variable=variable,
        iterations=iterations,
        error_trace=tuple(run.trace),
        stopped_early=run.stopped,
        zero_float=z.reshape(-1),
        warnings=tuple(messages),
    )
