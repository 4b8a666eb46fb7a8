""".csv: grids of numbers; every refusal names its row and column."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from io_builders import (
    error_of,
)

from dashboard.services.io import (
    Limits,
    TensorInfo,
    list_tensors,
    load_tensor,
)


def test_csv_grid_with_header_and_formats() -> None:
    data = "\ufeffa,b,c\r\n1, 2.5 ,-3e2\r\n\r\n4,nan,inf\r\n".encode()
    (info,) = list_tensors("grid.csv", data)
    assert info == TensorInfo("grid", (2, 3), "text")
    loaded = load_tensor("grid.csv", data)
    assert loaded.tensor.dtype == torch.float32 and loaded.source_dtype == "text"
    assert loaded.tensor[0].tolist() == [1.0, 2.5, -300.0]
    assert np.isnan(loaded.tensor[1, 1].item()) and loaded.tensor[1, 2].item() == float("inf")
    assert "Row 1 read as a header: 'a', 'b', 'c'." in loaded.notes


@pytest.mark.parametrize(
    "text", ["1;2\n3;4\n", "1\t2\n3\t4\n", "1 2\n 3   4\n", '"1","2"\n"3","4"\n']
)
def test_csv_delimiters_and_quotes(text: str) -> None:
    assert load_tensor("g.csv", text.encode()).tensor.tolist() == [[1, 2], [3, 4]]


def test_csv_single_column_and_single_value() -> None:
    assert load_tensor("g.csv", b"1\n2\n3").tensor.shape == (3, 1)
    assert load_tensor("g.csv", b"7").tensor.tolist() == [[7.0]]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,2,3\n4,five,6\n", "row 2, column 2 holds 'five', which is not a number"),
        ("1,2\n3,4\n\n5,x\n", "row 4, column 2 holds 'x'"),
        ("h1,h2\n1,2\n3,oops\n", "row 3, column 2 holds 'oops'"),
        ("1,x,3\n4,5,6\n", "row 1, column 2 holds 'x'"),
        ("1,2\n3,\n", "row 2, column 2 is empty"),
        ("1,2\n1_000,2\n", "row 2, column 1 holds '1_000'"),
        ('1,2\n"3"4,5\n', "row 2, column 1 holds '\"3\"4'"),
        ('1,2\n"3,5\n', "row 2, column 1 holds '\"3'"),
        ("1,2\n\u0661,2\n", "row 2, column 1 holds '\u0661'"),
        ("1,2,3\n4,5\n", "row 2 has 2 columns; the rows above have 3"),
        ("1,2\n3,4,5\n", "row 2 has 3 columns; the rows above have 2"),
        ("1\n2,3\n", "row 2 has 2 columns; the rows above have 1"),
        ("a,b\n", "holds a header row but no rows of numbers"),
        ("\n \n\n", "holds no numbers"),
    ],
)
def test_csv_errors_name_row_column_and_text(text: str, expected: str) -> None:
    message = error_of("g.csv", text.encode())
    assert expected in message
    assert message.startswith("g.csv")


def test_csv_binary_and_non_utf8_are_refused() -> None:
    assert "not UTF-8 text" in error_of("g.csv", b"1,2\n\xff\xfe,3\n")
    assert "row 2" in error_of("g.csv", b"1,2\n\xff\xfe,3\n")
    assert "NUL bytes" in error_of("g.csv", b"1,2\x00\n")


def test_csv_old_mac_line_endings() -> None:
    assert load_tensor("g.csv", b"1,2\r3,4\r").tensor.tolist() == [[1, 2], [3, 4]]


def test_csv_fast_and_cell_by_cell_paths_give_the_same_grid() -> None:
    """Quotes send a file down the cell-by-cell path: same grid, same messages."""
    text = "x,y,z\n" + "\n".join(f"{i},{i * 0.5},-{i}e3" for i in range(40)) + "\n"
    expected = load_tensor("g.csv", text.encode()).tensor
    quoted = "\n".join(",".join(f'"{c}"' for c in row.split(",")) for row in text.splitlines())
    assert torch.equal(load_tensor("g.csv", quoted.encode()).tensor, expected)
    assert torch.equal(load_tensor("g.csv", text.replace(",", "  ").encode()).tensor, expected)
    bad = text.replace("30,15.0", "30,1 5.0")
    assert "row 32, column 2 holds '1 5.0'" in error_of("g.csv", bad.encode())
    assert "row 32, column 2 holds '\"1 5.0\"'" in error_of(
        "g.csv", bad.replace("1 5.0", '"1 5.0"').encode()
    )
    ragged = text.replace("\n25,", "\n25,7,")
    assert "row 27 has 4 columns; the rows above have 3" in error_of("g.csv", ragged.encode())


def test_csv_one_huge_line_is_read_and_refused_without_a_cell_list() -> None:
    row = ",".join(["1.5"] * 200_000)
    assert load_tensor("g.csv", row.encode()).tensor.shape == (1, 200_000)
    message = error_of("g.csv", (row + ",x").encode())
    assert (
        "row 1, column 200,001 holds 'x'" in message or "row 1, column 200001 holds 'x'" in message
    )


def test_csv_float32_overflow_is_noted() -> None:
    loaded = load_tensor("g.csv", b"1e39,1\n-1e39,1e300\n")
    assert loaded.tensor[0, 0].item() == float("inf")
    assert "3 values beyond float32's range became ±inf." in loaded.notes


def test_csv_limit_is_estimated_before_parsing() -> None:
    data = b"1,2,3,4\n" * 1000
    message = error_of("g.csv", data, limits=Limits(max_elements=1000))
    assert "up to 4,004 cells (1,001 lines x 4 columns)" in message
    assert "limit is 1,000 cells" in message
    assert load_tensor("g.csv", data, limits=Limits(max_elements=5000)).tensor.shape == (1000, 4)


def test_csv_huge_cell_text_is_shortened_in_the_message() -> None:
    message = error_of("g.csv", b"1,2\n3," + b"x" * 10_000 + b"\n")
    assert len(message) < 200 and "…" in message


def test_single_tensor_formats_refuse_other_names() -> None:
    message = error_of("g.csv", b"1,2\n", "other")
    assert "holds one tensor, 'g'" in message and "'other'" in message
    assert load_tensor("g.csv", b"1,2\n", "g").name == "g"
