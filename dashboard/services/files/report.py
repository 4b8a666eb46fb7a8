"""The whole-model report of a quantized file: every tensor's stored type, bytes and bits
per weight from the headers, the mix (bytes per type), and, with the original, each
tensor's error, streamed one tensor at a time.

Per tensor (``measure``): its entry is checked against the size limit from the header, the
stored tensor is loaded and dequantized, the original's tensor of the same name (GGUF's
mapped back) is read, brought into the stored order and compared (``quant_core.files.
compare_with_original``), optionally beside the lab's round-to-nearest under the same
format. Nothing but the row is kept: memory is one tensor's copies.

``FileReportStore`` keeps the rows of each (file, original, options) report as they come,
so a rerun resumes it where it stopped, as the folder report does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from quant_core.files import QuantizedFile, TensorEntry, compare_with_original

from ..display.bits import bits_text
from ..display.counts import counted
from ..display.labels import stored_type_label
from ..display.text import html_literal
from ..row_store import RowStore
from .open import not_float_note

__all__ = [
    "FileReportStore",
    "FileRow",
    "listing_table",
    "measure",
    "mix_figure",
    "mix_table",
    "rows_table",
    "run_file_report",
    "shown_bits",
]

MAX_ELEMENTS = 2**28  # as the folder report: one 16384 x 16384 tensor at a time


def shown_bits(bits: float) -> float:
    """Bits per weight as the explorer's metric writes them (``bits_text``: exact for a
    short binary fraction, else four significant digits), as a number for the tables:
    ``round(x, 4)`` wrote bitsandbytes NF4's 4.7393 and compressed-tensors' 4.5078 where the
    explorer's "Bits per weight, as stored" and the page's caption said 4.739 and 4.508."""
    return float(bits_text(bits))


@dataclass(frozen=True)
class FileRow:
    """One tensor of the report: ``done`` of ``total``, its ``entry``, the original's
    tensor it was compared with (``original``: ``None`` when none matched), the errors
    (MSE and SQNR of the file, and of the lab's RTN when asked and possible), ``note``
    (why a figure is missing) and the ``seconds`` it took."""

    done: int
    total: int
    entry: TensorEntry
    original: str | None
    mse: float | None = None
    sqnr_db: float | None = None
    rtn_mse: float | None = None
    rtn_sqnr_db: float | None = None
    note: str = ""
    seconds: float = 0.0

    def record(self) -> dict[str, object]:
        """The row as the report's table shows it: the errors right after the name and
        type, before the long original name (at a 1100 px window they were past the
        table's right edge, behind a horizontal scroll)."""
        e = self.entry
        return {
            "name": e.name,
            "type": stored_type_label(e.type_name),
            "mse": self.mse,
            "sqnr_db": self.sqnr_db,
            "rtn_mse": self.rtn_mse,
            "rtn_sqnr_db": self.rtn_sqnr_db,
            "bits/weight": shown_bits(e.bits_per_weight),
            "shape": "×".join(str(d) for d in e.shape),
            "bytes": e.nbytes,
            "original": self.original or "",
            "note": self.note,
        }


ROW_COLUMNS = tuple(FileRow(0, 0, TensorEntry("", "", (1,), 0, "", False), None).record())


def listing_table(qfile: QuantizedFile) -> pd.DataFrame:
    """Every tensor from the headers: name, stored type, shape, bytes, bits per weight.
    Stored types are named as the explorer names them (``stored_type_label``: the lab's
    export's ``NF4_DQ`` is "NF4 + double quant"), in this table, the mix and the report."""
    return pd.DataFrame(
        [
            {
                "name": t.name,
                "type": stored_type_label(t.type_name),
                "shape": "×".join(str(d) for d in t.shape),
                "bytes": t.nbytes,
                "bits/weight": shown_bits(t.bits_per_weight),
                "file": t.file,
            }
            for t in qfile.tensors
        ],
        columns=["name", "type", "shape", "bytes", "bits/weight", "file"],
    )


def mix_table(qfile: QuantizedFile) -> pd.DataFrame:
    """Bytes per stored type, most first, with each type's share of the file's bytes."""
    total = max(qfile.nbytes, 1)
    return pd.DataFrame(
        [
            {
                "type": stored_type_label(s.type_name),
                "tensors": s.tensors,
                "values": s.elements,
                "bytes": s.nbytes,
                "share of bytes": f"{100 * s.nbytes / total:.1f}%",
                "bits/weight": shown_bits(s.bits_per_weight),
            }
            for s in qfile.mix()
        ],
        columns=["type", "tensors", "values", "bytes", "share of bytes", "bits/weight"],
    )


def mix_figure(qfile: QuantizedFile) -> go.Figure:
    """A bar per stored type: its bytes (hover: tensors and bits per weight)."""
    mix = qfile.mix()
    fig = go.Figure(
        go.Bar(
            x=[stored_type_label(s.type_name) for s in mix],
            y=[s.nbytes / 1e6 for s in mix],
            customdata=[[counted(s.tensors, "tensor"), bits_text(s.bits_per_weight)] for s in mix],
            hovertemplate="%{x}: %{y:.2f} MB in %{customdata[0]}, "
            "%{customdata[1]} bits/weight<extra></extra>",
        )
    )
    fig.update_layout(
        title=html_literal(f"Bytes per stored type: {qfile.name}"),
        yaxis_title="MB",
        height=320,
        margin={"t": 50, "b": 40, "l": 50, "r": 20},
    )
    return fig


def measure(
    qfile: QuantizedFile,
    entry: TensorEntry,
    original: QuantizedFile | None,
    with_rtn: bool,
    done: int,
    total: int,
) -> FileRow:
    """The row of ``entry`` (see the module docstring); a tensor over the size limit, one
    no original tensor matches, one whose shapes differ, or one (or its original) that
    does not decode (``ValueError``) gets a note, not an error."""
    began = time.perf_counter()
    if original is None:
        return FileRow(done, total, entry, None)
    if entry.numel > MAX_ELEMENTS:
        note = f"not read: {entry.numel:,} values, over the {MAX_ELEMENTS:,} limit"
        return FileRow(done, total, entry, None, note=note)
    names = {t.name for t in original.tensors}
    match = qfile.original_name(entry.name, names)
    if match is None:
        return FileRow(done, total, entry, None, note="no tensor of that name in the original")
    # a tensor the header lists but whose bytes do not decode (a g_idx naming groups the
    # scales lack, a corrupt quant state) is that row's note: raised, it stopped the whole
    # report at that tensor, and the page showed the error above an empty table
    try:
        stored = qfile.load(entry.name, max_elements=MAX_ELEMENTS)
    except ValueError as exc:
        return FileRow(done, total, entry, match, note=f"not decoded: {exc}")
    try:
        x = original.load(match, max_elements=MAX_ELEMENTS).dequantize()
    except ValueError as exc:
        return FileRow(done, total, entry, match, note=f"the original's not decoded: {exc}")
    try:
        cmp = compare_with_original(stored, x, match, qfile.metadata, rtn=with_rtn)
    except ValueError as exc:
        return FileRow(done, total, entry, match, note=str(exc))
    rtn_mse = rtn_sqnr = None
    notes = [not_float_note(original, match) or ""]
    if with_rtn:
        if cmp.rtn_metrics is not None:
            rtn_mse, rtn_sqnr = cmp.rtn_metrics.mse, cmp.rtn_metrics.sqnr_db
        else:
            notes.append(cmp.rtn_unavailable or "")
    note = "; ".join(n for n in notes if n)
    return FileRow(
        done,
        total,
        entry,
        match,
        cmp.file_metrics.mse,
        cmp.file_metrics.sqnr_db,
        rtn_mse,
        rtn_sqnr,
        note,
        time.perf_counter() - began,
    )


class FileReportStore(RowStore[FileRow]):
    """The rows of file reports by key (``RowStore``), for at most ``max_reports`` keys."""

    def __init__(self, max_reports: int = 4) -> None:
        super().__init__(FileRow, max_reports)


def run_file_report(
    store: FileReportStore,
    key: str,
    qfile: QuantizedFile,
    original: QuantizedFile | None,
    with_rtn: bool,
    *,
    on_rows: Callable[[tuple[FileRow, ...], int], None] | None = None,
    every_s: float = 0.5,
) -> tuple[FileRow, ...]:
    """Every row of the report of ``qfile`` (against ``original``), resumed from
    ``store``'s rows for ``key`` (which must name the file, the original and
    ``with_rtn``). ``on_rows(rows, total)`` before the first tensor, then at most every
    ``every_s`` seconds and after the last; an exception it raises (a rerun) stops the
    report with the rows so far kept."""
    entries = qfile.tensors
    total = len(entries)
    rows = store.rows(key)
    if on_rows is not None:
        on_rows(rows, total)
    last = time.monotonic()
    for done in range(len(rows) + 1, total + 1):
        row = measure(qfile, entries[done - 1], original, with_rtn, done, total)
        rows = store.add(key, row)
        now = time.monotonic()
        if on_rows is not None and (now - last >= every_s or done == total):
            on_rows(rows, total)
            last = now
    return rows


def rows_table(rows: Sequence[FileRow]) -> pd.DataFrame:
    """The rows so far, in file order."""
    return pd.DataFrame([r.record() for r in rows], columns=list(ROW_COLUMNS))
