"""What a streamed report read and quantized, and how fast: the page's one-line summary
and the checkpoint benchmark's figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..display.counts import counted
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
        """E.g. ``"96 weights, 2.10 GB read in 1.2 s (1.75 GB/s); 1.05e9 elements
        quantized and measured in 150 s (7.0M elements/s, 0.014 GB/s)"``."""
        return (
            f"{counted(self.weights, 'weight')}, {self.bytes_read / 1e9:.2f} GB read in "
            f"{self.read_seconds:.1f} s ({self.read_gb_per_s:.2f} GB/s); {self.elements:.3g} "
            f"elements quantized and measured in {self.seconds:.1f} s "
            f"({self.elements_per_s / 1e6:.1f}M elements/s, {self.gb_per_s:.3f} GB/s)"
        )


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
