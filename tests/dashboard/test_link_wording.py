"""The whole-model, sweep and mixed-precision pages' link warnings read as sentences: each
page writes "Ignored the link's {problem}." for each problem the parser returns."""

from __future__ import annotations

from dashboard.services.mixed.state import mixed_from_query
from dashboard.services.state.compare import sweep_from_query
from dashboard.services.state.model import model_scheme_from_query


def test_model_link_problems_do_not_repeat_the_article() -> None:
    """A bad ``m.bits`` showed "Ignored the link's the weight scheme (query parameter
    bits=1 is outside the range 2..16)." (and "the link's the activation setting")."""
    params = {"m.bits": "1", "m.act": "zzz", "m.a.bits": "x", "m.algo": "nope"}
    problems = model_scheme_from_query(params).problems
    assert len(problems) >= 3, problems
    for problem in problems:
        sentence = f"Ignored the link's {problem}."
        assert "link's the " not in sentence, sentence
    assert any(p.startswith("weight scheme (") and "bits=1" in p for p in problems), problems


def test_sweep_link_problems_name_their_key_first() -> None:
    """The sweep showed "Ignored the link's sw.bits holds '99', not an integer in 2..16."
    and "Ignored the link's sw.modes='x' is not one of: ...": each problem is now the key,
    then why in brackets."""
    params = {"sw.bits": "2,99", "sw.modes": "x", "sw.calib": "mine"}
    problems = sweep_from_query(params).problems
    assert len(problems) == 3, problems
    for problem in problems:
        key, _, why = problem.partition(" (")
        assert key in params and why.endswith(")"), problem


def test_mixed_link_problems_name_their_key_first() -> None:
    """The mixed page showed "Ignored the link's mx.imp='maybe' is not on or off; weighed."
    and "Ignored the link's mx.budget='x' is not a number ..." (the value, then a verb)."""
    params = {
        "mx.budget": "lots",
        "mx.cands": "Q4_0,nope",
        "mx.floor": "Q8_0",
        "mx.imp": "maybe",
    }
    problems = mixed_from_query(params).problems
    assert len(problems) == 4, problems
    for problem in problems:
        key, _, why = problem.partition(" (")
        assert key in params and ")" in why, problem
    assert mixed_from_query({"mx.cands": ",nope"}).problems[-1].startswith("mx.cands (")
