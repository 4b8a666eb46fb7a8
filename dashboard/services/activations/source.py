"""What the tensor picker says about an activation source: its label and notes."""

from __future__ import annotations

from quant_core import ActivationCapture

from ..sources.choice import ActivationSource
from .sentences import RangeMode

__all__ = ["activation_label", "activation_notes", "capture_summary"]


def activation_label(choice: ActivationSource) -> str:
    """E.g. ``"all-MiniLM-L6-v2 · input of encoder.layer.0.attention.self.query on 36
    bundled calibration sentences"``."""
    return f"all-MiniLM-L6-v2 · input of {choice.layer} on {choice.shown.label}"


def activation_notes(choice: ActivationSource) -> tuple[str, ...]:
    """What static ranges mean for the matrix shown (nothing under dynamic ranges)."""
    if choice.ranges is RangeMode.DYNAMIC or choice.calibration is None:
        return ()
    return (
        f"Static ranges: the rows are the layer's inputs on the {choice.shown.label}; the "
        f"Explorer quantizes them with ranges calibrated on the {choice.calibration.label}, "
        "so held-out values beyond those ranges clip (counted under Clipped, and the largest "
        "errors of the error map). Static ranges are per-tensor or per-feature: a per-token "
        "scheme has no ranges to carry over.",
    )


def capture_summary(capture: ActivationCapture, n_sentences: int) -> str:
    """E.g. ``"Captured 37 layers on 36 sentences in 1.71 s · 41.1 MB"``."""
    return (
        f"Captured {len(capture.layer_names)} layers on {n_sentences} sentence"
        f"{'s' if n_sentences != 1 else ''} in {capture.seconds:.2f} s · "
        f"{capture.nbytes / 1e6:.1f} MB"
    )
