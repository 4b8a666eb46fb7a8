"""The tensor of a comparison page (sweep, A/B), without writing the URL: the page writes
its whole address once (source and its own state), so a run makes one history entry."""

from __future__ import annotations

import streamlit as st

from dashboard.components import url
from dashboard.components.source import current_source, source_caption
from dashboard.services.display.labels import stored_type_label
from dashboard.services.display.text import literal
from dashboard.services.sources.prepared import PreparedSource
from dashboard.services.state.source import source_to_query

__all__ = ["compare_source_or_stop"]


def compare_source_or_stop(purpose: str) -> PreparedSource:
    """The page's tensor and its caption; stops the page (with a message) when there is
    none or it holds NaN/Inf, which ``purpose`` cannot handle (then the URL holds the
    source alone: the page shows nothing else). Otherwise the caller writes the URL
    (``url.write``) with the source's keys and its own."""
    chosen = current_source()
    url.show_warnings()
    if chosen is None:
        st.stop()
    source_caption(chosen)
    ft = chosen.file_tensor
    if ft is not None and ft.entry.quantized:
        # without it, a scheme on the file's own grid reads as lossless ("exact: better on
        # both"), as if that format cost nothing on the original
        stored = literal(stored_type_label(ft.entry.type_name))
        st.caption(
            f"These values are already quantized ({stored}): a scheme "
            "on the same grid gives them back exactly. To judge a format, compare on the "
            "unquantized model's tensor."
        )
    if chosen.nonfinite is not None:
        url.write(source_to_query(chosen.choice))
        st.error(
            f"{chosen.nonfinite.describe()}: {purpose} needs finite values; the Explorer can "
            "quantize the finite ones, or pick another tensor."
        )
        st.stop()
    return chosen
