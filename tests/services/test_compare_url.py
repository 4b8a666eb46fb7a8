"""URL state of the comparison pages: the sweep grid (``sw.``) and A/B's schemes (``a.``,
``b.``) round-trip; each bad value loses only its part, with a sentence naming it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard.services.compare.frontier import ErrorAxis
from dashboard.services.compare.grid import SchemeGrid
from dashboard.services.state.algorithm import AlgorithmChoice
from dashboard.services.state.compare import (
    SweepQuery,
    ab_to_query,
    side_from_query,
    side_to_query,
    sweep_from_query,
    sweep_to_query,
)
from dashboard.services.state.scheme import GranularityKind
from quant_core import (
    Algorithm,
    Format,
    Mode,
    PerChannel,
    PerGroup,
    QuantConfig,
    RangeMethod,
    ScaleDtype,
    ZeroPoint,
    preset_names,
)


def _subset(values: list) -> st.SearchStrategy[tuple]:
    return st.lists(st.sampled_from(values), min_size=1, unique=True).map(tuple)


grids = st.builds(
    SchemeGrid,
    bits=_subset(list(range(2, 17))),
    modes=_subset(list(Mode)),
    kinds=_subset(list(GranularityKind)),
    group_sizes=_subset([1, 16, 32, 64, 100, 128, 4096, 1 << 20]),
    formats=_subset(list(Format)),
    base=st.builds(
        QuantConfig,
        range_method=st.sampled_from([r for r in RangeMethod if r is not RangeMethod.ABSMEAN]),
        scale_dtype=st.sampled_from(list(ScaleDtype)),
    ),
    algorithms=_subset(list(Algorithm)),
    zero_points=_subset(list(ZeroPoint)),
    presets=st.lists(st.sampled_from(preset_names()), max_size=4, unique=True).map(tuple),
)


@given(grids, st.booleans(), st.one_of(st.none(), st.sampled_from(list(ErrorAxis))))
def test_sweep_round_trip(grid: SchemeGrid, custom: bool, axis: ErrorAxis | None) -> None:
    query = sweep_to_query(grid, custom, axis)
    assert all(k.startswith("sw.") and isinstance(v, str) for k, v in query.items())
    back = sweep_from_query(query)
    assert back.problems == () and back.has_grid
    assert back.grid(SchemeGrid()) == grid
    assert back.custom_calibration is custom and back.axis is axis


@given(grids.filter(lambda g: bool(g.presets)), st.booleans(), st.booleans())
def test_a_grid_of_shipped_formats_alone_round_trips(
    grid: SchemeGrid, no_formats: bool, no_kinds: bool
) -> None:
    """``sw.fmt=`` / ``sw.gran=`` written empty beside ``sw.presets`` mean "none": the link
    of a grid of shipped formats only gives that grid back, with no problem."""
    grid = replace(
        grid,
        formats=() if no_formats else grid.formats,
        kinds=() if no_kinds else grid.kinds,
    )
    back = sweep_from_query(sweep_to_query(grid))
    assert back.problems == ()
    assert back.grid(SchemeGrid()) == grid


def test_an_empty_format_list_without_shipped_formats_is_refused() -> None:
    back = sweep_from_query({"sw.fmt": "", "sw.gran": ""})
    assert [p.split(" ")[0] for p in back.problems] == ["sw.gran", "sw.fmt"]
    assert back.formats is None and back.kinds is None


def test_sweep_query_example() -> None:
    grid = SchemeGrid(
        bits=(2, 4, 8),
        modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
        kinds=(GranularityKind.GROUP,),
        group_sizes=(32, 128),
        formats=(Format.INT, Format.NF4),
        base=QuantConfig(scale_dtype=ScaleDtype.FP16),
        algorithms=(Algorithm.RTN, Algorithm.GPTQ),
        zero_points=(ZeroPoint.INCLUDE_ZERO, ZeroPoint.FLOAT_MIN),
    )
    assert sweep_to_query(grid, axis=ErrorAxis.OUTPUT_MSE) == {
        "sw.bits": "2,4,8",
        "sw.modes": "symmetric,asymmetric",
        "sw.gran": "group",
        "sw.groups": "32,128",
        "sw.fmt": "int,nf4",
        "sw.algo": "rtn,gptq",
        "sw.zp": "include_zero,float_min",
        "sw.range": "minmax",
        "sw.sdtype": "fp16",
        "sw.y": "output_mse",
    }


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("sw.bits", "2,99", "sw.bits holds '99', not an integer in 2..16"),
        ("sw.bits", "4,4", "repeats a value"),
        ("sw.bits", "", "sw.bits is empty"),
        ("sw.bits", "04", "not an integer"),
        ("sw.groups", "0", "not an integer in 1..1048576"),
        ("sw.modes", "sym", "sw.modes='sym' is not one of: symmetric, asymmetric"),
        ("sw.algo", "rtn,magic", "'magic' is not one of: rtn, gptq, awq, hqq"),
        ("sw.fmt", "int8", "not one of"),
        ("sw.zp", "clamp", "sw.zp='clamp' is not one of: include_zero, float_min, course_clamp"),
        ("sw.range", "max", "sw.range='max'"),
        ("sw.y", "psnr", "sw.y='psnr'"),
        ("sw.calib", "mine", "sw.calib='mine' must be bundled or custom"),
        ("sw.bits", "4," * 120, "too long"),
    ],
)
def test_a_bad_sweep_value_loses_only_its_part(key: str, value: str, words: str) -> None:
    good = sweep_to_query(SchemeGrid(bits=(3, 5), algorithms=(Algorithm.HQQ,)))
    q = sweep_from_query({**good, key: value, "src": "synthetic", "bits": "4"})
    assert len(q.problems) == 1 and words in q.problems[0]
    grid = q.grid(SchemeGrid())
    if key != "sw.bits":
        assert grid.bits == (3, 5)
    if key != "sw.algo":
        assert grid.algorithms == (Algorithm.HQQ,)


def test_no_sweep_keys_is_no_grid() -> None:
    q = sweep_from_query({"src": "synthetic", "bits": "4", "a.bits": "8"})
    assert q == SweepQuery() and not q.has_grid
    assert sweep_from_query({"sw.y": "mse"}).has_grid is False
    assert sweep_from_query({"sw.bits": "3"}).grid(SchemeGrid(bits=(8,))).bits == (3,)
    with pytest.raises(TypeError):
        sweep_from_query([("sw.bits", "4")])  # type: ignore[arg-type]


def test_grids_a_link_cannot_carry_raise() -> None:
    with pytest.raises(ValueError, match="channel axis 0"):
        sweep_to_query(SchemeGrid(axis=1))
    with pytest.raises(ValueError, match="seed"):
        sweep_to_query(SchemeGrid(base=QuantConfig(seed=3)))
    with pytest.raises(TypeError):
        sweep_to_query("grid")  # type: ignore[arg-type]


SIDES = [
    (QuantConfig(bits=8, granularity=PerChannel(0)), AlgorithmChoice()),
    (
        QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(32)),
        AlgorithmChoice(algorithm=Algorithm.GPTQ, gptq_damp=0.3, act_order=False),
    ),
    (
        QuantConfig(bits=3, mode=Mode.ASYMMETRIC, zero_point=ZeroPoint.FLOAT_MIN),
        AlgorithmChoice(algorithm=Algorithm.HQQ),
    ),
    (QuantConfig(format=Format.NF4, bits=4), AlgorithmChoice(algorithm=Algorithm.AWQ)),
]


@pytest.mark.parametrize(("cfg_a", "choice_a"), SIDES)
@pytest.mark.parametrize(("cfg_b", "choice_b"), SIDES[:2])
def test_ab_round_trip(cfg_a, choice_a, cfg_b, choice_b) -> None:
    query = ab_to_query(cfg_a, choice_a, cfg_b, choice_b)
    a, b = side_from_query(query, "a."), side_from_query(query, "b.")
    assert (a.config, a.algorithm, a.problems) == (cfg_a, choice_a, ())
    assert (b.config, b.algorithm, b.problems) == (cfg_b, choice_b, ())


def test_ab_keys_are_prefixed_and_sides_are_independent() -> None:
    query = side_to_query("b.", QuantConfig(bits=6), AlgorithmChoice(algorithm=Algorithm.GPTQ))
    assert query["b.bits"] == "6" and query["b.algo"] == "gptq" and query["b.damp"] == "0.1"
    assert all(k.startswith("b.") for k in query)
    assert side_from_query(query, "a.") == type(side_from_query(query, "a."))()
    # a side without algorithm keys is RTN, the default links leave out
    assert side_from_query({"a.bits": "5"}, "a.").algorithm == AlgorithmChoice()
    custom = AlgorithmChoice(algorithm=Algorithm.AWQ, calibration=("one",), custom_calibration=True)
    assert side_to_query("a.", QuantConfig(), custom)["a.calib"] == "custom"
    with pytest.raises(ValueError, match="prefix"):
        side_to_query("c.", QuantConfig(), AlgorithmChoice())
    with pytest.raises(ValueError, match="prefix"):
        side_from_query({}, "a_")


def test_a_bad_side_value_names_the_side_and_keeps_the_other_part() -> None:
    query = ab_to_query(
        QuantConfig(bits=8),
        AlgorithmChoice(),
        QuantConfig(bits=4),
        AlgorithmChoice(algorithm=Algorithm.HQQ),
    )
    b = side_from_query({**query, "b.bits": "x"}, "b.")
    assert b.config is None and b.algorithm == AlgorithmChoice(algorithm=Algorithm.HQQ)
    assert b.problems == ("scheme B config (b.bits='x' is not an integer)",)
    a = side_from_query({**query, "a.algo": "best"}, "a.")
    assert a.config == QuantConfig(bits=8) and a.algorithm is None
    assert "scheme A algorithm" in a.problems[0] and "algo='best'" in a.problems[0]
    contradiction = side_from_query({"a.bits": "8", "a.fmt": "nf4"}, "a.")
    assert "contradicts" in contradiction.problems[0]
