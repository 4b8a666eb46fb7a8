"""Service tests: defects of the Mixed precision page found by a user's hunt (defects4)."""

from __future__ import annotations

import math
import re

import pytest
import torch

from dashboard.services.mixed.state import budget_step
from quant_core.mixed import (
    AllocationProblem,
    Budget,
    BudgetOutOfRange,
    BudgetUnit,
    SensitivityRow,
    allocate,
    build_problem,
)

MB, GB, BPW = BudgetUnit.MEGABYTES, BudgetUnit.GIGABYTES, BudgetUnit.BITS_PER_WEIGHT


@pytest.mark.parametrize(
    ("unit", "n", "step"),
    [
        (BPW, 22_700_000, 0.25),
        (MB, 22_700_000, 0.5),  # 0.25 * 22.7e6 / 8 bytes = 0.709 MB
        (GB, 22_700_000, 0.0005),
        (MB, 7_000_000_000, 200.0),  # 218.75 MB
        (GB, 7_000_000_000, 0.2),
        (MB, 8_000_000, 0.2),  # 0.25 MB: 2 of 1-2-5 times 0.1
        (MB, 32_000_000, 1.0),  # exactly 1 MB stays 1
        (MB, None, 1.0),
        (GB, None, 0.01),
    ],
)
def test_the_budget_step_is_a_quarter_bit_per_weight_in_every_unit(
    unit: BudgetUnit, n: int | None, step: float
) -> None:
    assert budget_step(unit, n) == step


def test_the_budget_step_names_a_bad_unit() -> None:
    with pytest.raises(TypeError, match="'MB'"):
        budget_step("MB", 10)  # type: ignore[arg-type]


