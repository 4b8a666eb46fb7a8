"""``.csv``: a grid of numbers separated by ``,``, ``;``, tabs or spaces; a first row made only
of text is taken as a header.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator

import numpy as np
import torch

from .common import (
    Limits,
    LoadedTensor,
    LoadError,
    TensorInfo,
    check_only_name,
    count,
    display_name,
    quote,
    stem,
)

__all__ = ["list_bytes", "load_bytes"]


def list_bytes(raw: bytes, filename: str, limits: Limits) -> tuple[TensorInfo, ...]:
    """The one grid of the file (parsed: a CSV has no header to read instead)."""
    loaded = _load_csv(raw, filename, limits)
    return (TensorInfo(loaded.name, tuple(loaded.tensor.shape), "text"),)


def load_bytes(raw: bytes, filename: str, name: str | None, limits: Limits) -> LoadedTensor:
    loaded = _load_csv(raw, filename, limits)
    check_only_name(name, loaded.name, filename)
    return loaded


_DELIMITERS = (",", "\t", ";")
_TOKEN = re.compile(r"\S+")  # a cell of a file separated by runs of whitespace


def _load_csv(raw: bytes, filename: str, limits: Limits) -> LoadedTensor:
    """Parse a grid of numbers with numpy's reader; rows and columns in messages count from
    1, blank lines too.

    ``np.loadtxt`` reads the whole grid in one pass (fed line by line, so no second copy of
    the text is made). When it refuses (a quoted cell, a bad cell, a ragged row), the rows
    are read again one cell at a time to parse the quoted cells or to name the first row
    and column at fault; a fuzz test checks that both paths accept the same files.
    """
    shown = display_name(filename)
    if len(raw) > limits.max_bytes:
        raise LoadError(f"{shown} is {len(raw):,} bytes; the limit is {limits.max_bytes:,} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        row = raw.count(b"\n", 0, err.start) + 1
        raise LoadError(
            f"{shown} is not UTF-8 text: undecodable byte at row {row} (byte {err.start + 1:,}); "
            "is it really a CSV file?"
        ) from err
    if "\x00" in text:
        raise LoadError(f"{shown} contains NUL bytes: it is a binary file, not a CSV")
    newline = "\n" if "\n" in text or "\r" not in text else "\r"  # "\r" alone: old Mac files
    first = list(itertools.islice(_csv_lines(text, newline), 20))
    sample = [line for _, line in first]
    if not sample:
        raise LoadError(f"{shown} holds no numbers (only blank lines)")
    delimiter = next((d for d in _DELIMITERS if any(d in line for line in sample)), None)
    n_cols = _n_cells(sample[0], delimiter)
    n_lines = text.count(newline) + 1
    estimate = n_lines * n_cols  # an upper bound, from the line count and the first row
    if estimate > limits.max_elements or estimate * 8 > limits.max_bytes:  # parsed as float64
        raise LoadError(
            f"{shown} has up to {estimate:,} cells ({n_lines:,} lines x {n_cols:,} columns); "
            f"the limit is {min(limits.max_elements, limits.max_bytes // 8):,} cells"
        )
    notes: list[str] = []
    skip = 0
    if _is_header(sample[0], delimiter):
        labels = [quote(c.strip(), 20) for c in itertools.islice(_cells(sample[0], delimiter), 6)]
        more = ", …" if n_cols > 6 else ""
        notes.append(f"Row {first[0][0]} read as a header: {', '.join(labels)}{more}.")
        if len(sample) == 1:
            raise LoadError(f"{shown} holds a header row but no rows of numbers")
        skip = 1

    def rows() -> Iterator[tuple[int, str]]:
        return itertools.islice(_csv_lines(text, newline), skip, None)

    grid = _read_grid(rows, delimiter, n_cols, n_lines, shown)
    with np.errstate(over="ignore"):
        values = grid.astype(np.float32)
    overflowed = int(np.count_nonzero(np.isfinite(grid) & ~np.isfinite(values)))
    notes.append("CSV numbers read as float32.")
    if overflowed:
        notes.append(f"{count(overflowed, 'value')} beyond float32's range became ±inf.")
    return LoadedTensor(torch.from_numpy(values), stem(filename), "text", tuple(notes))


def _read_grid(
    rows: Callable[[], Iterator[tuple[int, str]]],
    delimiter: str | None,
    n_cols: int,
    n_lines: int,
    shown: str,
) -> np.ndarray:
    """The ``[rows, n_cols]`` float64 grid: numpy's reader first, then cell by cell."""
    try:
        grid = np.loadtxt(
            (line for _, line in rows()),
            dtype=np.float64,
            delimiter=delimiter,
            comments=None,
            quotechar=None,  # its quote rules are looser than ours ('"1"2' reads as 12)
            ndmin=2,
        )
        if grid.shape[1] == n_cols:
            return grid
    except Exception:  # numpy raises ValueError, and others on odd input: read it cell by cell
        pass
    out = np.empty((n_lines, n_cols), dtype=np.float64)
    n_rows = 0
    for row, line in rows():
        n = _n_cells(line, delimiter)
        if n != n_cols:
            raise LoadError(
                f"{shown}: row {row} has {count(n, 'column')}; the rows above have {n_cols}"
            )
        for column, cell in enumerate(_cells(line, delimiter)):
            value = _cell_value(cell)
            if value is None:
                where = f"{shown}: row {row}, column {column + 1}"
                if not cell.strip():
                    raise LoadError(f"{where} is empty; expected a number")
                raise LoadError(f"{where} holds {quote(cell.strip())}, which is not a number")
            out[n_rows, column] = value
        n_rows += 1
    return out[:n_rows]


def _csv_lines(text: str, newline: str) -> Iterator[tuple[int, str]]:
    """(1-based row number, line without its ending) for each non-blank line, lazily."""
    start, row = 0, 1
    while start <= len(text):
        end = text.find(newline, start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        if line.endswith("\r"):
            line = line[:-1]
        if line and not line.isspace():
            yield row, line
        start, row = end + 1, row + 1


def _cells(line: str, delimiter: str | None) -> Iterator[str]:
    """The cells of ``line`` one at a time (``line.split(delimiter)``, without building a
    list: one hostile line can hold millions of cells)."""
    if delimiter is None:
        yield from (m.group() for m in _TOKEN.finditer(line))
        return
    start = 0
    while (end := line.find(delimiter, start)) >= 0:
        yield line[start:end]
        start = end + 1
    yield line[start:]


def _n_cells(line: str, delimiter: str | None) -> int:
    if delimiter:
        return line.count(delimiter) + 1
    return sum(1 for _ in _TOKEN.finditer(line))


def _is_header(line: str, delimiter: str | None) -> bool:
    """A row of text labels: no cell is a number, and at least one is not empty."""
    labelled = False
    for cell in _cells(line, delimiter):
        if _cell_value(cell) is not None:
            return False
        labelled = labelled or bool(cell.strip())
    return labelled


def _cell_value(cell: str) -> float | None:
    """The number in one cell (surrounding spaces and quotes allowed), or None."""
    text = cell.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    if not text or not text.isascii() or "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None
