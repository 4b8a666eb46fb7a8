"""AlgorithmChoice: options, URL round trip, bad links named, sentence parsing."""

from __future__ import annotations

import pytest

from dashboard.services.state.algorithm import (
    AlgorithmChoice,
    algorithm_from_query,
    algorithm_to_query,
    parse_sentences,
)
from quant_core import CALIBRATION_SENTENCES, Algorithm, AWQOptions, GPTQOptions, HQQOptions


@pytest.mark.parametrize(
    "choice",
    [
        AlgorithmChoice(),
        AlgorithmChoice(Algorithm.GPTQ, gptq_damp=0.25, act_order=False),
        AlgorithmChoice(Algorithm.AWQ),
        AlgorithmChoice(Algorithm.HQQ),
    ],
)
def test_url_round_trip(choice: AlgorithmChoice) -> None:
    assert algorithm_from_query(algorithm_to_query(choice)) == choice


def test_default_is_rtn_and_leaves_the_link_alone() -> None:
    assert algorithm_to_query(AlgorithmChoice()) == {}
    assert algorithm_from_query({}) == AlgorithmChoice()
    assert AlgorithmChoice().options is None


def test_options_follow_the_algorithm() -> None:
    gptq = AlgorithmChoice(Algorithm.GPTQ, gptq_damp=0.3).options
    assert isinstance(gptq, GPTQOptions) and gptq.damp == 0.3 and gptq.act_order
    assert isinstance(AlgorithmChoice(Algorithm.AWQ).options, AWQOptions)
    assert isinstance(AlgorithmChoice(Algorithm.HQQ).options, HQQOptions)


def test_key_changes_with_the_calibration_only_where_it_is_used() -> None:
    own = ("one sentence",)
    assert AlgorithmChoice(Algorithm.GPTQ).key() != AlgorithmChoice(
        Algorithm.GPTQ, calibration=own
    ).key()
    assert AlgorithmChoice(Algorithm.HQQ).key() == AlgorithmChoice(
        Algorithm.HQQ, calibration=own
    ).key()


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"algo": "gptq4"}, "algo='gptq4'"),
        ({"damp": "2"}, "damp='2'"),
        ({"damp": "-0.1"}, "damp='-0.1'"),
        ({"actord": "yes"}, "actord='yes'"),
        ({"calib": "mine"}, "calib='mine'"),
    ],
)
def test_bad_links_name_the_key(params: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        algorithm_from_query(params)


def test_custom_calibration_from_a_link_is_the_bundled_set() -> None:
    choice = algorithm_from_query({"algo": "awq", "calib": "custom"})
    assert choice.calibration == CALIBRATION_SENTENCES


def test_parse_sentences() -> None:
    assert parse_sentences(" a \n\n b\n") == ("a", "b")
    with pytest.raises(ValueError, match="at least one"):
        parse_sentences(" \n ")
    with pytest.raises(ValueError, match="sentence 2 has"):
        parse_sentences("ok\n" + "x" * 2001)
    with pytest.raises(ValueError, match="more than"):
        parse_sentences("a\n" * 257)
    with pytest.raises(ValueError, match="damp"):
        AlgorithmChoice(Algorithm.GPTQ, gptq_damp=1.5)
