"""The whole-model page's default sentences are prose (``model.judge``)."""

from __future__ import annotations

import pytest

from dashboard.services.model.judge import JUDGE_SENTENCES, is_prose
from quant_core.calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES


def test_default_sentences_are_held_out_prose_one_per_line() -> None:
    assert len(JUDGE_SENTENCES) >= 12
    assert set(JUDGE_SENTENCES) <= set(HELD_OUT_SENTENCES)
    assert not set(JUDGE_SENTENCES) & set(CALIBRATION_SENTENCES)
    for s in JUDGE_SENTENCES:
        # the page scores one sentence per line: a snippet would be scored line by line
        assert "\n" not in s and s[-1] in ".!?" and len(s.split()) >= 4, s


@pytest.mark.parametrize(
    ("text", "prose"),
    [
        ("Octopuses have three hearts and blue blood.", True),
        ("Hola, ¿dónde está la estación de tren más cercana?", True),
        ("while True:\n    line = f.readline()", False),
        ("npm install --save-dev typescript@5.4 eslint", False),
        ("Ok.", False),
    ],
)
def test_is_prose(text: str, prose: bool) -> None:
    assert is_prose(text) is prose
