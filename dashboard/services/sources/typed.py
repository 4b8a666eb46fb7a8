"""Values typed or pasted into a text box: a 1-D or 2-D tensor, or a message saying what is
wrong with the text.

Two ways of writing them are read:

- a grid: one row per line, values separated by commas, semicolons, tabs or spaces
  (``0.9372, 2.3312, 3.2122``). One line, or one value per line, is a 1-D vector; several
  values on each of several lines are the rows of a matrix;
- Python / NumPy / PyTorch list syntax, as printed or as written in code:
  ``[0.9372, 2.3312]``, ``[[1, 2], [3, 4]]``, ``a = torch.tensor([...])``,
  ``np.array([[...]], dtype=np.float32)``: one bracket level is a vector, two a matrix.

Numbers are Python's float syntax (``-1.5``, ``2e-3``, ``nan``, ``inf``), read as float32.
Nothing is evaluated: the text is split into tokens and each number parsed on its own.
Every refusal is a ``TypedValuesError`` (a ``ValueError``) whose message names the row
and value at fault; the text in messages is quoted and shortened, but it is the user's:
show it as literal text.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass

import numpy as np
import torch

from ..io.common import count, quote

__all__ = [
    "MAX_TYPED_CHARS",
    "MAX_TYPED_VALUES",
    "TypedValues",
    "TypedValuesError",
    "format_values",
    "parse_typed_values",
]

MAX_TYPED_VALUES = 65_536
"""The most values the box takes (a 256x256 matrix); bigger tensors come as files."""
MAX_TYPED_CHARS = 1_000_000
_MAX_TOKEN = 64
_SEPARATORS = re.compile(r"[,;\s]+")
# A name before the brackets: ``a = ``, ``torch.tensor(``, ``a = np.array(``.
_PREFIX = re.compile(r"\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*=\s*)?(?:[A-Za-z_][A-Za-z0-9_.]*\s*\(\s*)?")
# After the closing bracket: keyword arguments and the call's ``)``, nothing else.
_SUFFIX = re.compile(r"\s*(?:,\s*[A-Za-z_][A-Za-z0-9_]*\s*=\s*[A-Za-z0-9_.]+\s*)*\)?\s*;?\s*")
_BRACKET_TOKEN = re.compile(r"\[|\]|,|[^\[\],\s]+")


class TypedValuesError(ValueError):
    """Typed text that is not a 1-D or 2-D grid of numbers; ``str(err)`` is the message."""


@dataclass(frozen=True, eq=False)
class TypedValues:
    """The parsed values: ``tensor`` (float32, 1-D ``[n]`` or 2-D ``[rows, cols]``),
    ``notes`` (how the text was read), ``key`` (a digest of the values and shape: equal
    values give equal keys, whatever the spacing of the text)."""

    tensor: torch.Tensor
    notes: tuple[str, ...]
    key: str


def _number(token: str, where: str) -> float:
    text = token.strip()
    if len(text) > _MAX_TOKEN or not text.isascii() or "_" in text:
        raise TypedValuesError(f"{where} holds {quote(text, 24)}, which is not a number")
    try:
        return float(text)
    except ValueError:
        raise TypedValuesError(f"{where} holds {quote(text, 24)}, which is not a number") from None


def _check_count(n: int) -> None:
    if n > MAX_TYPED_VALUES:
        raise TypedValuesError(
            f"the text holds {n:,} values; the box takes up to {MAX_TYPED_VALUES:,} (upload a "
            ".csv, .npy or .safetensors file for bigger tensors)"
        )


def _grid(text: str) -> tuple[list[list[float]], bool, tuple[str, ...]]:
    """Rows of a whitespace/comma grid, and whether it is a vector."""
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    rows_tokens = [
        (row, tokens)
        for row, line in lines
        if (tokens := [t for t in _SEPARATORS.split(line.strip()) if t])
    ]
    if not rows_tokens:
        raise TypedValuesError("the text holds separators but no numbers")
    _check_count(sum(len(tokens) for _, tokens in rows_tokens))
    rows = [
        [_number(t, f"row {row}, value {j + 1}") for j, t in enumerate(tokens)]
        for row, tokens in rows_tokens
    ]
    if len(rows) == 1:
        return rows, True, ()
    if all(len(r) == 1 for r in rows):
        note = f"One value per line: read as a vector of {len(rows)}."
        return [[r[0] for r in rows]], True, (note,)
    width = len(rows[0])
    for (row, _), values in zip(rows_tokens, rows, strict=True):
        if len(values) != width:
            raise TypedValuesError(
                f"row {row} has {count(len(values), 'value')}; the first row has {width} "
                "(every row of a matrix needs as many)"
            )
    return rows, False, ()


def _bracketed(text: str, start: int) -> tuple[list[list[float]], bool]:
    """The nested list opening at ``text[start]``: one level is a vector, two a matrix."""
    prefix = text[:start]
    if not _PREFIX.fullmatch(prefix):
        raise TypedValuesError(
            f"unexpected text {quote(prefix.strip(), 24)} before the opening bracket"
        )
    tokens = _BRACKET_TOKEN.finditer(text, start)
    depth, max_depth = 0, 0
    rows: list[list[float]] = []
    current: list[float] | None = None
    flat: list[float] = []
    end = None
    expect_value = True
    for m in tokens:
        tok = m.group()
        if tok == "[":
            depth += 1
            max_depth = max(max_depth, depth)
            if depth > 2:
                raise TypedValuesError(
                    "the brackets nest 3 deep: the box takes a vector [..] or a matrix "
                    "[[..], [..]]"
                )
            if depth == 2:
                if current is not None or flat:
                    raise TypedValuesError("a matrix's rows must all be in brackets: [[..], [..]]")
                current = []
            expect_value = True
        elif tok == "]":
            if depth == 2:
                if not current:
                    raise TypedValuesError(f"row {len(rows) + 1} of the matrix is empty")
                rows.append(current)
                current = None
            depth -= 1
            if depth == 0:
                end = m.end()
                break
            expect_value = False
        elif tok == ",":
            if expect_value and not (depth == 1 and rows):
                raise TypedValuesError("two commas in a row, or a comma with no value before it")
            expect_value = True
        else:
            if depth == 1 and rows:
                raise TypedValuesError("a matrix's rows must all be in brackets: [[..], [..]]")
            where = f"row {len(rows) + 1}, value {len(current) + 1}" if current is not None else (
                f"value {len(flat) + 1}"
            )
            value = _number(tok, where)
            (current if current is not None else flat).append(value)
            if len(flat) + sum(len(r) for r in rows) + len(current or ()) > MAX_TYPED_VALUES:
                _check_count(MAX_TYPED_VALUES + 1)
            expect_value = False
    if end is None:
        raise TypedValuesError(f"a bracket is not closed: {depth} ']' missing at the end")
    rest = text[end:]
    if not _SUFFIX.fullmatch(rest):
        raise TypedValuesError(
            f"unexpected text {quote(rest.strip(), 24)} after the closing bracket"
        )
    if max_depth == 1:
        if not flat:
            raise TypedValuesError("the brackets hold no values")
        return [flat], True
    width = len(rows[0])
    for i, r in enumerate(rows):
        if len(r) != width:
            raise TypedValuesError(
                f"row {i + 1} has {count(len(r), 'value')}; the first row has {width} "
                "(every row of a matrix needs as many)"
            )
    return rows, False


def parse_typed_values(text: object) -> TypedValues:
    """The values of ``text`` (see the module docstring). Raises ``TypedValuesError`` for
    empty text, a value that is not a number, ragged rows, unbalanced or too deep brackets,
    more than ``MAX_TYPED_VALUES`` values or ``MAX_TYPED_CHARS`` characters; ``TypeError``
    when ``text`` is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if len(text) > MAX_TYPED_CHARS:
        raise TypedValuesError(
            f"the text is {len(text):,} characters long; the box takes up to "
            f"{MAX_TYPED_CHARS:,} (upload a file for bigger tensors)"
        )
    if "\x00" in text:
        raise TypedValuesError("the text holds NUL characters: paste numbers as text")
    if not text.strip():
        raise TypedValuesError("the box is empty: type or paste some numbers")
    start = text.find("[")
    if start >= 0:
        rows, vector = _bracketed(text, start)
        notes: tuple[str, ...] = ()
    else:
        if "]" in text:
            raise TypedValuesError("a ']' closes a bracket that was never opened")
        rows, vector, notes = _grid(text)
    values = np.array(rows, dtype=np.float64)
    with np.errstate(over="ignore"):
        f32 = values.astype(np.float32)
    overflow = int(np.count_nonzero(np.isfinite(values) & ~np.isfinite(f32)))
    if overflow:
        notes += (f"{count(overflow, 'value')} beyond float32's range became ±inf.",)
    tensor = torch.from_numpy(f32.reshape(-1) if vector else f32)
    shape = "x".join(str(d) for d in tensor.shape)
    digest = hashlib.sha256(f"{shape}|".encode() + f32.tobytes()).hexdigest()[:16]
    return TypedValues(tensor, notes, f"typed:{shape}:{digest}")


def format_values(tensor: torch.Tensor) -> str:
    """``tensor`` (1-D or 2-D float) as text ``parse_typed_values`` reads back to the same
    float32 values and shape: the shortest repr of each value, ``a, b, c`` for a vector,
    ``[[a, b], [c, d]]`` for a matrix."""
    if not isinstance(tensor, torch.Tensor) or tensor.dim() not in (1, 2):
        got = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise ValueError(f"format_values takes a 1-D or 2-D tensor, got {got}")

    def row(values: torch.Tensor) -> str:
        return ", ".join(_shortest(v) for v in values.to(torch.float32).tolist())

    if tensor.dim() == 1:
        return row(tensor)
    return "[" + ", ".join(f"[{row(r)}]" for r in tensor) + "]"


def _shortest(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return str(np.float32(v))  # numpy's shortest text that reads back to this float32
