"""Which tensor a page shows, as a small hashable value.

A ``SourceChoice`` keys the dashboard's caches (its ``repr``) and travels in the URL
(``state.source``). A new kind of source is a ``SourceKind`` member, a frozen variant
here added to ``SourceChoice``, its URL keys in ``state.source`` and its branch in the
picker (``components/source.py``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from ..activations.sentences import CALIBRATION, HELD_OUT, RangeMode, SentenceSet
from .examples import Example
from .synthetic import SyntheticSpec
from .typed import TypedValues, format_values

__all__ = [
    "DEFAULT_ACTIVATION_LAYER",
    "ActivationSource",
    "ExampleSource",
    "FolderSource",
    "ModelSource",
    "SourceChoice",
    "SourceKind",
    "SyntheticSource",
    "TypedSource",
    "UploadSource",
]


class SourceKind(enum.Enum):
    """Where a tensor comes from; the value is the URL's ``src``."""

    SYNTHETIC = "synthetic"
    EXAMPLE = "example"
    MODEL = "model"
    UPLOAD = "upload"
    ACTIVATIONS = "act"
    FOLDER = "folder"


@dataclass(frozen=True)
class SyntheticSource:
    spec: SyntheticSpec


@dataclass(frozen=True)
class ExampleSource:
    example: Example


@dataclass(frozen=True, repr=False)
class TypedSource:
    """Values typed or pasted into the teaching examples' box: ``text``, their canonical
    form (``typed.format_values``: it reads back to the same float32 values and shape), and
    ``key``, a digest of those values (``TypedValues.key``). Its ``repr`` is the key alone,
    so cache keys stay short whatever the number of values. Build it with ``of``."""

    text: str
    key: str

    def __repr__(self) -> str:
        return f"TypedSource({self.key!r})"

    @classmethod
    def of(cls, values: TypedValues) -> TypedSource:
        return cls(format_values(values.tensor), values.key)


@dataclass(frozen=True)
class ModelSource:
    """A weight of the bundled all-MiniLM-L6-v2, by its safetensors name; ``None`` for a
    link that names none (the picker opens at its default tensor)."""

    tensor: str | None


@dataclass(frozen=True)
class UploadSource:
    """A tensor of an uploaded file: ``file_id`` is Streamlit's id of that upload."""

    file_id: str
    filename: str
    tensor: str | None


@dataclass(frozen=True)
class FolderSource:
    """A tensor of a model folder on this machine: ``folder`` as the user gave it (a
    folder or one ``.safetensors`` file), ``tensor`` its name in the checkpoint. Offered
    only where the server names allowed roots (``services/model/roots``); the path is
    checked against them whenever it is read, so a link cannot reach outside them.
    ``tensor`` ``None``: a link that names none (the picker opens at the checkpoint's
    first tensor)."""

    folder: str
    tensor: str | None


DEFAULT_ACTIVATION_LAYER = "encoder.layer.0.attention.self.query"
_LAYER_RE = re.compile(r"[A-Za-z0-9_.]{1,200}")


@dataclass(frozen=True)
class ActivationSource:
    """The input ``[tokens, in_features]`` of one linear layer of the bundled model
    (``layer``, a ``named_modules()`` name such as ``"encoder.layer.0.attention.self.query"``)
    on ``sentences``.

    ``ranges``: ``DYNAMIC`` shows the inputs on ``sentences``, each quantized with its own
    ranges; ``STATIC`` shows the inputs on the bundled held-out sentences, quantized with
    ranges calibrated on ``sentences``. ``ValueError`` for a layer name outside
    ``[A-Za-z0-9_.]``; whether the layer exists is checked against the model.
    """

    layer: str = DEFAULT_ACTIVATION_LAYER
    sentences: SentenceSet = CALIBRATION
    ranges: RangeMode = RangeMode.DYNAMIC

    def __post_init__(self) -> None:
        if not isinstance(self.layer, str) or not _LAYER_RE.fullmatch(self.layer):
            raise ValueError(f"layer={self.layer!r} is not a layer name")
        if not isinstance(self.sentences, SentenceSet):
            raise TypeError(f"sentences must be a SentenceSet, got {self.sentences!r}")
        if not isinstance(self.ranges, RangeMode):
            raise TypeError(f"ranges must be a RangeMode, got {self.ranges!r}")

    @property
    def shown(self) -> SentenceSet:
        """The sentences whose inputs are shown: the held-out set under static ranges."""
        return HELD_OUT if self.ranges is RangeMode.STATIC else self.sentences

    @property
    def calibration(self) -> SentenceSet | None:
        """The sentences the static ranges are calibrated on (``None`` when dynamic)."""
        return self.sentences if self.ranges is RangeMode.STATIC else None


SourceChoice = (
    SyntheticSource
    | ExampleSource
    | TypedSource
    | ModelSource
    | UploadSource
    | ActivationSource
    | FolderSource
)