def _row(tensor: str, scheme: str, bits: int, n: int, *, stored_bits: int) -> SensitivityRow:
    ok = bits > 0
    nan = math.nan
    return SensitivityRow(tensor, scheme, (n // 64, 64), stored_bits, bits,
                          bits / n if ok else nan, 0.0 if ok else nan, 0.0 if ok else nan,
                          1.0 / bits if ok else nan, 100.0 if ok else nan, True, None,
                          None if ok else "the weight holds 1 NaN and 0 Inf values of 4,096",
                          0.0)  # fmt: skip


def _kept_problem() -> AllocationProblem:
    """a.weight (float32, 4,096 weights) holds a NaN: no scheme takes it; b.weight takes
    4 or 8 bits per weight."""
    n = 4096
    rows = [
        _row("a.weight", "int4", 0, n, stored_bits=32 * n),
        _row("a.weight", "int8", 0, n, stored_bits=32 * n),
        _row("b.weight", "int4", 4 * n, n, stored_bits=32 * n),
        _row("b.weight", "int8", 8 * n, n, stored_bits=32 * n),
    ]
    return build_problem(rows)


def test_a_tensor_kept_as_stored_says_what_it_takes_of_the_budget() -> None:
    """A float32 tensor kept as stored (it holds NaN) counts at 32 bits per weight in the
    budget, the size and the bits per weight: it is in the model as stored. The page said
    only "1 tensor no candidate can take, kept as stored", and refused 4.5 bits per weight
    as "reachable are 18.000 to 20.000 bits per weight (0.02 to 0.02 MB)": a fault, to
    the eye, and a range of one value."""
    problem = _kept_problem()
    assert problem.notes == (
        "1 tensor no candidate can take, kept as stored: 32 bits per weight, 16,384 bytes, "
        "counted in the budget and the size",
    )
    with pytest.raises(BudgetOutOfRange) as caught:
        allocate(problem, Budget(4.5))
    assert str(caught.value) == (
        "The budget 4.5 bpw (4.500 bits per weight, 0.00461 MB) is below the cheapest "
        "assignment the candidates give: reachable are 18.000 to 20.000 bits per weight "
        "(0.019 to 0.020 MB); 1 tensor no candidate can take, kept as stored: "
        "32 bits per weight, 16,384 bytes, counted in that."
    )
    # and the allocation counts it so: (32 + 4) / 2 bits per weight
    alloc = allocate(problem, Budget(18))
    assert alloc.bits_per_weight == 18.0
    assert alloc.mix() == {"stored": 16_384, "int4": 2_048}


@pytest.mark.parametrize(
    "name", ["token_embd.weight", "output.weight", "model.embed_tokens.weight"]
)
def test_a_ggufs_embedding_table_and_head_get_the_floor_and_the_embedding_weighing(
    name: str,
) -> None:
    """A float GGUF's ``token_embd.weight`` was neither floored ("Embeddings and output
    head: at least") nor weighed as an embedding table (1/rows per column): both
    patterns knew only Hugging Face's names."""
    from dashboard.services.io import TensorInfo
    from dashboard.services.mixed.tasks import lookup_importance
    from quant_core.mixed import Floor

    assert re.search(Floor("int8").pattern, name)
    info = TensorInfo(name, (100, 64), "float32")
    weighed = lookup_importance(info)
    if name == "output.weight":  # a head: its inputs are the model's, not one row
        assert weighed is None
    else:
        assert weighed is not None
        assert torch.equal(weighed, torch.full((64,), 0.01, dtype=torch.float64))


def test_a_range_of_one_size_is_named_once() -> None:
    """One candidate: "reachable are 4.500 to 4.500 bits per weight (0.004608 to 0.004608
    MB)", a range that reads as a typo."""
    n = 8192
    problem = build_problem([_row("a.weight", "Q4_0", 9 * n // 2, n, stored_bits=32 * n)])
    with pytest.raises(BudgetOutOfRange) as caught:
        allocate(problem, Budget(6.5))
    assert str(caught.value) == (
        "The budget 6.5 bpw (6.500 bits per weight, 0.00666 MB) is above the largest "
        "assignment the candidates give: the only size they reach is 4.500 bits per weight "
        "(0.004608 MB)."
    )
    assert allocate(problem, Budget(4.5)).bits_per_weight == 4.5


@pytest.mark.parametrize(
    ("cands", "problem"),
    [
        ("nope,Q8_0", "mx.cands (unknown scheme 'nope', left out)"),
        ("a,b,Q8_0", "mx.cands (unknown schemes 'a', 'b', left out)"),
    ],
)
def test_a_links_unknown_schemes_are_counted_in_words(cands: str, problem: str) -> None:
    """"unknown scheme(s) 'nope'": one is a scheme."""
    from dashboard.services.mixed.state import mixed_from_query

    assert mixed_from_query({"mx.cands": cands}).problems == (problem,)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(.*)*x", "it nests repeats"),
        (r"(\w+\.?)+!", "it nests repeats"),
        (r"(a|ab)*c", "it repeats an alternation"),
        (r".*.*.*.*x", "more than 3 unbounded repeats"),
    ],
)
def test_a_pin_that_would_backtrack_for_minutes_is_refused(pattern: str, why: str) -> None:
    """A pin (a link's ``mx.pins`` too) such as ``(\\w+\\.?)+!`` took Python's ``re``
    longer than 20 s on one 40-character tensor name (2^40 ways to split it): the page's
    run, and a server thread, hung. It is refused, naming the line and the reason."""
    from dashboard.services.mixed.state import parse_pins

    with pytest.raises(ValueError, match="pin line 2: ") as caught:
        parse_pins(f"query = Q8_0\n{pattern} = Q8_0\n", ["Q8_0"])
    assert f"({why})" in str(caught.value)


@pytest.mark.parametrize(
    "pattern",
    [
        r"attention\.self\.query",
        r"layers\.(0|1|2)\.",
        r"^blk\.(0|3|7)\.attn_q\.weight$",
        r"layers\.\d+\..*(q|k)_proj",
        r"(query|key)",
        r"\.(?:0|1)\.",
        r"a{2,5}",
    ],
)
def test_ordinary_pins_are_taken(pattern: str) -> None:
    from dashboard.services.mixed.state import parse_pins

    assert parse_pins(f"{pattern} = Q8_0", ["Q8_0"])[0].pattern == pattern


def test_a_tensor_name_that_reads_as_a_formula_is_quoted_in_the_csv() -> None:
    """The table's CSV wrote a tensor named ``=HYPERLINK("http://x","a")`` (a folder
    someone else made) as it is: a spreadsheet opening the download ran it."""
    import csv
    import io

    from quant_core.mixed.exports import table_csv

    name = '=HYPERLINK("http://x","a")'
    row = _row(name, "Q8_0", 8 * 4096, 4096, stored_bits=32 * 4096)
    neg = _row("-w", "Q8_0", 8 * 4096, 4096, stored_bits=32 * 4096)
    parsed = list(csv.DictReader(io.StringIO(table_csv([row, neg]))))
    assert [p["tensor"] for p in parsed] == ["'" + name, "'-w"]
    assert parsed[0]["bits_per_element"] == "8.0"  # numbers stay numbers


def test_a_refused_budget_writes_its_megabytes_as_the_range_does() -> None:
    """The budget's MB had thousands separators ("12,770.00 MB") where the range beside it
    had none (typed back into the budget box, which takes no comma)."""
    n = 1_000_000_000
    problem = build_problem(
        [
            _row("a.weight", "Q4_0", 9 * n // 2, n, stored_bits=16 * n),
            _row("a.weight", "Q8_0", 17 * n // 2, n, stored_bits=16 * n),
        ]
    )
    with pytest.raises(BudgetOutOfRange) as caught:
        allocate(problem, Budget(12.0))
    assert "(12.000 bits per weight, 1500.00 MB)" in str(caught.value)
    assert "(562.50 to 1062.50 MB)" in str(caught.value)
