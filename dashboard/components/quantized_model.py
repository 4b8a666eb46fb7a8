"""The whole-model page for a quantized file: every tensor with its stored type, bytes and
bits per weight from the headers, the mix (bytes per type), and, with the original, each
tensor's error (and the lab's round-to-nearest's), streamed with a progress bar."""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from dashboard import cache
from dashboard.components.persist import PERSIST
from dashboard.components.quantized_view import original_picker
from dashboard.components.tables import with_error_formats
from dashboard.services.display.bits import bits_text
from dashboard.services.display.counts import counted
from dashboard.services.display.sizes import compact_bytes
from dashboard.services.display.text import literal
from dashboard.services.files.open import QuantizedModel
from dashboard.services.files.report import (
    listing_table,
    mix_figure,
    mix_table,
    rows_table,
    run_file_report,
)

__all__ = ["COUNT_COLUMNS", "quantized_model_page"]

COUNT_COLUMNS = ("tensors", "values", "bytes")
"""The tables' whole-number columns, written with the reader's thousands separators:
Streamlit's default wrote a 7B model's Q4_K bytes as 3825205248 beside the caption's
"3.83 GB" and the picker's "26,624 bytes"."""


def _counts(columns: Iterable[str]) -> dict[str, object]:
    """``COUNT_COLUMNS`` among ``columns``, each a ``NumberColumn`` of localized format."""
    return {
        c: st.column_config.NumberColumn(c, format="localized")
        for c in columns
        if c in COUNT_COLUMNS
    }


def quantized_model_page(model: QuantizedModel) -> None:
    """Draw the report of ``model`` (its listing, mix and, with the original, errors)."""
    qfile = model.file
    if not qfile.tensors:
        # nothing to report: the caption read "0 tensors (0 quantized) · 0 B · 0.000 bits
        # per weight overall" above an empty mix, table and chart
        st.warning(f"{literal(model.label)} lists no tensors: there is nothing to report.")
        return
    quantized = sum(t.quantized for t in qfile.tensors)
    st.caption(
        f"**{literal(model.label)}** · {qfile.kind.label} · "
        f"{counted(len(qfile.tensors), 'tensor')} "
        f"({quantized:,} quantized) · {compact_bytes(qfile.nbytes, 1)} · "
        # as the explorer's metric and the tables write bits ("6.5", not "6.500")
        f"{bits_text(8 * qfile.nbytes / max(qfile.numel, 1))} bits per weight overall"
    )
    for note in qfile.notes:
        st.caption(literal(note))
    st.subheader("The mix: bytes per stored type")
    # the table on a row of its own: in two fifths of the page at a 1100 px window its
    # "share of bytes" and "bits/weight" columns were past the edge
    mix = mix_table(qfile)
    st.dataframe(mix, hide_index=True, key="qm_mix", column_config=_counts(mix.columns))
    st.plotly_chart(mix_figure(qfile), key="qm_mix_chart", config={"displaylogo": False})
    with st.expander(f"Every tensor, from the headers ({len(qfile.tensors):,})"):
        listing = listing_table(qfile)
        st.dataframe(
            listing, hide_index=True, key="qm_listing", column_config=_counts(listing.columns)
        )

    st.subheader("Error against the original")
    original = original_picker("qm")
    if original is None:
        st.info("Give the original weights to measure each tensor's error.")
        return
    with_rtn = st.checkbox(
        "Also the lab's round-to-nearest of the original, same format (slower)",
        key="qm_rtn",
        persist_state=PERSIST,
    )
    bar, live = st.progress(0.0), st.empty()

    def show(rows, total):
        bar.progress(len(rows) / max(total, 1), text=f"{len(rows):,} of {counted(total, 'tensor')}")
        table = rows_table(rows)
        config = with_error_formats(table.columns, _counts(table.columns))
        live.dataframe(table, hide_index=True, column_config=config)  # redrawn: no key

    key = f"{qfile.key}|{original.key}|{with_rtn}"
    try:  # a rerun stops it at the next redraw; the rows done so far are kept
        rows = run_file_report(cache.file_reports(), key, qfile, original, with_rtn, on_rows=show)
    except ValueError as exc:
        st.error(f"{literal(model.label)}: {literal(exc)}")
        return
    bar.empty()
    live.empty()
    # a tensor matched by name but not compared (another shape, bytes that do not decode)
    # counted as not matched: "0 of 2 tensors matched" above a table naming both originals
    compared = sum(r.mse is not None for r in rows)
    uncompared = sum(r.original is not None and r.mse is None for r in rows)
    st.caption(
        f"{compared:,} of {counted(len(rows), 'tensor')} compared with "
        f"{literal(original.name)}"
        + (
            f" ({uncompared:,} more matched by name but not compared: see their notes)"
            if uncompared
            else ""
        )
        + "; each read, decoded and compared one at a time."
    )
    table = rows_table(rows)  # errors at 3 significant digits, not 0.000002
    st.dataframe(
        table,
        hide_index=True,
        key="qm_report",
        column_config=with_error_formats(table.columns, _counts(table.columns)),
    )
