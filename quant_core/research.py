"""The quantizers users of research code ask about, as standalone functions.

Both map values onto ``[0, 1]``, quantize there with a ``q_k`` function, and map back:

- ``minmax_levels_quantize``: ``u = (x - min) / (max - min)``, ``x_hat = min + q_k(u) (max - min)``;
- ``dorefa_quantize_weights``: ``u = tanh(w) / (2 max|tanh(w)|) + 1/2``, ``w_q = 2 q_k(u) - 1``.

``q_k`` comes in the three variants research code uses (``QkVariant``). Every result keeps
its intermediate steps (``.steps``: normalise, ``q_k``, rescale) for a teaching panel.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from .validation import check_float_tensor, to_float32

__all__ = [
    "DoReFaResult",
    "LevelQuantResult",
    "QkVariant",
    "TeachingStep",
    "dorefa_quantize_weights",
    "minmax_levels_quantize",
    "q_k",
    "q_k_codes",
    "q_k_levels",
]


class QkVariant(enum.Enum):
    """How ``q_k`` maps ``u`` in ``[0, 1]`` onto ``2^k`` codes ``c`` and values in ``[0, 1]``.

    With ``n = 2^k - 1`` and ``N = 2^k``:

    ORIGINAL (DoReFa-Net): ``c = round(n u)``, ``q_k(u) = c / n``. Levels ``0, 1/n, ..., 1``
    (both ends included); the two end bins are half as wide as the others, so uniform
    ``u`` uses the end codes half as often. Example, k = 2: ``u = 0.2`` gives
    ``c = round(0.6) = 1``, ``q_k = 1/3``.

    MODIFIED (floor-based): ``c = min(floor(N u), N - 1)``, ``q_k(u) = c / n``. The same
    levels as ORIGINAL, but ``[0, 1]`` is cut into ``N`` equal bins, one per code, so
    uniform ``u`` uses every code equally often. Example, k = 2: ``u = 0.2`` gives
    ``c = floor(0.8) = 0``, ``q_k = 0``; ``u = 0.9`` gives ``c = 3``, ``q_k = 1``.

    CENTERED: ``c = min(floor(N u), N - 1)``, ``q_k(u) = (c + 1/2) / N``: the same equal
    bins, each mapped to its own centre. Levels ``1/(2N), 3/(2N), ..., 1 - 1/(2N)``,
    symmetric about 1/2; no level lies at 0 or 1 (after ``2 q - 1``: none at 0 either), and
    the rounding error never exceeds ``1/(2N)``. Example, k = 2: ``u = 0.2`` gives
    ``c = 0``, ``q_k = 1/8``.
    """

    ORIGINAL = "original"
    MODIFIED = "modified"
    CENTERED = "centered"

    @property
    def formula(self) -> str:
        """``q_k`` as a one-line formula, for labels."""
        return _QK_FORMULAS[self]


_QK_FORMULAS = {
    QkVariant.ORIGINAL: "q_k(u) = round((2^k - 1) u) / (2^k - 1)",
    QkVariant.MODIFIED: "q_k(u) = min(floor(2^k u), 2^k - 1) / (2^k - 1)",
    QkVariant.CENTERED: "q_k(u) = (min(floor(2^k u), 2^k - 1) + 1/2) / 2^k",
}


@dataclass(frozen=True, eq=False)
class TeachingStep:
    """One step of a research quantizer, as data: ``name`` (``"normalise"``, ``"q_k"``,
    ``"rescale"``), the ``formula`` it applies, and its output ``values`` (float32, the
    input's shape)."""

    name: str
    formula: str
    values: torch.Tensor


def _check_bits(bits: object, lo: int = 1, hi: int = 16) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int):
        raise TypeError(f"bits must be an int, got {bits!r}")
    if not lo <= bits <= hi:
        raise ValueError(f"bits={bits} is outside the supported range {lo}..{hi}")
    return bits


def _coerce_variant(variant: object) -> QkVariant:
    if isinstance(variant, QkVariant):
        return variant
    if isinstance(variant, str):
        try:
            return QkVariant(variant.lower())
        except ValueError:
            allowed = ", ".join(v.value for v in QkVariant)
            raise ValueError(
                f"unknown q_k variant {variant!r}; expected one of: {allowed}"
            ) from None
    raise TypeError(f"variant must be a QkVariant or str, got {type(variant).__name__}")


