"""Defect: the A/B page's link warnings named a side's keys bare, behind the side's prefix
as a wildcard: ``b.bits=x`` read "Ignored the link's scheme B config (b.* keys: query
parameter bits='x' is not an integer)". Each warning now names the key the link holds:
"scheme B config (b.bits='x' is not an integer)"."""

from __future__ import annotations

from dashboard.services.state.compare import side_from_query


def test_a_side_problem_names_the_key_the_link_holds() -> None:
    (problem,) = side_from_query({"b.bits": "x"}, "b.").problems
    assert problem == "scheme B config (b.bits='x' is not an integer)"
    (problem,) = side_from_query({"a.fmt": "nf4", "a.bits": "8"}, "a.").problems
    assert problem == "scheme A config (a.bits=8 contradicts a.fmt=nf4 (4 bits))"
    (problem,) = side_from_query({"a.algo": "best"}, "a.").problems
    assert problem.startswith("scheme A algorithm (a.algo='best' is not one of"), problem
