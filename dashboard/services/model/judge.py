"""What the whole-model page judges the model on by default, and how to read its cosine.

``JUDGE_SENTENCES``: the held-out sentences (none is a calibration sentence) that are
prose. The page scores one sentence per line, so a multi-line code snippet would be
scored line by line (``while True:`` alone), and a shell command or a one-word reply says
little about sentence embeddings.
"""

from __future__ import annotations

import re

from quant_core.calibration import HELD_OUT_SENTENCES

__all__ = ["COSINE_HINT", "JUDGE_SENTENCES", "is_prose"]

_PROSE = re.compile(r"[A-Z¿¡].*[.!?]")


def is_prose(sentence: str) -> bool:
    """One line that starts with a capital letter, ends with ``.``, ``!`` or ``?`` and
    has at least four words: ``"Octopuses have three hearts and blue blood."`` is prose;
    ``"while True:\\n    line = ..."``, ``"npm install ..."`` and ``"Ok."`` are not."""
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a str, got {type(sentence).__name__}")
    one_line = "\n" not in sentence and "\r" not in sentence
    return one_line and bool(_PROSE.fullmatch(sentence.strip())) and len(sentence.split()) >= 4


JUDGE_SENTENCES: tuple[str, ...] = tuple(s for s in HELD_OUT_SENTENCES if is_prose(s))

COSINE_HINT = (
    "Reading the cosine (measured on this model, 54 sentences, benchmarks/model_cosine.py): "
    "int8 per channel, mean cosine 0.9995, kept 98% of the sentences' nearest neighbours "
    "and 99% of the similarity orders; int4 g64, 0.966: 83% and 91%; int3 g64, 0.863: 61% "
    "and 81%. Above 0.999 retrieval is near-identical; at 0.97 one sentence in six finds "
    "another nearest neighbour."
)
"""One line for the page, beside the cosine metrics: what a cosine costs in retrieval, as
``benchmarks/model_cosine.py`` measured it (RTN, fp16 scales, float activations)."""
