"""What a streamed report read and quantized, and how fast: the page's one-line summary
and the checkpoint benchmark's figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..display.counts import counted
from ..display.sizes import compact_bytes, compact_count
from .evaluate import LayerResult
from .streaming import StreamedLayer

__all__ = ["Throughput", "throughput"]


@dataclass(frozen=True)
class Throughput:
    """What a report read and quantized: ``weights`` measured, ``bytes_read`` as stored,
    ``elements`` quantized (of the measured weights), the seconds spent reading
    (``read_seconds``) and in all (``seconds``: read, quantize, measure)."""

    weights: int
    bytes_read: int
    elements: int
    read_seconds: float
    seconds: float

    @property
    def read_gb_per_s(self) -> float:
        """Bytes read per second of reading, in GB (1e9 bytes)."""
        return self.bytes_read / 1e9 / self.read_seconds if self.read_seconds > 0 else 0.0

    @property
    def gb_per_s(self) -> float:
        """Bytes read per second of the whole report, in GB."""
        return self.bytes_read / 1e9 / self.seconds if self.seconds > 0 else 0.0

    @property
    def elements_per_s(self) -> float:
        """Elements quantized and measured per second of the whole report."""
        return self.elements / self.seconds if self.seconds > 0 else 0.0

    def describe(self) -> str:
        """E.g. ``"96 weights, 2.1 GB read in 1.2 s (1.75 GB/s); 1.05G elements quantized
        and measured in 150 s (7M elements/s, 14 MB/s)"``: sizes and rates in the unit that
        fits (a small folder's "0.00 GB read in 0.0 s" said nothing), times to 3
        significant digits."""
        return (
            f"{counted(self.weights, 'weight')}, {compact_bytes(self.bytes_read)} read in "
            f"{_seconds(self.read_seconds)} ({_rate(self.bytes_read, self.read_seconds)}); "
            f"{compact_count(self.elements)} elements quantized and measured in "
            f"{_seconds(self.seconds)} ({_per_s(self.elements_per_s)} elements/s, "
            f"{_rate(self.bytes_read, self.seconds)})"
        )


def _seconds(s: float) -> str:
    return f"{s:.3g} s"


def _per_s(rate: float) -> str:
    return compact_count(round(rate))


def _rate(n_bytes: int, seconds: float) -> str:
    """Bytes per second in the unit that fits; "—/s" when no time was measured."""
    return f"{compact_bytes(round(n_bytes / seconds))}/s" if seconds > 0 else "—/s"


def throughput(rows: Sequence[StreamedLayer]) -> Throughput:
    """The totals of ``rows`` (each weight's own timings, so a resumed report counts the
    rows of every run that made them)."""
    measured = [r for r in rows if isinstance(r.result, LayerResult)]
    return Throughput(
        weights=len(measured),
        bytes_read=sum(r.read_bytes for r in rows),
        elements=sum(r.tensor.info.numel for r in measured),
        read_seconds=sum(r.read_seconds for r in rows),
        seconds=sum(r.seconds for r in rows),
    )
