""".npy: numeric arrays load; other dtypes, bad headers and truncations are refused."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from io_builders import (
    Evil,
    error_of,
    npy_bytes,
)

from dashboard.services.io import (
    LoadError,
    TensorInfo,
    list_tensors,
    load_tensor,
)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_npy_floats_are_kept(dtype: str) -> None:
    array = np.linspace(-1, 1, 12, dtype=dtype).reshape(3, 4)
    loaded = load_tensor("a.npy", npy_bytes(array))
    assert loaded.tensor.dtype == getattr(torch, dtype)
    assert np.array_equal(loaded.tensor.numpy(), array)
    assert bool(loaded.notes) == (dtype != "float32")


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "int64", "bool"])
def test_npy_integers_and_bools_become_float32(dtype: str) -> None:
    array = (np.arange(6) % 3).astype(dtype)
    loaded = load_tensor("a.npy", npy_bytes(array))
    assert loaded.tensor.dtype == torch.float32 and loaded.source_dtype == dtype
    assert loaded.tensor.tolist() == array.astype(np.float32).tolist()
    assert "converted to float32" in loaded.notes[0]


def test_npy_big_endian_fortran_order_and_versions() -> None:
    array = np.arange(12, dtype=">f4").reshape(3, 4)
    assert load_tensor("a.npy", npy_bytes(array)).tensor.tolist() == array.tolist()
    fortran = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    loaded = load_tensor("a.npy", npy_bytes(fortran))
    assert loaded.tensor.is_contiguous() and loaded.tensor.tolist() == fortran.tolist()
    for version in [(1, 0), (2, 0), (3, 0)]:
        data = npy_bytes(np.ones(3, np.float32), version)
        assert list_tensors("a.npy", data) == (TensorInfo("a", (3,), "float32"),)
        assert load_tensor("a.npy", data, "a").tensor.tolist() == [1, 1, 1]


@pytest.mark.parametrize(
    ("array", "expected"),
    [
        (np.array([{"a": 1}, None], dtype=object), "Python objects (object dtype)"),
        (np.ones(3, np.complex64), "complex numbers"),
        (np.array(["a", "b"]), "holds text"),
        (np.array([b"a"]), "holds bytes"),
        (np.zeros(2, dtype=[("x", "f4"), ("y", "i4")]), "structured records"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), "holds dates"),
        (np.ones(2, np.longdouble), "long double"),
    ],
    ids=["object", "complex", "unicode", "bytes", "structured", "datetime", "longdouble"],
)
def test_npy_non_numeric_dtypes_are_refused(array: np.ndarray, expected: str) -> None:
    data = npy_bytes(array)
    assert expected in error_of("a.npy", data)
    with pytest.raises(LoadError, match=expected.split(" (")[0]):
        list_tensors("a.npy", data)


def test_npy_object_array_never_unpickles(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = npy_bytes(np.array([Evil(marker), 1], dtype=object))
    assert "object dtype" in error_of("evil.npy", data)
    assert not marker.exists()


def test_npy_zero_d_array_stays_zero_d() -> None:
    loaded = load_tensor("s.npy", npy_bytes(np.array(2.5, dtype=np.float64)))
    assert loaded.tensor.shape == () and loaded.tensor.item() == 2.5


def test_corrupt_npy_says_what_is_wrong() -> None:
    data = npy_bytes(np.ones((4, 4), np.float32))
    assert "is truncated" in error_of("a.npy", data[:-5])
    assert "unexpected bytes follow" in error_of("a.npy", data + b"xx")
    assert "does not start with the \\x93NUMPY mark" in error_of("a.npy", b"hello")
    assert "header cannot be read" in error_of("a.npy", data[:20])
    assert "header cannot be read" in error_of("a.npy", data.replace(b"'descr'", b"'dexcr'"))
    assert "format version 7, which is not supported" in error_of(
        "a.npy", b"\x93NUMPY\x07\x00" + data[8:]
    )


def test_npy_limit_is_checked_from_the_header_before_reading() -> None:
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }"
    header += b" " * (118 - len(header)) + b"\n"
    data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + bytes(16)
    message = error_of("huge.npy", data)
    assert "10,000,000,000 elements (shape [100000, 100000])" in message
    assert "limit is 64,000,000" in message
