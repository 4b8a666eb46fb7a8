"""The research quantizers as an explorer format: which one, its bits, its ``q_k`` variant
and (DoReFa) whether the output is rescaled by ``max|w|``; as one frozen value and as URL
query parameters.

URL keys (with ``fmt`` one of the ``ResearchFormat`` values; ``scheme.py`` dispatches):

=========  =========================================  ==================================
key        grammar                                    field
=========  =========================================  ==================================
fmt        ``minmax_levels`` | ``dorefa``             ``format``
bits       integer 2..8                               ``bits``
qk         ``original`` | ``modified`` | ``centered``  ``variant`` (default ``original``)
rescale    ``0`` | ``1``; only with ``fmt=dorefa``     ``rescale`` (default ``1``)
=========  =========================================  ==================================

The integer scheme's other keys (``mode``, ``gran``, ``range``...) mean nothing for a
research format (one per-tensor normalisation, no range method, no rounding choice) and
are rejected with it, as ``scheme.py`` rejects contradicting keys.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from quant_core import QkVariant, QuantConfig

from .query import member
from .scheme import QUERY_KEYS, config_from_query, config_to_query

__all__ = [
    "RESEARCH_BITS",
    "RESEARCH_KEYS",
    "ExplorerScheme",
    "ResearchFormat",
    "ResearchScheme",
    "has_scheme_keys",
    "research_from_query",
    "research_to_query",
    "scheme_from_query",
    "scheme_to_query",
]

# 2..8: the explorer shows codes through an integer QuantizedTensor (2 bits at least) and
# the teaching panel lists levels (256 at most).
RESEARCH_BITS = (2, 8)
RESEARCH_KEYS = ("qk", "rescale")
# The integer scheme's keys besides fmt and bits: none applies to a research format.
_INT_ONLY_KEYS = tuple(k for k in QUERY_KEYS if k not in ("fmt", "bits"))


class ResearchFormat(enum.Enum):
    """A research quantizer offered as a format; the value is the URL's ``fmt``.

    MINMAX_LEVELS: ``u = (x - min) / (max - min)``, ``x_hat = min + q_k(u) (max - min)``:
    ``2^n`` levels from the tensor's min to its max (both ends for ``original``).
    DOREFA: DoReFa-Net's weights, ``u = tanh(w) / (2 max|tanh(w)|) + 1/2``,
    ``w_q = 2 q_k(u) - 1`` (times ``max|w|`` when rescaled).
    """

    MINMAX_LEVELS = "minmax_levels"
    DOREFA = "dorefa"

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    ResearchFormat.MINMAX_LEVELS: "Min-max levels (research)",
    ResearchFormat.DOREFA: "DoReFa, tanh (research)",
}


@dataclass(frozen=True)
class ResearchScheme:
    """``format`` at ``bits`` (2..8) with ``q_k`` ``variant``; ``rescale``: DoReFa's output
    times ``max|w|`` (always ``False`` for min-max levels, whose output is in the data's
    units already). Hashable, with a stable ``repr``: a cache key part."""

    format: ResearchFormat
    bits: int = 4
    variant: QkVariant = QkVariant.ORIGINAL
    rescale: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.format, ResearchFormat):
            raise TypeError(f"format must be a ResearchFormat, got {self.format!r}")
        if isinstance(self.bits, bool) or not isinstance(self.bits, int):
            raise TypeError(f"bits must be an int, got {self.bits!r}")
        lo, hi = RESEARCH_BITS
        if not lo <= self.bits <= hi:
            raise ValueError(f"bits={self.bits} is outside {lo}..{hi} for a research format")
        if not isinstance(self.variant, QkVariant):
            raise TypeError(f"variant must be a QkVariant, got {self.variant!r}")
        if not isinstance(self.rescale, bool):
            raise TypeError(f"rescale must be a bool, got {self.rescale!r}")
        if self.format is ResearchFormat.MINMAX_LEVELS:
            object.__setattr__(self, "rescale", False)  # one spelling per scheme

    def describe(self) -> str:
        """Short label: ``"min-max levels 3-bit original"``, ``"DoReFa 4-bit centered
        ×max|w|"``."""
        head = "min-max levels" if self.format is ResearchFormat.MINMAX_LEVELS else "DoReFa"
        tail = " ×max|w|" if self.rescale else ""
        return f"{head} {self.bits}-bit {self.variant.value}{tail}"


