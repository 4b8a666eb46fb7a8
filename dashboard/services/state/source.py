"""A ``SourceChoice`` as URL query parameters: ``source_to_query`` writes them;
``source_from_query`` parses them back, validating every value against a fixed pattern or
enum and raising ``ValueError`` naming the bad key. Nothing is evaluated or unpickled. An
uploaded file cannot travel in a link: its choice has no URL form.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import TypeVar

from ..activations.sentences import RangeMode
from ..sources.choice import (
    DEFAULT_ACTIVATION_LAYER,
    ActivationSource,
    ExampleSource,
    FolderSource,
    ModelSource,
    SourceChoice,
    SourceKind,
    SyntheticSource,
    TypedSource,
)
from ..sources.examples import Example
from ..sources.synthetic import SEED_RANGE, SIDE_RANGE, Distribution, SyntheticSpec
from ..sources.typed import parse_typed_values
from .query import member

__all__ = [
    "MAX_LINK_VALUES",
    "OWN_SENTENCES",
    "SOURCE_KEYS",
    "has_own_sentences",
    "source_from_query",
    "source_to_query",
]

_E = TypeVar("_E", bound=enum.Enum)
_D = TypeVar("_D")

SOURCE_KEYS = (
    "src",
    "dist",
    "rows",
    "cols",
    "dseed",
    "ofrac",
    "omag",
    "ochan",
    "ex",
    "tensor",
    "layer",
    "ranges",
    "sents",
    "folder",
    "vals",
)
OWN_SENTENCES = "own"
"""``sents=own``: the link was made with the user's own sentences, which it cannot carry."""
_MAX_LEN = 200
MAX_LINK_VALUES = 2000
"""The longest ``vals`` (typed values, in ``format_values``' form) a link carries; longer
typed values are not kept in links."""
_INT_RE = re.compile(r"0|[1-9][0-9]{0,9}")
_FLOAT_RE = re.compile(r"[0-9]{1,6}(\.[0-9]{1,12})?")
_TENSOR_RE = re.compile(r"[A-Za-z0-9_.\-]{1,200}")
_LAYER_RE = re.compile(r"[A-Za-z0-9_.]{1,200}")
# A folder path: printable, no control characters (whether it may be read is the roots' call).
_PATH_RE = re.compile(r"[^\x00-\x1f\x7f]{1,200}")


def source_to_query(choice: SourceChoice) -> dict[str, str]:
    """``choice`` as query parameters (an upload gives only ``src=upload``)."""
    if isinstance(choice, SyntheticSource):
        spec = choice.spec
        out = {
            "src": SourceKind.SYNTHETIC.value,
            "dist": spec.distribution.value,
            "rows": str(spec.rows),
            "cols": str(spec.cols),
            "dseed": str(spec.seed),
        }
        if spec.distribution is Distribution.OUTLIERS:
            out["ofrac"] = repr(spec.outlier_fraction)
        if spec.distribution is Distribution.OUTLIERS or spec.outlier_channel is not None:
            out["omag"] = repr(spec.outlier_magnitude)
        if spec.outlier_channel is not None:
            out["ochan"] = str(spec.outlier_channel)
        return out
    if isinstance(choice, ExampleSource):
        return {"src": SourceKind.EXAMPLE.value, "ex": choice.example.value}
    if isinstance(choice, TypedSource):
        out = {"src": SourceKind.EXAMPLE.value, "ex": Example.TYPED.value}
        if len(choice.text) <= MAX_LINK_VALUES:
            out["vals"] = choice.text
        return out
    if isinstance(choice, ModelSource):
        return {"src": SourceKind.MODEL.value, **_tensor_query(choice.tensor)}
    if isinstance(choice, FolderSource):
        return {
            "src": SourceKind.FOLDER.value,
            "folder": choice.folder,
            **_tensor_query(choice.tensor),
        }
    if isinstance(choice, ActivationSource):
        out = {"src": SourceKind.ACTIVATIONS.value, "layer": choice.layer}
        if choice.ranges is not RangeMode.DYNAMIC:
            out["ranges"] = choice.ranges.value
        if not choice.sentences.is_bundled:
            out["sents"] = OWN_SENTENCES  # the text itself is not carried
        return out
    return {"src": SourceKind.UPLOAD.value}


def _tensor_query(name: str | None) -> dict[str, str]:
    return {} if name is None else {"tensor": name}


def _tensor(params: Mapping[str, str]) -> str | None:
    """The link's ``tensor``, or ``None`` where it names none (absent or empty: the
    picker's first tensor); ``ValueError`` for a name outside ``[A-Za-z0-9_.-]``."""
    name = _get(params, "tensor")
    if not name:
        return None
    if not _TENSOR_RE.fullmatch(name):
        raise ValueError(f"tensor={name!r} is not a valid tensor name")
    return name


