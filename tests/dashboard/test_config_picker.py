"""The scheme picker on its own: the activation granularity labels and what they return."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _activation_app() -> None:
    import streamlit as st

    from dashboard.components.config import config_picker
    from quant_core import PerChannel, QuantConfig

    cfg = config_picker(
        16, prefix="t_", default=QuantConfig(bits=8, granularity=PerChannel(0)), activation=True
    )
    st.text(f"granularity={cfg.granularity!r}")


def test_activation_granularity_labels_and_values() -> None:
    at = AppTest.from_function(_activation_app, default_timeout=60).run()
    assert not at.exception
    radio = next(r for r in at.radio if r.label == "Granularity")
    assert radio.options == [
        "Per tensor",
        "Per token (one scale per row)",
        "Per feature (one scale per column)",
    ]
    assert radio.value == "token"
    assert not [r for r in at.radio if r.label.startswith("Channel axis")]
    assert "PerChannel(axis=0)" in at.text[0].value
    radio.set_value("feature").run()
    assert "PerChannel(axis=1)" in at.text[0].value
    next(r for r in at.radio if r.label == "Granularity").set_value("tensor").run()
    assert "PerTensor()" in at.text[0].value