def research_to_query(scheme: ResearchScheme) -> dict[str, str]:
    """``scheme`` as query parameters: ``fmt``, ``bits``, ``qk`` and (DoReFa) ``rescale``."""
    if not isinstance(scheme, ResearchScheme):
        raise TypeError(f"scheme must be a ResearchScheme, got {type(scheme).__name__}")
    out = {"fmt": scheme.format.value, "bits": str(scheme.bits), "qk": scheme.variant.value}
    if scheme.format is ResearchFormat.DOREFA:
        out["rescale"] = "1" if scheme.rescale else "0"
    return out


def research_from_query(params: Mapping[str, str]) -> ResearchScheme:
    """Parse the research keys of ``params`` (``fmt`` must name a research format; missing
    keys take defaults). Raises ``ValueError`` naming the first bad key and value, and for
    an integer scheme's key (``mode=...``) beside a research format."""
    fmt = member("fmt", str(params.get("fmt")), ResearchFormat)
    for key in _INT_ONLY_KEYS:
        if key in params:
            raise ValueError(
                f"{key}={params[key]!r} does not apply to fmt={fmt.value} (a research format "
                "has one per-tensor normalisation and its own rounding)"
            )
    bits = 4
    raw = params.get("bits")
    if raw is not None:
        lo, hi = RESEARCH_BITS
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 2 and lo <= int(raw) <= hi):
            raise ValueError(f"bits={raw!r} must be an integer in {lo}..{hi} for fmt={fmt.value}")
        bits = int(raw)
    variant = QkVariant.ORIGINAL
    raw = params.get("qk")
    if raw is not None:
        variant = member("qk", raw, QkVariant)
    rescale = True
    raw = params.get("rescale")
    if raw is not None:
        if fmt is not ResearchFormat.DOREFA:
            raise ValueError(f"rescale={raw!r} needs fmt=dorefa, got fmt={fmt.value}")
        if raw not in ("0", "1"):
            raise ValueError(f"rescale={raw!r} must be 0 or 1")
        rescale = raw == "1"
    return ResearchScheme(format=fmt, bits=bits, variant=variant, rescale=rescale)


ExplorerScheme = QuantConfig | ResearchScheme
"""What the explorer's format choice gives: an integer/codebook scheme or a research one."""


def scheme_to_query(scheme: ExplorerScheme) -> dict[str, str]:
    """``config_to_query`` for a ``QuantConfig``, ``research_to_query`` for a research one."""
    if isinstance(scheme, ResearchScheme):
        return research_to_query(scheme)
    return config_to_query(scheme)


def scheme_from_query(params: Mapping[str, str]) -> ExplorerScheme:
    """A ``ResearchScheme`` when ``fmt`` names a research format, else ``config_from_query``.
    Raises ``ValueError`` naming the bad key, including a research key (``qk``,
    ``rescale``) beside an integer or codebook format."""
    if params.get("fmt") in {f.value for f in ResearchFormat}:
        return research_from_query(params)
    for key in RESEARCH_KEYS:
        if key in params:
            raise ValueError(
                f"{key}={params[key]!r} needs a research format (fmt=minmax_levels or "
                f"fmt=dorefa), got fmt={params.get('fmt', 'int')}"
            )
    return config_from_query(params)


def has_scheme_keys(params: Mapping[str, str]) -> bool:
    """Whether ``params`` carries any scheme key (integer or research)."""
    return any(k in params for k in (*QUERY_KEYS, *RESEARCH_KEYS))
