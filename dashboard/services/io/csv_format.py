"""``.csv``: a grid of numbers separated by ``,``, ``;``, tabs or spaces; a first row made only
of text is taken as a header.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

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
_SPACE = re.compile(r"\s")
# Lines longer than this are split piece by piece, so a hostile one-line file stays small.
_LONG_LINE = 1 << 20
# Lines handed to numpy's reader at a time; a bad block is re-read line by line.
_CSV_BLOCK = 1 << 16


def _load_csv(raw: bytes, filename: str, limits: Limits) -> LoadedTensor:
    """Parse a grid of numbers; rows and columns in messages count from 1, blank lines too."""
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
    sample = [line for _, line in itertools.islice(_csv_lines(text, newline), 20)]
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
    rows: Iterator[tuple[int, str]] = _csv_lines(text, newline)
    first_row, first_line = next(rows)
    if _is_header(first_line, delimiter):
        labels = [quote(c.strip(), 20) for c in next(_chunks(first_line, delimiter))[1][:6]]
        more = ", …" if n_cols > 6 else ""
        notes.append(f"Row {first_row} read as a header: {', '.join(labels)}{more}.")
    else:
        rows = itertools.chain([(first_row, first_line)], rows)
    out = np.empty((n_lines, n_cols), dtype=np.float64)
    n_rows = 0
    while block := list(itertools.islice(rows, _CSV_BLOCK)):
        _parse_block(block, delimiter, out[n_rows : n_rows + len(block)], shown)
        n_rows += len(block)
    if n_rows == 0:
        raise LoadError(f"{shown} holds a header row but no rows of numbers")
    grid = out[:n_rows]
    with np.errstate(over="ignore"):
        values = grid.astype(np.float32)
    overflowed = int(np.count_nonzero(np.isfinite(grid) & ~np.isfinite(values)))
    notes.append("CSV numbers read as float32.")
    if overflowed:
        notes.append(f"{count(overflowed, 'value')} beyond float32's range became ±inf.")
    return LoadedTensor(torch.from_numpy(values), stem(filename), "text", tuple(notes))


def _parse_block(
    block: list[tuple[int, str]], delimiter: str | None, out: np.ndarray, shown: str
) -> None:
    """Parse lines into ``out``: numpy's C reader first, then line by line for the message.

    ``np.loadtxt`` (without quote handling) accepts the same cells as ``_cell_value``; a
    fuzz test checks that. When it fails (quoted cells, a bad cell, a ragged row), the slow
    path finds the first bad row and cell, or parses the block itself.
    """
    try:
        values = np.loadtxt(
            [line for _, line in block],
            dtype=np.float64,
            delimiter=delimiter,
            comments=None,
            quotechar=None,  # its quote rules are looser than ours ('"1"2' reads as 12)
            ndmin=2,
        )
        if values.shape == out.shape:
            out[:] = values
            return
    except Exception:  # numpy raises ValueError, and others on odd input: parse it slowly
        pass
    n_cols = out.shape[1]
    for i, (row, line) in enumerate(block):
        n = _n_cells(line, delimiter)
        if n != n_cols:
            raise LoadError(
                f"{shown}: row {row} has {count(n, 'column')}; the rows above have {n_cols}"
            )
        _parse_line(line, delimiter, out[i], row, shown)


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


def _chunks(line: str, delimiter: str | None) -> Iterator[tuple[str, list[str]]]:
    """``(piece, its cells)`` for pieces of about ``_LONG_LINE`` characters cut at separators.

    The cells of all pieces together are ``line.split(delimiter)``; a hostile one-line file
    is never split into one huge list.
    """
    start, end = 0, len(line)
    while True:
        cut = end
        if end - start > _LONG_LINE:
            if delimiter:
                found = line.find(delimiter, start + _LONG_LINE)
            else:
                match = _SPACE.search(line, start + _LONG_LINE)
                found = match.start() if match else -1
            cut = found if found >= 0 else end
        piece = line[start:cut]
        yield piece, piece.split(delimiter) if delimiter else piece.split()
        if cut >= end:
            return
        start = cut + 1


def _n_cells(line: str, delimiter: str | None) -> int:
    if delimiter:
        return line.count(delimiter) + 1
    return sum(len(cells) for _, cells in _chunks(line, None))


def _is_header(line: str, delimiter: str | None) -> bool:
    """A row of text labels: no cell is a number, and at least one is not empty."""
    labelled = False
    for _, cells in _chunks(line, delimiter):
        for cell in cells:
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


def _parse_line(line: str, delimiter: str | None, out: np.ndarray, row: int, shown: str) -> None:
    """Write the numbers of ``line`` into ``out`` or raise ``LoadError`` naming the bad cell."""
    column = 0
    for piece, cells in _chunks(line, delimiter):
        stop = column + len(cells)
        if piece.isascii() and "_" not in piece:
            try:  # the common case: plain numbers, parsed at C speed
                out[column:stop] = [float(cell) for cell in cells]
                column = stop
                continue
            except ValueError:
                pass
        for offset, cell in enumerate(cells):
            value = _cell_value(cell)
            if value is None:
                where = f"{shown}: row {row}, column {column + offset + 1}"
                if not cell.strip():
                    raise LoadError(f"{where} is empty; expected a number")
                raise LoadError(f"{where} holds {quote(cell.strip())}, which is not a number")
            out[column + offset] = value
        column = stop
