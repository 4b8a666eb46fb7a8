"""Defect: the Whole model page's link warnings named the keys bare, as the parser of one
scheme sees them, not as the link holds them: ``m.a.bits=99`` read "Ignored the link's
activation scheme (query parameter bits=99 is outside the range 2..16)", ``m.algo=x``
read "algorithm (algo='x' is not one of ...)", and ``m.a.fmt=nf4&m.a.mode=asymmetric``
"query parameters do not form a valid scheme: ... mode=asymmetric ...". Each warning now
names the link's own key (``m.a.bits=99``) and drops "query parameter"."""

from __future__ import annotations

import pytest

from dashboard.services.state.model import model_scheme_from_query
from dashboard.services.state.query import link_keys


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"m.bits": "99"}, ["m.bits=99"]),
        ({"m.act": "custom", "m.a.bits": "99"}, ["m.a.bits=99"]),
        ({"m.act": "custom", "m.a.fmt": "nf4", "m.a.bits": "8"}, ["m.a.bits=8", "m.a.fmt=nf4"]),
        ({"m.act": "custom", "m.a.fmt": "nf4", "m.a.mode": "asymmetric"}, ["m.a.mode="]),
        ({"m.preset": "Q4_K", "m.bits": "4"}, ["m.preset", "m.bits"]),
        ({"m.sbits": "4"}, ["m.sbits", "m.sfmt=super"]),
        ({"m.gran": "tensor", "m.axis": "1"}, ["m.axis=1", "m.gran=channel"]),
        ({"m.algo": "x"}, ["m.algo='x'"]),
        ({"m.damp": "x"}, ["m.damp='x'"]),
    ],
    ids=["bits", "a-bits", "a-nf4-bits", "a-nf4-asym", "preset-and-bits", "sbits", "axis",
         "algo", "damp"],
)
def test_each_problem_names_the_key_the_link_holds(
    params: dict[str, str], named: list[str]
) -> None:
    (problem,) = model_scheme_from_query(params).problems
    for key in named:
        assert key in problem, problem
    assert "query parameter" not in problem, problem


def test_link_keys_leaves_the_prose_words_alone() -> None:
    text = link_keys("query parameter bits=8 contradicts fmt=nf4 (4 bits)", "m.", ("bits", "fmt"))
    assert text == "m.bits=8 contradicts m.fmt=nf4 (4 bits)"
    keys = ("group", "range")
    text = link_keys("query parameter group=0 is outside the range 1..9", "m.a.", keys)
    assert text == "m.a.group=0 is outside the range 1..9"
