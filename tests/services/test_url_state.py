"""url_state: a QuantConfig survives query parameters; anything tampered raises ValueError."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dashboard.services.state.link_fixes import link_fixes
from dashboard.services.state.scheme import (
    AXIS_RANGE,
    GROUP_RANGE,
    MAX_VALUE_LENGTH,
    PERCENTILE_RANGE,
    QUERY_KEYS,
    SEED_RANGE,
    GranularityKind,
    config_from_query,
    config_from_scheme_id,
    config_to_query,
    scheme_id,
)
from quant_core import (
    DoubleQuantScales,
    FloatScales,
    Format,
    FP8Scales,
    Mode,
    PerBlock,
    PerChannel,
    PerGroup,
    PerTensor,
    PowerOfTwoScales,
    QuantConfig,
    RangeMethod,
    Rounding,
    ScaleDtype,
    SuperBlockScales,
    ZeroPoint,
    preset_names,
)

ENUM_KEYS = {
    "mode": Mode,
    "gran": GranularityKind,
    "fmt": Format,
    "range": RangeMethod,
    "round": Rounding,
    "sdtype": ScaleDtype,
    "zp": ZeroPoint,
}

granularities = st.one_of(
    st.just(PerTensor()),
    st.builds(PerChannel, st.integers(*AXIS_RANGE)),
    st.builds(PerGroup, st.integers(*GROUP_RANGE)),
    st.builds(PerBlock, st.integers(1, 512), st.integers(1, 512)),
)


SCALE_FORMATS = [
    PowerOfTwoScales(),
    FP8Scales(),
    FP8Scales(tensor_scale=False),
    SuperBlockScales(6, 256),
    SuperBlockScales(4, 512, signed=False),
    SuperBlockScales(8, 256, signed=True),
    DoubleQuantScales(256),
    DoubleQuantScales(64),
]


@st.composite
def parametric_configs(draw: st.DrawFn) -> QuantConfig:
    fmt = draw(st.sampled_from(Format))
    is_int = fmt is Format.INT
    mode = draw(st.sampled_from(Mode)) if is_int else Mode.SYMMETRIC
    ranges = [m for m in RangeMethod if m is not RangeMethod.ABSMEAN or mode is Mode.SYMMETRIC]
    fields = {
        "bits": draw(st.integers(2, 16)) if is_int else 8,
        "mode": mode,
        "granularity": draw(granularities),
        "format": fmt,
        "range_method": draw(st.sampled_from(ranges)),
        "percentile": draw(
            st.one_of(
                st.floats(*PERCENTILE_RANGE, allow_nan=False),
                st.integers(int(PERCENTILE_RANGE[0]), int(PERCENTILE_RANGE[1])),
            )
        ),
        "rounding": draw(st.sampled_from(Rounding)),
        "seed": draw(st.integers(*SEED_RANGE)),
        "scale_dtype": draw(st.sampled_from(ScaleDtype)),
        "zero_point": draw(st.sampled_from(ZeroPoint)),
    }
    scale_format = draw(st.one_of(st.just(FloatScales()), st.sampled_from(SCALE_FORMATS)))
    try:  # a two-level scale format that does not fit the rest: the one-level config
        return QuantConfig(**fields, scale_format=scale_format)
    except ValueError:
        return QuantConfig(**fields)


def configs() -> st.SearchStrategy[QuantConfig]:
    """Parametric configs, and now and then a shipped format by name."""
    named = st.sampled_from(preset_names()).map(QuantConfig.from_name)
    return st.one_of(parametric_configs(), parametric_configs(), named)


@given(configs())
def test_any_valid_config_round_trips(cfg: QuantConfig) -> None:
    params = config_to_query(cfg)
    assert set(params) <= set(QUERY_KEYS)
    assert all(isinstance(v, str) and len(v) <= MAX_VALUE_LENGTH for v in params.values())
    assert config_from_query(params) == cfg
    assert config_from_scheme_id(scheme_id(cfg)) == cfg


@given(configs(), configs())
def test_scheme_id_is_equal_exactly_when_configs_are(a: QuantConfig, b: QuantConfig) -> None:
    assert (scheme_id(a) == scheme_id(b)) == (a == b)


def test_example_query_and_scheme_id() -> None:
    cfg = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(32))
    assert config_to_query(cfg) == {
        "bits": "4",
        "mode": "asymmetric",
        "gran": "group",
        "group": "32",
        "fmt": "int",
        "range": "minmax",
        "pct": "99.9",
        "round": "nearest",
        "seed": "0",
        "sdtype": "fp32",
        "zp": "include_zero",
    }
    assert scheme_id(cfg) == (
        "bits=4&mode=asymmetric&gran=group&group=32&fmt=int&range=minmax&pct=99.9"
        "&round=nearest&seed=0&sdtype=fp32&zp=include_zero"
    )


@pytest.mark.parametrize("zp", list(ZeroPoint))
def test_zero_point_round_trips_and_only_where_it_applies(zp: ZeroPoint) -> None:
    cfg = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(32), zero_point=zp)
    params = config_to_query(cfg)
    assert params["zp"] == zp.value
    assert config_from_query(params) == cfg
    assert config_from_query(params).zero_point is zp
    assert config_from_scheme_id(scheme_id(cfg)) == cfg
    assert "zp" not in config_to_query(QuantConfig(bits=4))
    assert "zp" not in config_to_query(QuantConfig(format=Format.NF4))
    # a link without zp keeps the default convention
    del params["zp"]
    assert config_from_query(params).zero_point is ZeroPoint.INCLUDE_ZERO


def test_axis_and_group_only_where_they_apply() -> None:
    assert "axis" not in config_to_query(QuantConfig()) and "group" not in config_to_query(
        QuantConfig()
    )
    assert config_to_query(QuantConfig(granularity=PerChannel(1)))["axis"] == "1"
    assert "group" not in config_to_query(QuantConfig(granularity=PerChannel(1)))


def test_missing_keys_take_defaults_and_unknown_keys_are_ignored() -> None:
    # sdtype aside (an old link without it gets the pages' fp16), QuantConfig's defaults
    d = {"scale_dtype": ScaleDtype.FP16}
    assert config_from_query({}) == QuantConfig(**d)
    assert config_from_query({"page": "sweep", "bits": "4"}) == QuantConfig(bits=4, **d)
    assert config_from_query({"gran": "group"}) == QuantConfig(granularity=PerGroup(), **d)
    assert config_from_query({"gran": "channel"}) == QuantConfig(granularity=PerChannel(0), **d)
    assert config_from_query({"fmt": "nf4"}) == QuantConfig(format=Format.NF4, **d)


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"mode": "sideways"}, ["mode", "sideways"]),
        ({"mode": "SYMMETRIC"}, ["mode", "SYMMETRIC"]),
        ({"bits": "999"}, ["bits", "999"]),
        ({"bits": "1"}, ["bits", "1"]),
        ({"bits": "4.0"}, ["bits", "4.0"]),
        ({"bits": "four"}, ["bits", "four"]),
        ({"bits": " 4"}, ["bits"]),
        ({"bits": "+4"}, ["bits", "+4"]),
        ({"bits": "04"}, ["bits", "04"]),
        ({"bits": ""}, ["bits"]),
        ({"gran": "tiles"}, ["gran", "tiles"]),
        ({"gran": "block", "tile": "0x128"}, ["tile", "0x128"]),
        ({"gran": "block", "tile": "128"}, ["tile", "128"]),
        ({"tile": "128x128"}, ["tile", "gran"]),
        ({"sfmt": "e9m0"}, ["sfmt", "e9m0"]),
        ({"sfmt": "super", "sbits": "9"}, ["sbits", "9"]),
        ({"sfmt": "super", "ssigned": "2"}, ["ssigned", "2"]),
        ({"sbits": "6"}, ["sbits", "super"]),
        ({"sfmt": "e8m0", "sblock": "256"}, ["sblock", "e8m0"]),
        ({"sfmt": "e8m0", "mode": "asymmetric"}, ["E8M0", "asymmetric"]),
        ({"recipe": "gptq"}, ["recipe", "gptq"]),
        ({"recipe": "llama_cpp"}, ["llama.cpp", "GGUF"]),
        ({"preset": "Q9_K"}, ["preset", "Q9_K"]),
        ({"preset": "Q4_K", "bits": "4"}, ["preset", "bits"]),
        ({"gran": "group", "group": "0"}, ["group", "0"]),
        ({"gran": "group", "group": "-32"}, ["group", "-32"]),
        ({"gran": "group", "group": str(GROUP_RANGE[1] + 1)}, ["group"]),
        ({"gran": "channel", "axis": "999"}, ["axis", "999"]),
        ({"gran": "channel", "axis": "1e3"}, ["axis", "1e3"]),
        ({"group": "32"}, ["group", "gran"]),
        ({"gran": "channel", "group": "32"}, ["group", "gran"]),
        ({"axis": "0"}, ["axis", "gran"]),
        ({"fmt": "int3"}, ["fmt", "int3"]),
        ({"fmt": "nf4", "bits": "8"}, ["bits", "nf4"]),
        ({"fmt": "nf4", "mode": "asymmetric"}, ["mode", "asymmetric"]),
        ({"range": "auto"}, ["range", "auto"]),
        ({"pct": "nan"}, ["pct", "nan"]),
        ({"pct": "inf"}, ["pct", "inf"]),
        ({"pct": "50"}, ["pct", "50"]),
        ({"pct": "89.99"}, ["pct", "89.99"]),
        ({"pct": "100.5"}, ["pct", "100.5"]),
        ({"pct": "9_9.5"}, ["pct"]),
        ({"pct": "1e2"}, ["pct", "1e2"]),
        ({"round": "up"}, ["round", "up"]),
        ({"seed": "-1.5"}, ["seed"]),
        ({"seed": str(SEED_RANGE[1] + 1)}, ["seed"]),
        ({"sdtype": "fp64"}, ["sdtype", "fp64"]),
        ({"mode": "asymmetric", "zp": "clamp"}, ["zp", "clamp"]),
        ({"zp": "float_min"}, ["zp", "float_min", "symmetric"]),
        ({"fmt": "nf4", "zp": "include_zero"}, ["zp", "nf4"]),
        ({"mode": "s" * (MAX_VALUE_LENGTH + 1)}, ["mode", "too long"]),
        ({"seed": "1" * 40}, ["seed", "too long"]),
        ({"bits": 4}, ["bits", "string"]),
        ({"mode": ["symmetric"]}, ["mode", "string"]),
    ],
)
def test_tampered_params_raise_naming_key_and_value(
    params: dict[str, object], names: list[str]
) -> None:
    with pytest.raises(ValueError) as info:
        config_from_query(params)  # type: ignore[arg-type]
    for name in names:
        assert name in str(info.value)


def test_non_mapping_raises_value_error() -> None:
    with pytest.raises(ValueError, match="mapping"):
        config_from_query([("bits", "4")])  # type: ignore[arg-type]


@given(st.sampled_from(sorted(ENUM_KEYS)), st.text(max_size=40))
def test_any_unknown_enum_value_raises(key: str, text: str) -> None:
    if text in {m.value for m in ENUM_KEYS[key]}:
        return
    with pytest.raises(ValueError, match=re.escape(key)):
        config_from_query({key: text})


def _base_for(key: str) -> dict[str, str]:
    gran = {"axis": PerChannel(0), "group": PerGroup(8)}.get(key, PerTensor())
    return config_to_query(QuantConfig(bits=4, granularity=gran))


@given(st.sampled_from(["bits", "axis", "group", "seed"]), st.text(max_size=40))
def test_any_non_integer_raises(key: str, text: str) -> None:
    if re.fullmatch(r"0|-?[1-9][0-9]*", text):
        return
    params = {**_base_for(key), key: text}
    with pytest.raises(ValueError, match=re.escape(key)):
        config_from_query(params)


@given(
    st.sampled_from(["bits", "axis", "group", "seed"]),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
)
def test_integers_outside_their_range_raise(key: str, value: int) -> None:
    bounds = {"bits": (2, 16), "axis": AXIS_RANGE, "group": GROUP_RANGE, "seed": SEED_RANGE}
    lo, hi = bounds[key]
    params = {**_base_for(key), key: str(value)}
    if lo <= value <= hi:
        assert config_from_query(params) is not None
        return
    with pytest.raises(ValueError, match=re.escape(key)):
        config_from_query(params)


def test_config_to_query_rejects_what_a_url_cannot_carry() -> None:
    with pytest.raises(ValueError, match="axis"):
        config_to_query(QuantConfig(granularity=PerChannel(AXIS_RANGE[1] + 1)))
    with pytest.raises(ValueError, match="group"):
        config_to_query(QuantConfig(granularity=PerGroup(GROUP_RANGE[1] + 1)))
    with pytest.raises(ValueError, match="seed"):
        config_to_query(QuantConfig(seed=SEED_RANGE[1] + 1))
    with pytest.raises(ValueError, match=r"pct=60 is outside the range 90\.\.100"):
        config_to_query(QuantConfig(range_method=RangeMethod.PERCENTILE, percentile=60.0))
    with pytest.raises(TypeError):
        config_to_query({"bits": "4"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "sid",
    [
        "",
        "bits=4",  # valid params but not canonical (missing keys)
        "mode=symmetric&bits=8&gran=tensor&fmt=int&range=minmax&pct=99.9&round=nearest"
        "&seed=0&sdtype=fp32",  # reordered
        scheme_id(QuantConfig()) + "&bits=8",  # repeated key
        scheme_id(QuantConfig()) + "&evil=1",  # unknown key
        scheme_id(QuantConfig()).replace("bits=8", "bits=999"),
    ],
)
def test_bad_scheme_ids_raise(sid: str) -> None:
    with pytest.raises(ValueError):
        config_from_scheme_id(sid)


def test_granularity_kind_of() -> None:
    assert GranularityKind.of(PerTensor()) is GranularityKind.TENSOR
    assert GranularityKind.of(PerChannel(1)) is GranularityKind.CHANNEL
    assert GranularityKind.of(PerGroup(4)) is GranularityKind.GROUP
    with pytest.raises(ValueError):
        GranularityKind.of("tensor")  # type: ignore[arg-type]


def test_link_fixes_name_each_changed_value() -> None:
    wanted = QuantConfig(bits=4, granularity=PerGroup(100))
    got = QuantConfig(bits=4, granularity=PerGroup(128))
    assert link_fixes(wanted, got, 256) == ("group=100 does not fit 256 columns; using 128",)
    assert link_fixes(got, got, 256) == ()
    axis = link_fixes(
        QuantConfig(granularity=PerChannel(5)), QuantConfig(granularity=PerChannel(1)), 8
    )
    assert axis == ("axis=5 is not an axis of a 2-D matrix; using 1",)
    same_axis = link_fixes(
        QuantConfig(granularity=PerChannel(-1)), QuantConfig(granularity=PerChannel(1)), 8
    )
    assert same_axis == ("axis=-1 is axis 1 of a 2-D matrix; using 1",)
    # anything else that differs is named by its query key and both values
    other = link_fixes(QuantConfig(bits=12), QuantConfig(bits=8), 8)
    assert other == ("bits=12 is not available here; using 8",)
    # each line names the key the link holds: the page's prefix ("m.", "a.") included
    assert link_fixes(wanted, got, 256, "m.") == (
        "m.group=100 does not fit 256 columns; using 128",
    )
    assert link_fixes(QuantConfig(bits=12), QuantConfig(bits=8), 8, "m.a.") == (
        "m.a.bits=12 is not available here; using 8",
    )
    with pytest.raises(TypeError):
        link_fixes({"bits": "4"}, got, 8)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("NF4 + double quant", "NF4_DQ"),
        ("nf4 + DOUBLE quant", "NF4_DQ"),
        ("MXFP8 (E4M3)", "MXFP8_E4M3"),
        ("fp8 128x128 blocks", "FP8_BLOCK"),
        ("q4_k", "Q4_K"),
    ],
)
def test_preset_takes_the_pickers_label_as_well_as_the_key(raw: str, name: str) -> None:
    assert config_from_query({"preset": raw}) == QuantConfig.from_name(name)
