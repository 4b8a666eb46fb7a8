"""Which tensor a page shows, as a small hashable value.

A ``SourceChoice`` keys the dashboard's caches (its ``repr``) and travels in the URL
(``state.source``). A new kind of source is a ``SourceKind`` member, a frozen variant
here added to ``SourceChoice``, its URL keys in ``state.source`` and its branch in the
picker (``components/source.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .examples import Example
from .synthetic import SyntheticSpec

__all__ = [
    "ExampleSource",
    "ModelSource",
    "SourceChoice",
    "SourceKind",
    "SyntheticSource",
    "UploadSource",
]


class SourceKind(enum.Enum):
    """Where a tensor comes from; the value is the URL's ``src``."""

    SYNTHETIC = "synthetic"
    EXAMPLE = "example"
    MODEL = "model"
    UPLOAD = "upload"


@dataclass(frozen=True)
class SyntheticSource:
    spec: SyntheticSpec


@dataclass(frozen=True)
class ExampleSource:
    example: Example


@dataclass(frozen=True)
class ModelSource:
    """A weight of the bundled all-MiniLM-L6-v2, by its safetensors name."""

    tensor: str


@dataclass(frozen=True)
class UploadSource:
    """A tensor of an uploaded file: ``file_id`` is Streamlit's id of that upload."""

    file_id: str
    filename: str
    tensor: str | None


SourceChoice = SyntheticSource | ExampleSource | ModelSource | UploadSource
