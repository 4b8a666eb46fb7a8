"""``q_k``: a value ``u`` in ``[0, 1]`` quantized to ``k`` bits, in the three variants
research code uses (``QkVariant``). The research quantizers (``research``) normalise onto
``[0, 1]``, apply ``q_k`` and map back."""

from __future__ import annotations

import enum

import torch

from .config import coerce_enum
from .validation import check_float_tensor

__all__ = ["QkVariant", "check_bits", "coerce_variant", "q_k", "q_k_codes", "q_k_levels"]


class QkVariant(enum.Enum):
    """How ``q_k`` maps ``u`` in ``[0, 1]`` onto ``2^k`` codes ``c`` and values in ``[0, 1]``.

    With ``n = 2^k - 1`` and ``N = 2^k``:

    ORIGINAL (DoReFa-Net): ``c = round(n u)``, ``q_k(u) = c / n``. Levels ``0, 1/n, ..., 1``
    (both ends included); the two end bins are half as wide as the others, so uniform
    ``u`` uses the end codes half as often. Example, k = 2: ``u = 0.2`` gives
    ``c = round(0.6) = 1``, ``q_k = 1/3``.

    MODIFIED (AdaBits' floor-based ``q_k``): ``c = min(floor(N u), N - 1)``,
    ``q_k(u) = c / N``, i.e. ``floor(2^k u).clamp(max=2^k - 1) / 2^k``. ``[0, 1]`` is cut
    into ``N`` equal bins, one per code, so uniform ``u`` uses every code equally often,
    and each bin maps to its lower edge: levels ``0, 1/N, ..., 1 - 1/N`` (none at 1).
    Example, k = 2: ``u = 0.2`` gives ``c = floor(0.8) = 0``, ``q_k = 0``; ``u = 0.9``
    gives ``c = 3``, ``q_k = 3/4``; ``u = 1`` gives ``c = min(4, 3) = 3``, ``q_k = 3/4``.

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
    QkVariant.MODIFIED: "q_k(u) = min(floor(2^k u), 2^k - 1) / 2^k",
    QkVariant.CENTERED: "q_k(u) = (min(floor(2^k u), 2^k - 1) + 1/2) / 2^k",
}


def check_bits(bits: object, lo: int = 1, hi: int = 16) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int):
        raise TypeError(f"bits must be an int, got {bits!r}")
    if not lo <= bits <= hi:
        raise ValueError(f"bits={bits} is outside the supported range {lo}..{hi}")
    return bits


def coerce_variant(variant: object) -> QkVariant:
    return coerce_enum(variant, QkVariant, "variant", "q_k variant")


def q_k_codes(
    u: torch.Tensor, bits: int, variant: QkVariant | str = QkVariant.ORIGINAL
) -> torch.Tensor:
    """Codes ``c`` (int64, ``0 .. 2^k - 1``) of ``u`` (float, values in ``[0, 1]``; values
    outside are clamped) under ``variant`` (see ``QkVariant``). Rounding is half to even."""
    check_float_tensor(u, "u")
    bits = check_bits(bits)
    variant = coerce_variant(variant)
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
    bits = check_bits(bits)
    variant = coerce_variant(variant)
    n_codes = 1 << bits
    c = torch.arange(n_codes, device=device, dtype=dtype)
    if variant is QkVariant.CENTERED:
        return (c + 0.5) / n_codes
    if variant is QkVariant.MODIFIED:
        return c / n_codes  # the bins' lower edges: 1 - 2^-k at the top, never 1
    return c / (n_codes - 1)


def q_k(u: torch.Tensor, bits: int, variant: QkVariant | str = QkVariant.ORIGINAL) -> torch.Tensor:
    """``q_k(u)`` (float32, ``u``'s shape): ``u`` in ``[0, 1]`` quantized to ``k = bits`` bits
    under ``variant``; ``q_k_levels(bits, variant)[q_k_codes(u, bits, variant)]``."""
    codes = q_k_codes(u, bits, variant)
    return q_k_levels(bits, variant, u.device)[codes]
