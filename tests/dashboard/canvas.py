"""The explorer's browser-drawn charts as AppTest sees them: Streamlit components (v2) whose
JSON payload is what the browser draws (dashboard.components.charts), the metric cards
among them."""

from __future__ import annotations

import json
import re

from streamlit.testing.v1 import AppTest

__all__ = ["canvas_payload", "canvas_payloads", "formulas_shown", "metric_value", "metrics_shown"]

METRIC_KEYS = ("metrics", "algorithm_metrics")
"""The explorer's metric cards: its own rows, then an algorithm's."""


def canvas_payloads(at: AppTest) -> dict[str, dict]:
    """Every canvas chart of the last run by its key (``zoom``, ``histogram``, ``worked``)."""
    return {el.key: json.loads(el.proto.json) for el in at.get("bidi_component")}


def canvas_payload(at: AppTest, key: str) -> dict:
    """The payload of the canvas chart ``key``; fails naming the keys there are."""
    found = canvas_payloads(at)
    if key not in found:
        raise AssertionError(f"no canvas chart {key!r}: {sorted(found)}")
    return found[key]


def metrics_shown(at: AppTest) -> list[dict]:
    """Every metric of the last run as ``{"label", "value", "help"}``: the explorer's cards
    (``METRIC_KEYS``), then any ``st.metric`` (the other pages')."""
    found = canvas_payloads(at)
    cards = [
        card for key in METRIC_KEYS if key in found for row in found[key]["rows"] for card in row
    ]
    return cards + [{"label": m.label, "value": m.value, "help": m.help or ""} for m in at.metric]


def metric_value(at: AppTest, label: str) -> str:
    """The value shown for the metric ``label``; fails naming the labels there are."""
    shown = metrics_shown(at)
    for m in shown:
        if m["label"] == label:
            return m["value"]
    raise AssertionError(f"no metric {label!r}: {[m['label'] for m in shown]}")


def formulas_shown(at: AppTest) -> list[str]:
    """The teaching panel's formulas of the last run: its display-math blocks (``$$`` on
    lines of their own, ``TeachingPanel.markdown``), then any ``st.latex``."""
    blocks = [
        f
        for el in at.markdown
        for f in re.findall(r"^\$\$\n(.*?)\n\$\$$", el.value, flags=re.S | re.M)
    ]
    return blocks + [el.value for el in at.latex]
