"""Which algorithm chooses a weight's codes, and its few user-facing knobs, as one frozen
value that a URL, a cache key and every page share.

URL keys (all optional; absent means the default):

=========  ====================================  ===================
key        grammar                               field
=========  ====================================  ===================
algo       ``rtn`` | ``gptq`` | ``awq`` | ``hqq``  ``algorithm``
damp       decimal in [0, 1], e.g. ``0.1``       ``gptq_damp``
actord     ``0`` | ``1``                         ``act_order``
calib      ``bundled`` | ``custom``              ``custom_calibration``
=========  ====================================  ===================

The calibration text itself is not carried by a link (it can be long); ``calib=custom``
from a link falls back to the bundled sentences with a warning from the caller.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from quant_core import (
    CALIBRATION_SENTENCES,
    Algorithm,
    AWQOptions,
    GPTQOptions,
    HQQOptions,
)

from .query import member

__all__ = [
    "ALGORITHM_KEYS",
    "DAMP_RANGE",
    "DEFAULT_DAMP",
    "AlgorithmChoice",
    "algorithm_from_query",
    "algorithm_to_query",
    "parse_sentences",
]

ALGORITHM_KEYS = ("algo", "damp", "actord", "calib")
# The paper's 1% overfits with MiniLM's few hundred calibration tokens (6 of 37 layers
# worse than RTN on held-out text, benchmarks/algorithms.py); 0.1 keeps every layer better.
DEFAULT_DAMP = 0.1
DAMP_RANGE = (0.0, 1.0)
_DAMP_RE = re.compile(r"[0-9](\.[0-9]{1,6})?")
MAX_SENTENCES = 256
MAX_SENTENCE_CHARS = 2000


@dataclass(frozen=True)
class AlgorithmChoice:
    """``algorithm`` with its options; ``calibration``: the sentences GPTQ/AWQ calibrate
    on (the bundled set unless the user wrote their own); ``custom_calibration`` says
    which. Hashable and with a stable ``repr``: a cache key part."""

    algorithm: Algorithm = Algorithm.RTN
    gptq_damp: float = DEFAULT_DAMP
    act_order: bool = True
    calibration: tuple[str, ...] = CALIBRATION_SENTENCES
    custom_calibration: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.algorithm, Algorithm):
            raise TypeError(f"algorithm must be an Algorithm, got {self.algorithm!r}")
        lo, hi = DAMP_RANGE
        if not lo <= float(self.gptq_damp) <= hi:
            raise ValueError(f"gptq_damp={self.gptq_damp} must be in {lo:g}..{hi:g}")
        if not self.calibration:
            raise ValueError("calibration needs at least one sentence")

    @property
    def options(self) -> GPTQOptions | AWQOptions | HQQOptions | None:
        """The options object ``quant_core.quantize_weight`` takes for ``algorithm``."""
        if self.algorithm is Algorithm.GPTQ:
            return GPTQOptions(damp=float(self.gptq_damp), act_order=self.act_order)
        if self.algorithm is Algorithm.AWQ:
            return AWQOptions()
        if self.algorithm is Algorithm.HQQ:
            return HQQOptions()
        return None

    def describe(self) -> str:
        """Short label: ``"RTN"``, ``"GPTQ (damp 0.1, act-order)"``, ``"AWQ"``, ``"HQQ"``."""
        if self.algorithm is Algorithm.GPTQ:
            order = ", act-order" if self.act_order else ""
            return f"GPTQ (damp {self.gptq_damp:g}{order})"
        return self.algorithm.label

    def key(self) -> str:
        """A short cache key: the sentences enter as their count and hash."""
        calib = ""
        if self.algorithm.needs_calibration:
            text = "\n".join(self.calibration).encode()
            calib = f"{len(self.calibration)}:{hashlib.sha1(text).hexdigest()[:12]}"
        return f"{self.algorithm.value}|{self.gptq_damp!r}|{self.act_order}|{calib}"


def parse_sentences(text: str) -> tuple[str, ...]:
    """One sentence per non-empty line of ``text``. Raises ``ValueError`` for no sentence,
    more than ``MAX_SENTENCES`` lines, or a line longer than ``MAX_SENTENCE_CHARS``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    lines = tuple(line.strip() for line in text.splitlines() if line.strip())
    if not lines:
        raise ValueError("write at least one sentence (one per line)")
    if len(lines) > MAX_SENTENCES:
        raise ValueError(f"{len(lines)} sentences is more than the {MAX_SENTENCES} allowed")
    for i, line in enumerate(lines):
        if len(line) > MAX_SENTENCE_CHARS:
            raise ValueError(
                f"sentence {i + 1} has {len(line)} characters; at most {MAX_SENTENCE_CHARS}"
            )
    return lines


def algorithm_to_query(choice: AlgorithmChoice) -> dict[str, str]:
    """The URL keys of ``choice``; the default (RTN) gives ``{}`` so links stay short."""
    if choice.algorithm is Algorithm.RTN:
        return {}
    out = {"algo": choice.algorithm.value}
    if choice.algorithm is Algorithm.GPTQ:
        out["damp"] = f"{choice.gptq_damp:g}"
        out["actord"] = "1" if choice.act_order else "0"
    if choice.algorithm.needs_calibration and choice.custom_calibration:
        out["calib"] = "custom"
    return out


def algorithm_from_query(params: Mapping[str, str]) -> AlgorithmChoice:
    """Parse the algorithm keys of ``params`` (missing keys take defaults). Raises
    ``ValueError`` naming the first bad key and value. ``calib=custom`` is parsed but gives
    the bundled sentences (a link does not carry the text)."""
    raw = params.get("algo")
    algorithm = Algorithm.RTN
    if raw is not None:
        algorithm = member("algo", raw, Algorithm)
    damp = DEFAULT_DAMP
    raw = params.get("damp")
    if raw is not None:
        if not _DAMP_RE.fullmatch(raw) or not DAMP_RANGE[0] <= float(raw) <= DAMP_RANGE[1]:
            raise ValueError(f"damp={raw!r} must be a decimal in 0..1 such as 0.1")
        damp = float(raw)
    act_order = True
    raw = params.get("actord")
    if raw is not None:
        if raw not in ("0", "1"):
            raise ValueError(f"actord={raw!r} must be 0 or 1")
        act_order = raw == "1"
    raw = params.get("calib")
    if raw is not None and raw not in ("bundled", "custom"):
        raise ValueError(f"calib={raw!r} must be bundled or custom")
    return AlgorithmChoice(algorithm=algorithm, gptq_damp=damp, act_order=act_order)
