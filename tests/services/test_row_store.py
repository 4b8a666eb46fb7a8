"""RowStore: rows kept once and in order, per key, least recently used key out first."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import pytest

from dashboard.services.files.report import FileReportStore
from dashboard.services.model.streaming import ReportStore
from dashboard.services.row_store import RowStore


@dataclass(frozen=True)
class Row:
    done: int


def test_rows_are_kept_once_and_in_order() -> None:
    store = RowStore(Row, max_reports=2)
    assert store.rows("a") == ()
    assert store.add("a", Row(1)) == (Row(1),)
    assert store.add("a", Row(1)) == (Row(1),)  # another session's copy: dropped
    assert store.add("a", Row(3)) == (Row(1),)  # not the next one: dropped
    assert store.add("a", Row(2)) == (Row(1), Row(2))
    assert store.rows("a") == (Row(1), Row(2))


def test_the_least_recently_used_key_goes_first() -> None:
    store = RowStore(Row, max_reports=2)
    store.add("a", Row(1))
    store.add("b", Row(1))
    store.rows("a")  # a read counts as a use
    store.add("c", Row(1))
    assert store.rows("b") == ()
    assert store.rows("a") == (Row(1),)
    assert store.rows("c") == (Row(1),)


def test_threads_adding_the_same_rows_keep_each_once() -> None:
    store = RowStore(Row, max_reports=1)

    def stream() -> None:
        for done in range(1, 201):
            store.add("k", Row(done))

    threads = [threading.Thread(target=stream) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.rows("k") == tuple(Row(d) for d in range(1, 201))


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "4"])
def test_a_bad_size_is_named(bad: object) -> None:
    message = re.escape(f"max_reports must be a positive int, got {bad!r}")
    with pytest.raises(ValueError, match=message):
        RowStore(Row, max_reports=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_reports"):
        FileReportStore(max_reports=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("store", [ReportStore(), FileReportStore()])
def test_a_row_of_another_type_is_refused(store: RowStore) -> None:
    with pytest.raises(TypeError, match=r"row must be a \w+, got Row"):
        store.add("k", Row(1))
