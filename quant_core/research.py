"""The quantizers users of research code ask about, as standalone functions.

Both map values onto ``[0, 1]``, quantize there with a ``q_k`` function, and map back:

- ``minmax_levels_quantize``: ``u = (x - min) / (max - min)``, ``x_hat = min + q_k(u) (max - min)``;
- ``dorefa_quantize_weights``: ``u = tanh(w) / (2 max|tanh(w)|) + 1/2``, ``w_q = 2 q_k(u) - 1``.

``q_k`` comes in the three variants research code uses (``QkVariant``). Every result keeps
its intermediate steps (``.steps``: normalise, ``q_k``, rescale) for a teaching panel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .qk import QkVariant, check_bits, coerce_variant, q_k, q_k_codes, q_k_levels
from .validation import check_float_tensor, to_float32

__all__ = [
    "DoReFaResult",
    "LevelQuantResult",
    "QkVariant",
    "TeachingStep",
    "dorefa_levels",
    "dorefa_quantize_weights",
    "minmax_levels",
    "minmax_levels_quantize",
    "q_k",
    "q_k_codes",
    "q_k_levels",
]


@dataclass(frozen=True, eq=False)
class TeachingStep:
    """One step of a research quantizer, as data: ``name`` (``"normalise"``, ``"q_k"``,
    ``"rescale"``), the ``formula`` it applies, and its output ``values`` (float32, the
    input's shape)."""

    name: str
    formula: str
    values: torch.Tensor


@dataclass(frozen=True, eq=False)
class LevelQuantResult:
    """``codes`` (int64, ``0..2^n-1``), ``levels`` (the ``2^n`` values, ascending) and
    ``dequantized = levels[codes]`` (float32, input shape).

    For teaching: ``normalized`` is ``u = (x - min) / (max - min)`` (0 for a constant
    tensor), ``x_min``/``x_max`` the range, ``variant`` the ``q_k`` used; ``steps`` lists
    normalise, ``q_k`` and rescale as data.
    """

    codes: torch.Tensor
    levels: torch.Tensor
    dequantized: torch.Tensor
    normalized: torch.Tensor | None = None
    unit: torch.Tensor | None = None
    x_min: float = 0.0
    x_max: float = 0.0
    variant: QkVariant = QkVariant.ORIGINAL

    @property
    def steps(self) -> tuple[TeachingStep, ...]:
        empty = torch.empty(0)
        return (
            TeachingStep(
                "normalise",
                "u = (x - min) / (max - min)",
                self.normalized if self.normalized is not None else empty,
            ),
            TeachingStep(
                "q_k", self.variant.formula, self.unit if self.unit is not None else empty
            ),
            TeachingStep("rescale", _LEVELS_RESCALE[self.variant], self.dequantized),
        )


_LEVELS_RESCALE = {
    QkVariant.ORIGINAL: "x_hat = min + c (max - min) / (2^n - 1)",
    QkVariant.MODIFIED: "x_hat = min + c (max - min) / 2^n",
    QkVariant.CENTERED: "x_hat = min + (c + 1/2) (max - min) / 2^n",
}


def minmax_levels_quantize(
    x: torch.Tensor, bits: int, variant: QkVariant | str = QkVariant.ORIGINAL
) -> LevelQuantResult:
    """Map ``x`` onto ``2^n`` levels spread over ``[min(x), max(x)]``.

    ORIGINAL (the default): ``2^n`` equally spaced levels from ``min`` to ``max``, both
    included: ``step = (max - min) / (2^n - 1)``, ``code = round((x - min) / step)``,
    ``x_hat = min + code * step``. Example, n = 2 on ``[0, 3]``: levels ``0, 1, 2, 3``.
    MODIFIED (AdaBits): codes ``min(floor(2^n u), 2^n - 1)`` with
    ``u = (x - min) / (max - min)`` (equal bins per code), levels
    ``min + c (max - min) / 2^n`` (the bins' lower edges: ``max`` itself is not a level, the
    top one is ``max - (max - min) / 2^n``). Example, n = 2 on ``[0, 4]``: levels
    ``0, 1, 2, 3``, and ``x = 4`` lands on 3. CENTERED: codes as MODIFIED, levels
    ``min + (c + 1/2) (max - min) / 2^n`` (the bin centres; neither end is a level).
    A constant tensor has a zero range and maps to itself. Computed in float32, or in
    float64 when ``max - min`` exceeds float32's range.
    """
    check_float_tensor(x)
    bits = check_bits(bits)
    variant = coerce_variant(variant)
    xf = to_float32(x)
    lo, hi = xf.min(), xf.max()
    n_levels = 1 << bits
    if not bool(torch.isfinite(hi - lo)):
        xf, lo, hi = xf.to(torch.float64), lo.to(torch.float64), hi.to(torch.float64)
    span = hi - lo
    safe_span = torch.where(span > 0, span, torch.ones_like(span))
    u = (xf - lo) / safe_span
    if variant is QkVariant.ORIGINAL:
        step = span / (n_levels - 1)
        safe_step = torch.where(step > 0, step, torch.ones_like(step))
        codes = torch.round((xf - lo) / safe_step).clamp_(0, n_levels - 1).to(torch.int64)
    else:
        # u * 2^n is exact, so the bins are cut exactly at (x - min) / (max - min) = i / 2^n.
        codes = torch.floor(u * n_levels).clamp_(0, n_levels - 1).to(torch.int64)
    levels = _levels_between(lo, hi, bits, variant)
    return LevelQuantResult(
        codes=codes,
        levels=levels,
        dequantized=levels[codes],
        normalized=u.to(torch.float32),
        unit=q_k_levels(bits, variant, x.device)[codes],
        x_min=float(lo),
        x_max=float(hi),
        variant=variant,
    )


def _levels_between(
    lo: torch.Tensor, hi: torch.Tensor, bits: int, variant: QkVariant
) -> torch.Tensor:
    """The ``2^n`` levels over ``[lo, hi]`` (0-d tensors, float32 or float64), as float32."""
    n_levels = 1 << bits
    span = hi - lo
    if variant is QkVariant.ORIGINAL:
        levels = lo + torch.arange(n_levels, device=lo.device, dtype=lo.dtype) * (
            span / (n_levels - 1)
        )
    else:
        levels = lo + q_k_levels(bits, variant, lo.device, lo.dtype) * span
    if variant is QkVariant.ORIGINAL:
        levels[-1] = hi  # the top level is max(x) exactly, not lo + (2^n-1) * step rounded
    return levels.to(torch.float32)


def minmax_levels(
    x_min: float,
    x_max: float,
    bits: int,
    variant: QkVariant | str = QkVariant.ORIGINAL,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """The ``2^n`` levels (float32, ascending) ``minmax_levels_quantize`` gives a tensor whose
    minimum and maximum are the float32 values ``x_min`` and ``x_max``: bit for bit the
    same, so the two numbers are all a stored tensor needs to dequantize its codes
    (``levels[code]``). Raises ``ValueError`` for a non-finite end or ``x_min > x_max``."""
    bits = check_bits(bits)
    variant = coerce_variant(variant)
    if not (math.isfinite(x_min) and math.isfinite(x_max)) or x_min > x_max:
        raise ValueError(f"need finite x_min <= x_max, got x_min={x_min!r}, x_max={x_max!r}")
    lo = torch.tensor(x_min, dtype=torch.float32, device=device)
    hi = torch.tensor(x_max, dtype=torch.float32, device=device)
    if not bool(torch.isfinite(hi - lo)):
        lo, hi = lo.to(torch.float64), hi.to(torch.float64)
    return _levels_between(lo, hi, bits, variant)


def dorefa_levels(
    bits: int,
    variant: QkVariant | str = QkVariant.ORIGINAL,
    scale: float = 1.0,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """The ``2^k`` values (float32, ascending) a DoReFa weight can take:
    ``(2 q_k_levels - 1) * scale``; ``scale`` is 1 unless rescaled by ``max|w|``. Bit for
    bit ``dorefa_quantize_weights(...).levels``. Example, k = 2, ORIGINAL: ``-1, -1/3, 1/3,
    1``; MODIFIED: ``-1, -1/2, 0, 1/2``; CENTERED: ``-3/4, -1/4, 1/4, 3/4``."""
    bits = check_bits(bits)
    return (2 * q_k_levels(bits, coerce_variant(variant), device) - 1) * scale


@dataclass(frozen=True, eq=False)
class DoReFaResult:
    """``codes`` (int64, ``0..2^k-1``) and ``dequantized`` weights (float32) in ``[-1, 1]``
    (times ``scale`` when rescaled; ``scale`` is 1.0 otherwise).

    For teaching: ``tanh`` is ``tanh(w)``, ``tanh_max`` is ``max|tanh(w)|``, ``normalized``
    is ``u = tanh(w) / (2 tanh_max) + 1/2`` in ``[0, 1]``, ``unit = q_k(u)``, ``levels`` the
    ``2^k`` values a weight can take (``(2 q_k_levels - 1) * scale``, ascending);
    ``steps`` lists normalise, ``q_k`` and rescale as data.
    """

    codes: torch.Tensor
    dequantized: torch.Tensor
    scale: float
    tanh: torch.Tensor | None = None
    tanh_max: float = 0.0
    normalized: torch.Tensor | None = None
    unit: torch.Tensor | None = None
    levels: torch.Tensor | None = None
    variant: QkVariant = QkVariant.ORIGINAL

    @property
    def steps(self) -> tuple[TeachingStep, ...]:
        empty = torch.empty(0)
        rescale = "w_q = 2 q_k(u) - 1" if self.scale == 1.0 else "w_q = (2 q_k(u) - 1) max|w|"
        return (
            TeachingStep(
                "normalise",
                "u = tanh(w) / (2 max|tanh(w)|) + 1/2",
                self.normalized if self.normalized is not None else empty,
            ),
            TeachingStep(
                "q_k", self.variant.formula, self.unit if self.unit is not None else empty
            ),
            TeachingStep("rescale", rescale, self.dequantized),
        )


def dorefa_quantize_weights(
    w: torch.Tensor,
    bits: int,
    rescale: bool = False,
    variant: QkVariant | str = QkVariant.ORIGINAL,
) -> DoReFaResult:
    """DoReFa-Net weight quantization (Zhou et al., 2016).

    ``u = tanh(w) / (2 max|tanh(w)|) + 1/2`` in ``[0, 1]``; ``q_k(u)`` under ``variant``
    (the paper's is ``round((2^k - 1) u) / (2^k - 1)``, see ``QkVariant``);
    ``w_q = 2 q_k(u) - 1`` in ``[-1, 1]``. ``rescale=True`` multiplies ``w_q`` by ``max|w|``
    so it spans the weights' own range (comparable to ``w`` in error metrics). ``bits``
    from 1 to 16. Unlike clipping, tanh squeezes large weights together before the uniform
    grid is laid down: the grid is uniform in ``tanh(w)``, so it is finer near 0 and
    coarser in the tails, in ``w``.
    """
    check_float_tensor(w, "w")
    bits = check_bits(bits)
    variant = coerce_variant(variant)
    if not isinstance(rescale, bool):
        raise TypeError(f"rescale must be a bool, got {rescale!r}")
    wf = to_float32(w, "w")
    t = torch.tanh(wf)
    t_max = t.abs().max()
    denom = torch.where(t_max > 0, 2 * t_max, torch.ones_like(t_max))
    u = t / denom + 0.5
    codes = q_k_codes(u, bits, variant)
    unit = q_k_levels(bits, variant, w.device)[codes]
    scale = float(wf.abs().max()) if rescale else 1.0
    levels = dorefa_levels(bits, variant, scale, w.device)
    return DoReFaResult(
        codes=codes,
        dequantized=(2 * unit - 1) * scale,
        scale=scale,
        tanh=t,
        tanh_max=float(t_max),
        normalized=u,
        unit=unit,
        levels=levels,
        variant=variant,
    )