def _get(params: Mapping[str, str], key: str) -> str | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a single value")
    if len(value) > _MAX_LEN:
        raise ValueError(f"{key} is {len(value)} characters long (at most {_MAX_LEN})")
    return value


def _int(params: Mapping[str, str], key: str, default: int, lo: int, hi: int) -> int:
    raw = _get(params, key)
    if raw is None:
        return default
    if not _INT_RE.fullmatch(raw):
        raise ValueError(f"{key}={raw!r} is not a non-negative integer")
    value = int(raw)
    if not lo <= value <= hi:
        raise ValueError(f"{key}={value} is outside {lo}..{hi}")
    return value


def _float(params: Mapping[str, str], key: str, default: float) -> float:
    raw = _get(params, key)
    if raw is None:
        return default
    if not _FLOAT_RE.fullmatch(raw):
        raise ValueError(f"{key}={raw!r} is not a decimal number")
    return float(raw)


def _enum(params: Mapping[str, str], key: str, enum_type: type[_E], default: _D) -> _E | _D:
    raw = _get(params, key)
    return default if raw is None else member(key, raw, enum_type)


def source_from_query(params: Mapping[str, str], default: SourceChoice) -> SourceChoice:
    """Parse the source keys of ``params``; ``default`` when ``src`` is absent. A model or
    folder link without ``tensor`` (or with ``tensor=``) gives a choice whose tensor is
    ``None``: open at the first tensor.

    Raises ``ValueError`` naming the first bad key (unknown kind, a shape beyond
    ``SIDE_RANGE``, a malformed number, a tensor name with characters outside
    ``[A-Za-z0-9_.-]``, a folder path with control characters, typed values ``vals`` that
    do not parse or exceed ``MAX_LINK_VALUES`` characters). ``src=upload`` cannot be
    restored from a link: also a ValueError.
    """
    kind = _enum(params, "src", SourceKind, None)
    if kind is None:
        return default
    if kind is SourceKind.SYNTHETIC:
        base = SyntheticSpec()
        ochan_raw = _get(params, "ochan")
        spec = SyntheticSpec(
            distribution=_enum(params, "dist", Distribution, base.distribution),
            rows=_int(params, "rows", base.rows, *SIDE_RANGE),
            cols=_int(params, "cols", base.cols, *SIDE_RANGE),
            seed=_int(params, "dseed", base.seed, *SEED_RANGE),
            outlier_fraction=_float(params, "ofrac", base.outlier_fraction),
            outlier_magnitude=_float(params, "omag", base.outlier_magnitude),
            outlier_channel=None
            if ochan_raw is None
            else _int(params, "ochan", 0, 0, SIDE_RANGE[1] - 1),
        )
        return SyntheticSource(spec)
    if kind is SourceKind.EXAMPLE:
        example = _enum(params, "ex", Example, Example.COURSE_3X3)
        if example is not Example.TYPED:
            return ExampleSource(example)
        text = params.get("vals")
        if not isinstance(text, str):
            raise ValueError(
                "ex=typed without vals: the typed values were too long for a link; type or "
                "paste them again"
            )
        if len(text) > MAX_LINK_VALUES:
            raise ValueError(f"vals is {len(text):,} characters long (at most {MAX_LINK_VALUES:,})")
        try:
            return TypedSource.of(parse_typed_values(text))
        except ValueError as exc:
            raise ValueError(f"vals: {exc}") from None
    if kind is SourceKind.MODEL:
        return ModelSource(_tensor(params))
    if kind is SourceKind.FOLDER:
        folder = _get(params, "folder")
        if folder is None or not _PATH_RE.fullmatch(folder):
            raise ValueError(f"folder={folder!r} is not a folder path")
        return FolderSource(folder, _tensor(params))
    if kind is SourceKind.ACTIVATIONS:
        layer = _get(params, "layer")
        if layer is None:
            layer = DEFAULT_ACTIVATION_LAYER
        if not _LAYER_RE.fullmatch(layer):
            raise ValueError(f"layer={layer!r} is not a valid layer name")
        sents = _get(params, "sents")
        if sents is not None and sents != OWN_SENTENCES:
            raise ValueError(f"sents={sents!r}: only sents={OWN_SENTENCES} is known")
        # sents=own: the user's sentences did not travel; the bundled ones stand in (the
        # picker warns, see has_own_sentences).
        return ActivationSource(layer, ranges=_enum(params, "ranges", RangeMode, RangeMode.DYNAMIC))
    raise ValueError("src=upload cannot be restored from a link: upload the file again")


def has_own_sentences(params: Mapping[str, str]) -> bool:
    """Whether a link says it was made with sentences of the user's own (``sents=own``),
    which it does not carry: the page should say the bundled ones are shown instead."""
    return (
        params.get("src") == SourceKind.ACTIVATIONS.value and params.get("sents") == OWN_SENTENCES
    )
