"""``RowStore``: the rows of streamed reports by key, kept as they come, shared by the
sessions streaming the same report (the model folder's and the quantized file's)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, Protocol, TypeVar

__all__ = ["RowStore"]


class _Counted(Protocol):
    @property
    def done(self) -> int: ...


R = TypeVar("R", bound=_Counted)


class RowStore(Generic[R]):
    """The rows of each report ``key``, for at most ``max_reports`` keys (the least
    recently used goes first). Thread-safe: sessions streaming one key share one list,
    each row added once and in order (a row counts ``done`` from 1).

    ``row_type``: the class the rows must be (``TypeError`` otherwise)."""

    def __init__(self, row_type: type[R], max_reports: int) -> None:
        if isinstance(max_reports, bool) or not isinstance(max_reports, int) or max_reports < 1:
            raise ValueError(f"max_reports must be a positive int, got {max_reports!r}")
        self.row_type = row_type
        self.max_reports = max_reports
        self._rows: OrderedDict[str, tuple[R, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def rows(self, key: str) -> tuple[R, ...]:
        """The rows of ``key`` so far (empty when unknown)."""
        with self._lock:
            if key in self._rows:
                self._rows.move_to_end(key)
            return self._rows.get(key, ())

    def add(self, key: str, row: R) -> tuple[R, ...]:
        """Append ``row`` to ``key``'s rows when it is the next one (``row.done`` is one
        more than the count so far; otherwise another session got there first and the row
        is dropped); the rows of ``key`` after it."""
        if not isinstance(row, self.row_type):
            raise TypeError(
                f"row must be a {self.row_type.__name__}, got {type(row).__name__}"
            )
        with self._lock:
            rows = self._rows.get(key, ())
            if row.done == len(rows) + 1:
                rows += (row,)
            self._rows[key] = rows
            self._rows.move_to_end(key)
            while len(self._rows) > self.max_reports:
                self._rows.popitem(last=False)
            return rows
