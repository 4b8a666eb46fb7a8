"""The typed-values box: any text gives a 1-D or 2-D float32 tensor or a
``TypedValuesError`` naming what is wrong; values travel in links and back."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dashboard.services.sources.choice import ExampleSource, TypedSource
from dashboard.services.sources.examples import Example, example_tensor
from dashboard.services.sources.typed import (
    MAX_TYPED_VALUES,
    TypedValues,
    TypedValuesError,
    format_values,
    parse_typed_values,
)
from dashboard.services.state.source import MAX_LINK_VALUES, source_from_query, source_to_query

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check(text: str) -> TypedValues | str:
    """A sound result or the error's message; any other exception fails the test."""
    try:
        values = parse_typed_values(text)
    except TypedValuesError as exc:
        message = str(exc)
        assert message and len(message) < 300, message
        return message
    t = values.tensor
    assert type(t) is torch.Tensor and t.dtype == torch.float32
    assert t.dim() in (1, 2) and t.numel() >= 1 and t.numel() <= MAX_TYPED_VALUES
    assert values.key.startswith("typed:")
    return values


# --- by hand ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values", "shape"),
    [
        ("0.9372, 2.3312, 3.2122", [0.9372, 2.3312, 3.2122], (3,)),
        ("1 2 3\n4 5 6", [[1, 2, 3], [4, 5, 6]], (2, 3)),
        ("1\t2\n3\t4\n", [[1, 2], [3, 4]], (2, 2)),
        ("1;2;3", [1, 2, 3], (3,)),
        ("1\n2\n3", [1, 2, 3], (3,)),  # one value per line: a vector
        ("[1, 2, 3]", [1, 2, 3], (3,)),
        ("[[1, 2], [3, 4]]", [[1, 2], [3, 4]], (2, 2)),
        ("[[1.  2.]\n [3.  4.]]", [[1, 2], [3, 4]], (2, 2)),  # numpy's print
        ("tensor([0.5, -1.5])", [0.5, -1.5], (2,)),  # torch's print
        ("a = torch.tensor([[1, 2, 3]], dtype=torch.float32)", [[1, 2, 3]], (1, 3)),
        ("b = np.array([1e-3, -2E2, +4])", [1e-3, -200, 4], (3,)),
        ("[1, 2,]", [1, 2], (2,)),
    ],
)
def test_accepted_text(text, values, shape):
    got = parse_typed_values(text)
    assert tuple(got.tensor.shape) == shape
    assert torch.equal(got.tensor, torch.tensor(values, dtype=torch.float32))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the box is empty"),
        ("   \n\t ", "the box is empty"),
        ("1, 2, 3\n4, 5", "row 2 has 2 values; the first row has 3"),
        ("[[1, 2], [3]]", "row 2 has 1 value; the first row has 2"),
        ("1, two, 3", "row 1, value 2 holds 'two', which is not a number"),
        ("1, 2\n3, 1_000", "row 2, value 2 holds '1_000', which is not a number"),
        ("[1, x]", "value 2 holds 'x', which is not a number"),
        ("[[[1]]]", "the brackets nest 3 deep"),
        ("[1, 2", "a bracket is not closed"),
        ("1, 2]", "a ']' closes a bracket that was never opened"),
        ("[]", "the brackets hold no values"),
        ("[1, [2]]", "a matrix's rows must all be in brackets"),
        ("[1,,2]", "two commas in a row"),
        ("print([1, 2])\nimport os", "unexpected text"),
        ("os.system('x') or [1]", "unexpected text"),
    ],
)
def test_refused_text_says_why(text, message):
    with pytest.raises(TypedValuesError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_typed_values(text)


def test_nan_and_inf_are_values_and_overflow_is_named():
    got = parse_typed_values("nan, inf, -inf, 1e39, 2")
    t = got.tensor
    assert math.isnan(t[0]) and t[1] == math.inf and t[2] == -math.inf and t[3] == math.inf
    assert got.notes == ("1 value beyond float32's range became ±inf.",)


def test_a_million_values_get_a_message_quickly():
    start = time.perf_counter()
    for text in ("1, " * 10**6, "\n".join(["1 2 3 4"] * 250_000), "[" + "1," * 10**6 + "]"):
        message = check(text)
        assert isinstance(message, str)
        assert "1,000,000" in message or "characters long" in message
    many = "1 " * (MAX_TYPED_VALUES + 1)  # short enough in characters, too many values
    assert f"{MAX_TYPED_VALUES + 1:,} values" in check(many)
    assert time.perf_counter() - start < 10  # refused before parsing every value
    assert parse_typed_values("1 " * MAX_TYPED_VALUES).tensor.shape == (MAX_TYPED_VALUES,)


def test_type_error_for_non_text():
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        parse_typed_values(b"1, 2")


# --- fuzzing ----------------------------------------------------------------------------

_PIECES = st.sampled_from(
    ["1", "-2.5", "3e4", "nan", "inf", "x", "[", "]", ",", ";", " ", "\n", "\t", "(", ")",
     "tensor(", "np.array(", "a = ", "dtype=torch.float32", "1_0", "", "١", "0x10", "..",
     "[[", "]]", "e", "+", "-"]
)


@FUZZ
@given(text=st.text(max_size=200))
def test_any_text_gives_values_or_a_message(text):
    check(text)


@FUZZ
@given(pieces=st.lists(_PIECES, max_size=40))
def test_near_valid_text_gives_values_or_a_message(pieces):
    check("".join(pieces))


@FUZZ
@given(
    rows=st.lists(
        st.lists(st.floats(width=32), min_size=1, max_size=6), min_size=1, max_size=6
    ),
    brackets=st.booleans(),
)
def test_written_grids_read_back(rows, brackets):
    # Equal-length rows read back exactly (NaN too); ragged ones get the row's message.
    if brackets:
        text = "[" + ", ".join("[" + ", ".join(repr(v) for v in r) + "]" for r in rows) + "]"
    else:
        text = "\n".join(" ".join(repr(v) for v in r) for r in rows)
    got = check(text)
    if len({len(r) for r in rows}) > 1:
        assert isinstance(got, str) and "the first row has" in got
        return
    assert isinstance(got, TypedValues)
    want = np.array(rows, dtype=np.float32)
    if not brackets and (len(rows) == 1 or want.shape[1] == 1):
        want = want.reshape(-1)
    np.testing.assert_array_equal(got.tensor.numpy(), want)


@FUZZ
@given(
    values=st.lists(st.floats(width=32), min_size=1, max_size=12),
    matrix=st.booleans(),
)
def test_format_values_reads_back_to_the_same_values_and_shape(values, matrix):
    t = torch.tensor(values, dtype=torch.float32)
    if matrix:
        t = t.reshape(1, -1) if len(values) % 2 else t.reshape(2, -1)
    back = parse_typed_values(format_values(t))
    assert back.tensor.shape == t.shape
    np.testing.assert_array_equal(back.tensor.numpy(), t.numpy())
    assert back.key == parse_typed_values(format_values(back.tensor)).key


# --- links ------------------------------------------------------------------------------


def test_typed_values_travel_in_links():
    a = example_tensor(Example.VECTOR_10)
    choice = TypedSource.of(parse_typed_values(format_values(a)))
    query = source_to_query(choice)
    assert query == {"src": "example", "ex": "typed", "vals": format_values(a)}
    assert query["vals"].startswith("0.9372, 2.3312, 3.2122")
    back = source_from_query(query, ExampleSource(Example.COURSE_3X3))
    assert back == choice and repr(back) == f"TypedSource({choice.key!r})"
    # too long for a link: the link says typed, without the values; reading it says why
    big = TypedSource.of(parse_typed_values("1.25 " * 1000))
    assert len(big.text) > MAX_LINK_VALUES and "vals" not in source_to_query(big)
    with pytest.raises(ValueError, match="ex=typed without vals"):
        source_from_query(source_to_query(big), choice)
    with pytest.raises(ValueError, match="vals: row 1, value 2 holds 'x'"):
        source_from_query({"src": "example", "ex": "typed", "vals": "1, x"}, choice)


def test_example_typed_has_no_fixed_tensor():
    with pytest.raises(ValueError, match="TypedSource"):
        example_tensor(Example.TYPED)
