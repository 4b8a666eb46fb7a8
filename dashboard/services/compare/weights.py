"""A weight scheme: a ``QuantConfig`` and the algorithm that picks its codes, as one frozen
value the sweep, A/B and their caches share; and which tensors can be calibrated
(``measure`` runs a scheme on a weight and its layer's held-out outputs).

    scheme = WeightScheme(cfg, Algorithm.GPTQ, GPTQOptions(damp=0.1, act_order=True))
    layer = linear_layer_of(source.choice)     # "encoder.layer.0.attention.self.query" | None
    res = quantize_scheme(w, scheme, calibration=x_cal)   # x_cal: [tokens, in_features]
    res.effective_weight()                    # [out, in]: what the layer computes with

GPTQ and AWQ choose codes from a layer's inputs, so they are offered only for a linear
weight of the bundled model, whose inputs the dashboard can capture by running it on
sentences; RTN and HQQ are data-free and run on any tensor.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

import torch

from quant_core import (
    Algorithm,
    AWQOptions,
    GPTQOptions,
    HQQOptions,
    QuantConfig,
    WeightQuantResult,
    quantize_weight,
)
from quant_core.calibration import CALIBRATION_SENTENCES

from ..display.labels import scheme_label
from ..sources.choice import ModelSource, SourceChoice
from ..state.algorithm import (
    ALGORITHM_KEYS,
    DEFAULT_DAMP,
    AlgorithmChoice,
    algorithm_from_query,
    algorithm_to_query,
)
from ..state.scheme import MAX_VALUE_LENGTH, QUERY_KEYS, config_from_query, config_to_query

__all__ = [
    "BUNDLED_PATH",
    "DATA_FREE",
    "SCHEME_KEYS",
    "SWEEP_GPTQ",
    "WeightScheme",
    "ab_calibration_note",
    "calibration_note",
    "linear_layer_of",
    "offered_algorithms",
    "quantize_scheme",
]

AlgorithmOptions = GPTQOptions | AWQOptions | HQQOptions

# The bundled all-MiniLM-L6-v2's nn.Linear layers: six per encoder block, and the pooler.
# Every other weight (embeddings, LayerNorm) is not a matmul with captured inputs.
_LINEAR_LAYER = re.compile(
    r"encoder\.layer\.[0-9]+\.(attention\.self\.(query|key|value)|attention\.output\.dense"
    r"|intermediate\.dense|output\.dense)|pooler\.dense"
)
DATA_FREE: tuple[Algorithm, ...] = tuple(a for a in Algorithm if not a.needs_calibration)
# GPTQ as the dashboard runs it: dampening 0.1 (the paper's 0.01 overfits MiniLM's few
# hundred calibration tokens) with act-order, the algorithm picker's defaults.
SWEEP_GPTQ = GPTQOptions(damp=DEFAULT_DAMP, act_order=True)
# The keys of a scheme id: the config's, then the algorithm's (``calib`` is not part of a
# scheme: the sentences are the page's, shared by every scheme).
SCHEME_KEYS: tuple[str, ...] = (*QUERY_KEYS, *(k for k in ALGORITHM_KEYS if k != "calib"))


def linear_layer_of(choice: SourceChoice) -> str | None:
    """The layer name (``"encoder.layer.0.attention.self.query"``) when ``choice`` is the
    ``.weight`` of one of the bundled model's linear layers, else ``None``."""
    if not isinstance(choice, ModelSource):
        return None
    name = choice.tensor.removesuffix(".weight")
    if name == choice.tensor or not _LINEAR_LAYER.fullmatch(name):
        return None
    return name


def offered_algorithms(layer: str | None) -> tuple[Algorithm, ...]:
    """Every algorithm for a linear layer of the bundled model; the data-free ones
    (RTN, HQQ) otherwise."""
    return tuple(Algorithm) if layer is not None else DATA_FREE


BUNDLED_PATH = "Source → Bundled model (MiniLM)"
"""Where the tensor picker offers the bundled model's weights (its labels, as shown)."""