def q_k_codes(
    u: torch.Tensor, bits: int, variant: QkVariant | str = QkVariant.ORIGINAL
) -> torch.Tensor:
    """Codes ``c`` (int64, ``0 .. 2^k - 1``) of ``u`` (float, values in ``[0, 1]``; values
    outside are clamped) under ``variant`` (see ``QkVariant``). Rounding is half to even."""
    check_float_tensor(u, "u")
    bits = _check_bits(bits)
    variant = _coerce_variant(variant)
    top = (1 << bits) - 1
    u = u.detach()
    if variant is QkVariant.ORIGINAL:
        return torch.round(u * top).clamp_(0, top).to(torch.int64)
    # u * 2^k is exact (a power of two), so floor puts u = i / 2^k in bin i exactly.
    return torch.floor(u * (top + 1)).clamp_(0, top).to(torch.int64)


def q_k_levels(
    bits: int,
    variant: QkVariant | str = QkVariant.ORIGINAL,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The ``2^k`` values ``q_k`` can return, ascending (index = code), in ``[0, 1]``."""
    bits = _check_bits(bits)
    variant = _coerce_variant(variant)
    n_codes = 1 << bits
    c = torch.arange(n_codes, device=device, dtype=dtype)
    if variant is QkVariant.CENTERED:
        return (c + 0.5) / n_codes
    return c / (n_codes - 1)


def q_k(u: torch.Tensor, bits: int, variant: QkVariant | str = QkVariant.ORIGINAL) -> torch.Tensor:
    """``q_k(u)`` (float32, ``u``'s shape): ``u`` in ``[0, 1]`` quantized to ``k = bits`` bits
    under ``variant``; ``q_k_levels(bits, variant)[q_k_codes(u, bits, variant)]``."""
    codes = q_k_codes(u, bits, variant)
    return q_k_levels(bits, variant, u.device)[codes]


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
    QkVariant.MODIFIED: "x_hat = min + c (max - min) / (2^n - 1)",
    QkVariant.CENTERED: "x_hat = min + (c + 1/2) (max - min) / 2^n",
}


def minmax_levels_quantize(
    x: torch.Tensor, bits: int, variant: QkVariant | str = QkVariant.ORIGINAL
) -> LevelQuantResult:
    """Map ``x`` onto ``2^n`` levels spread over ``[min(x), max(x)]``.

    ORIGINAL (the default): ``2^n`` equally spaced levels from ``min`` to ``max``, both
    included: ``step = (max - min) / (2^n - 1)``, ``code = round((x - min) / step)``,
    ``x_hat = min + code * step``. Example, n = 2 on ``[0, 3]``: levels ``0, 1, 2, 3``.
    MODIFIED: the same levels, codes ``min(floor(2^n u), 2^n - 1)`` with
    ``u = (x - min) / (max - min)`` (equal bins per code). CENTERED: codes as MODIFIED,
    levels ``min + (c + 1/2) (max - min) / 2^n`` (the bin centres; neither end is a level).
    A constant tensor has a zero range and maps to itself. Computed in float32, or in
    float64 when ``max - min`` exceeds float32's range.
    """
    check_float_tensor(x)
    bits = _check_bits(bits)
    variant = _coerce_variant(variant)
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
        levels = lo + torch.arange(n_levels, device=x.device, dtype=xf.dtype) * step
        levels[-1] = hi  # the top level is max(x) exactly, not lo + (2^n-1) * step rounded
    else:
        # u * 2^n is exact, so the bins are cut exactly at (x - min) / (max - min) = i / 2^n.
        codes = torch.floor(u * n_levels).clamp_(0, n_levels - 1).to(torch.int64)
        unit = q_k_levels(bits, variant, x.device, xf.dtype)
        levels = lo + unit * span
        if variant is QkVariant.MODIFIED:
            levels[-1] = hi
    levels = levels.to(torch.float32)
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
    bits = _check_bits(bits)
    variant = _coerce_variant(variant)
    if not isinstance(rescale, bool):
        raise TypeError(f"rescale must be a bool, got {rescale!r}")
    wf = to_float32(w, "w")
    t = torch.tanh(wf)
    t_max = t.abs().max()
    denom = torch.where(t_max > 0, 2 * t_max, torch.ones_like(t_max))
    u = t / denom + 0.5
    codes = q_k_codes(u, bits, variant)
    unit_levels = q_k_levels(bits, variant, w.device)
    unit = unit_levels[codes]
    scale = float(wf.abs().max()) if rescale else 1.0
    levels = (2 * unit_levels - 1) * scale
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
