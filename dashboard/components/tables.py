"""Column settings the comparison pages' tables share: every error magnitude at three
significant digits (``services.display.errors``), whatever table it is in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import streamlit as st

from dashboard.services.display.errors import ERROR_COLUMNS, ERROR_FORMAT

__all__ = ["error_column", "with_error_formats"]


def error_column(label: str) -> object:
    """A ``NumberColumn`` headed ``label`` that writes its values with ``ERROR_FORMAT``."""
    return st.column_config.NumberColumn(label, format=ERROR_FORMAT)


def with_error_formats(
    columns: Iterable[str], config: Mapping[str, object] | None = None
) -> dict[str, object]:
    """``config`` (column name to a label or a column setting) with every error column among
    ``columns`` (``ERROR_COLUMNS``) written by ``error_column``; a plain-string label in
    ``config`` becomes that column's heading."""
    out: dict[str, object] = dict(config or {})
    for name in columns:
        if name in ERROR_COLUMNS:
            label = out.get(name)
            out[name] = error_column(label if isinstance(label, str) else name)
    return out
