"""The explorer's canvas charts as AppTest sees them: Streamlit components (v2) whose JSON
payload is what the browser draws (dashboard.components.charts)."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

__all__ = ["canvas_payload", "canvas_payloads"]


def canvas_payloads(at: AppTest) -> dict[str, dict]:
    """Every canvas chart of the last run by its key (``zoom``, ``histogram``, ``worked``)."""
    return {el.key: json.loads(el.proto.json) for el in at.get("bidi_component")}


def canvas_payload(at: AppTest, key: str) -> dict:
    """The payload of the canvas chart ``key``; fails naming the keys there are."""
    found = canvas_payloads(at)
    if key not in found:
        raise AssertionError(f"no canvas chart {key!r}: {sorted(found)}")
    return found[key]