def calibration_note(
    layer: str | None, n_calibration: int, n_held_out: int, choice: SourceChoice | None = None
) -> str:
    """One sentence (Markdown) saying where calibration and output errors come from, or why
    GPTQ and AWQ cannot run: ``choice``, the tensor's source, tells a bundled-model weight
    that is not a linear layer's (the word embeddings: a table looked up, not multiplied)
    from a tensor with no model at all."""
    if layer is None:
        if isinstance(choice, ModelSource):
            why = (
                f"`{choice.tensor}` is not the weight of a linear layer (nothing multiplies "
                "it by captured inputs)"
            )
        else:
            why = "this tensor has no model to run on sentences"
        return (
            "GPTQ and AWQ are not offered: they choose codes from a linear layer's inputs "
            f"(calibration data), and {why}; pick a linear weight under {BUNDLED_PATH}. "
            "RTN and HQQ need no data."
        )
    return (
        f"Layer `{layer}`: GPTQ and AWQ calibrate on its inputs over {n_calibration} "
        f"sentences; output errors are measured on {n_held_out} held-out sentences "
        "they never saw."
    )


def ab_calibration_note(
    layer: str | None,
    choice_a: AlgorithmChoice,
    choice_b: AlgorithmChoice,
    n_held_out: int,
    choice: SourceChoice | None = None,
) -> str:
    """``calibration_note`` for A/B, whose two sides calibrate on their own sentences: the
    count of the side whose algorithm calibrates (GPTQ, AWQ), or of each when both do on
    different sentences ("scheme A's AWQ over 36 sentences, scheme B's GPTQ over 3"); the
    bundled count when neither calibrates. Before, the note counted A's sentences
    whatever B calibrated on."""
    sides = [
        (name, c)
        for name, c in (("A", choice_a), ("B", choice_b))
        if c.algorithm.needs_calibration
    ]
    counts = {len(c.calibration) for _, c in sides}
    if layer is None or len(counts) < 2:
        n = counts.pop() if counts else len(CALIBRATION_SENTENCES)
        return calibration_note(layer, n, n_held_out, choice)
    (first, a), (second, b) = sides
    return (
        f"Layer `{layer}`: GPTQ and AWQ calibrate on its inputs, scheme {first}'s "
        f"{a.algorithm.label} over {len(a.calibration)} sentences, scheme {second}'s "
        f"{b.algorithm.label} over {len(b.calibration)}; output errors are measured on "
        f"{n_held_out} held-out sentences they never saw."
    )


