"""Which sentences feed the model, and whose ranges apply: small hashable values.

A ``SentenceSet`` keys the caches by a digest of its text (its ``repr`` stays short however
many sentences it holds); ``RangeMode`` says whether an activation's quantization ranges
come from the tensor itself (dynamic) or from other sentences (static).
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass

from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES, check_sentences

__all__ = ["CALIBRATION", "HELD_OUT", "RangeMode", "SentenceSet"]


@dataclass(frozen=True, repr=False)
class SentenceSet:
    """Sentences the bundled model runs on (at least one, none empty: ``TypeError`` /
    ``ValueError`` naming the bad item otherwise). ``SentenceSet()`` is the bundled
    ``CALIBRATION_SENTENCES``."""

    sentences: tuple[str, ...] = CALIBRATION_SENTENCES

    def __post_init__(self) -> None:
        object.__setattr__(self, "sentences", check_sentences(self.sentences))

    @property
    def is_bundled(self) -> bool:
        """True for the bundled calibration set (the only one a link can carry)."""
        return self.sentences == CALIBRATION_SENTENCES

    @property
    def digest(self) -> str:
        """The first 16 hex digits of the SHA-256 of the sentences, one per line."""
        return hashlib.sha256("\n".join(self.sentences).encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        """``"36 bundled calibration sentences"``, ``"3 sentences of your own"``, or
        ``"18 held-out sentences"``."""
        n = len(self.sentences)
        if self.is_bundled:
            return f"{n} bundled calibration sentences"
        if self.sentences == HELD_OUT_SENTENCES:
            return f"{n} held-out sentences"
        return f"{n} sentence{'s' if n != 1 else ''} of your own"

    def __repr__(self) -> str:
        if self.is_bundled:
            return "SentenceSet(calibration)"
        if self.sentences == HELD_OUT_SENTENCES:
            return "SentenceSet(held_out)"
        return f"SentenceSet(n={len(self.sentences)}, sha256={self.digest})"


CALIBRATION = SentenceSet()
"""The bundled calibration sentences (the default)."""
HELD_OUT = SentenceSet(HELD_OUT_SENTENCES)
"""The bundled held-out sentences (disjoint from the calibration set)."""


class RangeMode(enum.Enum):
    """Where an activation's quantization ranges come from.

    DYNAMIC: from the tokens being quantized (each run measures its own min/max).
    STATIC: calibrated once on the calibration sentences (``quant_core.calibrate_ranges``)
    and applied to other (held-out) sentences, whose values beyond them clip.
    """

    DYNAMIC = "dynamic"
    STATIC = "static"

    @property
    def label(self) -> str:
        if self is RangeMode.DYNAMIC:
            return "Dynamic (from the tensor itself)"
        return "Static (calibrated, applied to held-out text)"
