"""Defect: the Whole model page, opened with ``m.act=custom&m.a.preset=MXFP4``, said
"Ignored the link's activation scheme (granularity PerGroup(group_size=32) has no activation
name; expected PerTensor(), PerChannel(axis=0) (per token) …)": Python reprs, and no word of
the link's key. Now, as on the Layer page (``l.a.preset``): one warning naming
``m.a.preset=MXFP4`` and why in plain words; the activations keep their default. A custom
activation granularity with no activation name (``m.a.gran=group``, ``m.a.axis=2``) names
its key the same way."""

from __future__ import annotations

import re

import pytest
from markdown_text import plain
from page_runs import open_page

from dashboard.services.state.model import model_scheme_from_query

# a Python repr shown to a visitor: PerGroup(group_size=32), PerTensor(), Format.NF4, <...>
_REPR = re.compile(r"\b[A-Z][A-Za-z]+\((\w+=\w+)?\)|\b[A-Z][A-Za-z]+\.[A-Z0-9_]+\b|<\w")


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"m.act": "custom", "m.a.preset": "MXFP4"}, "m.a.preset=MXFP4"),
        ({"m.act": "custom", "m.a.preset": "q4_k"}, "m.a.preset=Q4_K"),
        ({"m.act": "custom", "m.a.gran": "group"}, "m.a.gran=group"),
        ({"m.act": "custom", "m.a.gran": "group", "m.a.group": "32"}, "m.a.gran=group"),
        ({"m.act": "custom", "m.a.gran": "channel", "m.a.axis": "2"}, "m.a.axis=2"),
        ({"m.act": "custom", "m.a.gran": "block", "m.a.tile": "4x4"}, "m.a.gran=block"),
    ],
    ids=["mxfp4", "q4_k-lower-case", "group", "group-32", "axis-2", "block"],
)
def test_an_activation_the_picker_cannot_take_names_its_key(
    params: dict[str, str], key: str
) -> None:
    parsed = model_scheme_from_query(params)
    assert parsed.activation is None
    assert len(parsed.problems) == 1, parsed.problems
    (problem,) = parsed.problems
    assert problem.startswith(key), problem
    assert not _REPR.search(problem), problem
    assert "activations keep their default" in problem, problem


def test_a_preset_that_is_no_format_is_still_named_by_its_key() -> None:
    (problem,) = model_scheme_from_query({"m.act": "custom", "m.a.preset": "bogus"}).problems
    assert problem.startswith("m.a.preset"), problem
    assert "bogus" in problem, problem


@pytest.mark.slow
def test_the_model_page_says_once_that_activations_take_no_shipped_format() -> None:
    at = open_page("model.py", **{"m.act": "custom", "m.a.preset": "MXFP4"})
    assert not at.exception, [e.value for e in at.exception]
    warnings = [plain(w.value) for w in at.warning]
    named = [w for w in warnings if "m.a.preset=MXFP4" in w]
    assert len(named) == 1, warnings
    assert "the activation picker offers no shipped formats" in named[0], named
    assert not [w for w in warnings if _REPR.search(w)], warnings