@dataclass(frozen=True)
class WeightScheme:
    """``config`` with the ``algorithm`` that picks its codes and that algorithm's
    ``options``. Hashable, with a stable ``repr``: a cache key part.

    Options are normalised so that equal schemes compare equal and a scheme id carries
    them all: GPTQ's ``None`` becomes ``SWEEP_GPTQ`` (damp 0.1, act-order); AWQ and HQQ
    run with their defaults (``None``; other options raise ``ValueError``, since no link
    carries them); RTN takes none (``TypeError``).
    """

    config: QuantConfig
    algorithm: Algorithm = Algorithm.RTN
    options: AlgorithmOptions | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.config, QuantConfig):
            raise TypeError(f"config must be a QuantConfig, got {self.config!r}")
        if not isinstance(self.algorithm, Algorithm):
            raise TypeError(f"algorithm must be an Algorithm, got {self.algorithm!r}")
        expected = self.algorithm.options_type
        opts = self.options
        if opts is not None and (expected is None or not isinstance(opts, expected)):
            raise TypeError(f"{self.algorithm.label} cannot take options {type(opts).__name__}")
        if self.algorithm is Algorithm.GPTQ:
            object.__setattr__(self, "options", opts or SWEEP_GPTQ)
        elif opts is not None:
            if expected is not None and opts != expected():
                raise ValueError(
                    f"{self.algorithm.label} runs with its default options here, got {opts!r}"
                )
            object.__setattr__(self, "options", None)

    @classmethod
    def of(cls, config: QuantConfig, choice: AlgorithmChoice) -> WeightScheme:
        """The scheme of ``config`` under an algorithm picker's ``choice``."""
        if not isinstance(choice, AlgorithmChoice):
            raise TypeError(f"choice must be an AlgorithmChoice, got {choice!r}")
        options = choice.options if choice.algorithm is Algorithm.GPTQ else None
        return cls(config, choice.algorithm, options)

    def algorithm_choice(
        self, calibration: tuple[str, ...] = CALIBRATION_SENTENCES, custom: bool = False
    ) -> AlgorithmChoice:
        """The ``AlgorithmChoice`` (the explorer's URL keys) of this scheme's algorithm."""
        damp, act_order = DEFAULT_DAMP, True
        if isinstance(self.options, GPTQOptions):
            damp, act_order = float(self.options.damp), self.options.act_order
        return AlgorithmChoice(
            algorithm=self.algorithm,
            gptq_damp=damp,
            act_order=act_order,
            calibration=calibration,
            custom_calibration=custom and self.algorithm.needs_calibration,
        )

    @property
    def algorithm_label(self) -> str:
        """``"RTN"``, ``"GPTQ (damp 0.1, act-order)"``, ``"AWQ"``, ``"HQQ"``."""
        return self.algorithm_choice().describe()

    @property
    def label(self) -> str:
        """``scheme_label(config)`` (the scale dtype named), followed by the algorithm
        unless it is RTN: ``"int4 asym g128, fp16 scales · GPTQ"``."""
        head = scheme_label(self.config)
        return head if self.algorithm is Algorithm.RTN else f"{head} · {self.algorithm.label}"

    def to_query(self) -> dict[str, str]:
        """The config's query parameters (``config_to_query``) and the algorithm's
        (``algorithm_to_query``: ``algo``, with GPTQ's ``damp`` and ``actord``); an RTN
        scheme has exactly its config's."""
        return {**config_to_query(self.config), **algorithm_to_query(self.algorithm_choice())}

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> WeightScheme:
        """The scheme of ``params``' config and algorithm keys (missing ones take their
        defaults); ``ValueError`` naming the first bad key and value."""
        config = config_from_query(params)
        return cls.of(config, algorithm_from_query(params))

    @property
    def scheme_id(self) -> str:
        """``to_query()`` URL-encoded: distinct for distinct schemes, and for an RTN scheme
        equal to ``state.scheme.scheme_id(config)``. ``from_id`` inverts it."""
        return urlencode(self.to_query())

    @classmethod
    def from_id(cls, sid: str) -> WeightScheme:
        """The scheme whose ``scheme_id`` is ``sid``; ``ValueError`` for anything else
        (unknown or repeated keys, bad values, a non-canonical spelling)."""
        if not isinstance(sid, str):
            raise ValueError(f"scheme id must be a str, got {type(sid).__name__}")
        if len(sid) > len(SCHEME_KEYS) * MAX_VALUE_LENGTH:
            raise ValueError(f"scheme id is too long ({len(sid)} characters)")
        params: dict[str, str] = {}
        for key, value in parse_qsl(sid, keep_blank_values=True, strict_parsing=True):
            if key not in SCHEME_KEYS:
                raise ValueError(f"scheme id key {key!r} is not one of {', '.join(SCHEME_KEYS)}")
            if key in params:
                raise ValueError(f"scheme id repeats key {key!r}")
            params[key] = value
        scheme = cls.from_query(params)
        if scheme.scheme_id != sid:
            raise ValueError(f"scheme id {sid!r} is not in canonical form")
        return scheme


def quantize_scheme(
    w: torch.Tensor, scheme: WeightScheme, calibration: torch.Tensor | None = None
) -> WeightQuantResult:
    """``quantize_weight(w, scheme.config, scheme.algorithm, ...)``.

    ``calibration``: the layer's inputs ``[tokens, in_features]``; passed only to the
    algorithms that need it (GPTQ, AWQ), which raise ``ValueError`` without it, as for a
    config they cannot run (``Algorithm.unavailable_reason``).
    """
    if not isinstance(scheme, WeightScheme):
        raise TypeError(f"scheme must be a WeightScheme, got {type(scheme).__name__}")
    x = calibration if scheme.algorithm.needs_calibration else None
    return quantize_weight(
        w, scheme.config, scheme.algorithm, calibration=x, options=scheme.options
    )
