"""Defect: the Layer page's link warnings named a side's keys bare, as the parser of one
scheme sees them: ``l.w.bits=99`` read "Ignored the link's weight scheme (query parameter
bits=99 is outside the range 2..16)" and ``l.a.fmt=nf4&l.a.mode=asymmetric`` "query
parameters do not form a valid scheme: ... mode=asymmetric ...", keys the link does not
hold. Each warning now names the link's own key, as the Whole model page does."""

from __future__ import annotations

import pytest

from dashboard.services.state.layer import layer_from_query


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"l.scheme": "custom", "l.w.bits": "99"}, ["l.w.bits=99"]),
        ({"l.scheme": "custom", "l.a.fmt": "nf4", "l.a.mode": "asymmetric"}, ["l.a.mode="]),
        ({"l.scheme": "custom", "l.w.preset": "bogus"}, ["l.w.preset='bogus'"]),
        ({"l.scheme": "custom", "l.a.gran": "tensor", "l.a.axis": "1"}, ["l.a.axis=1"]),
    ],
    ids=["w-bits", "a-nf4-asym", "w-preset", "a-axis"],
)
def test_each_side_problem_names_the_key_the_link_holds(
    params: dict[str, str], named: list[str]
) -> None:
    (problem,) = layer_from_query(params).problems
    for key in named:
        assert key in problem, problem
    assert "query parameter" not in problem, problem
