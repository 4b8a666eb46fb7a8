"""Fuzzing .npy headers, .pt archives around damaged pickles, and CSV text: a result or
``LoadError``, nothing else."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np
import pytest
import torch
from fuzz_builders import (
    FUZZ,
    LIMITS,
    SEEDS,
    _pt,
    exercise,
    mutated,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.services.io import (
    LoadError,
    load_tensor,
)

# torch warns about the odd pickle protocol numbers that damaged pickles declare.
pytestmark = pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")

# ---------------------------------------------------------------------------------------
# .npy: header edits

NPY_DESCRS = [
    "<f4", ">f8", "<f2", "|b1", "|i1", "<u8", "<c8", "|O", "<U3", "|S2", "|V8", "<M8[D]",
    "<f16", "<f3", "x", "", "<i4",
]  # fmt: skip


@st.composite
def npy_files(draw: st.DrawFn) -> bytes:
    descr = draw(st.sampled_from(NPY_DESCRS) | st.text(max_size=6))
    descr_text = repr(descr) if draw(st.booleans()) else draw(st.text(max_size=20))
    shape = draw(st.lists(st.integers(-2, 6) | st.integers(-(2**64), 2**64), max_size=4))
    shape_text = repr(tuple(shape)) if draw(st.booleans()) else draw(st.text(max_size=12))
    fortran = draw(st.sampled_from(["False", "True", "0", "None"]))
    header = f"{{'descr': {descr_text}, 'fortran_order': {fortran}, 'shape': {shape_text}, }}"
    if draw(st.booleans()):
        header = header.replace("'descr'", draw(st.sampled_from(["'x'", "'descr' ", "1"])))
    encoded = header.encode("latin1", "replace")
    encoded += b" " * (-(len(encoded) + 11) % 64) + b"\n"
    version = draw(st.sampled_from([1, 2, 3]))
    length = struct.pack("<H" if version == 1 else "<I", len(encoded))
    size = draw(st.integers(0, 200))
    return (
        b"\x93NUMPY"
        + bytes([version, 0])
        + length
        + encoded
        + draw(st.binary(min_size=size, max_size=size))
    )


@FUZZ
@given(raw=npy_files())
def test_npy_header_edits(raw: bytes) -> None:
    exercise("a.npy", raw)


@FUZZ
@given(
    dtype=st.sampled_from(["<f4", ">f8", "<f2", "|b1", "|i1", ">u2", "<i8", "<u8"]),
    shape=st.lists(st.integers(0, 4), max_size=3),
    data=st.data(),
)
def test_npy_valid_headers_with_random_payloads(
    dtype: str, shape: list[int], data: st.DataObject
) -> None:
    array = np.frombuffer(
        data.draw(
            st.binary(min_size=(n := int(np.prod(shape)) * np.dtype(dtype).itemsize), max_size=n)
        ),
        dtype=dtype,
    ).reshape(shape)
    buffer = io.BytesIO()
    np.save(buffer, np.asfortranarray(array) if data.draw(st.booleans()) else array)
    exercise("a.npy", buffer.getvalue())


# ---------------------------------------------------------------------------------------
# .pt: valid zip archives around a damaged pickle or storage


def _rezip(raw: bytes, replace: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for entry in src.namelist():
            new = next((v for k, v in replace.items() if entry.endswith(k)), None)
            dst.writestr(entry, src.read(entry) if new is None else new)
    return out.getvalue()


def _entry(raw: bytes, suffix: str) -> tuple[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        name = next(n for n in archive.namelist() if n.endswith(suffix))
        return name, archive.read(name)


@settings(FUZZ, max_examples=250)
@given(data=st.data())
def test_pt_with_damaged_pickle_inside_a_valid_zip(data: st.DataObject) -> None:
    """The zip is intact (CRCs match), so torch's restricted unpickler sees the damage."""
    raw = SEEDS[".pt"]
    _, pickled = _entry(raw, "data.pkl")
    exercise("m.pt", _rezip(raw, {"data.pkl": data.draw(mutated(pickled))}))


@FUZZ
@given(data=st.data())
def test_pt_with_damaged_storage_or_metadata(data: st.DataObject) -> None:
    raw = SEEDS[".pt"]
    suffix = data.draw(
        st.sampled_from(["data/0", "data/2", "byteorder", "version", "format_version"])
    )
    _, content = _entry(raw, suffix)
    new = data.draw(mutated(content) | st.binary(max_size=40))
    exercise("m.pt", _rezip(raw, {suffix: new}))


@FUZZ
@given(
    numel=st.integers(0, 2**40),
    size=st.lists(st.integers(0, 2**20), max_size=3),
    stride=st.lists(st.integers(-2, 2**20), max_size=3),
    offset=st.integers(-1, 2**20),
)
def test_pt_with_hostile_storage_and_view_sizes(
    numel: int, size: list[int], stride: list[int], offset: int
) -> None:
    """A hand-made pickle claims any storage size, view shape, stride and offset."""
    raw = _pt(torch.arange(4, dtype=torch.float32))
    _, original = _entry(raw, "data.pkl")
    # The byte positions below are those of torch's pickle for a 4-element tensor.
    assert original[93:95] == b"K\x04" and original[99:104] == b"K\x00K\x04\x85"

    def ints(values: list[int]) -> bytes:
        return (
            b"("
            + b"".join(b"J" + struct.pack("<i", max(min(v, 2**31 - 1), -(2**31))) for v in values)
            + b"t"
        )

    pickled = (
        original[:93]  # up to the storage's element count in torch's own pickle
        + b"\x8a\x08" + struct.pack("<q", numel)
        + original[95:99]
        + b"J" + struct.pack("<i", offset)
        + ints(size) + original[104:106]
        + ints(stride) + original[109:]
    )  # fmt: skip
    exercise("m.pt", _rezip(raw, {"data.pkl": pickled}))


# ---------------------------------------------------------------------------------------
# .csv: random text from a numeric alphabet

CSV_ALPHABET = '0123456789.,;\t\n\r -+eEnaifx"_\u0661\ufeff'


@settings(FUZZ, max_examples=200)
@given(text=st.text(alphabet=CSV_ALPHABET, max_size=200))
def test_csv_random_text(text: str) -> None:
    exercise("g.csv", text.encode())


@settings(FUZZ, max_examples=300)
@given(text=st.text(alphabet=CSV_ALPHABET, max_size=120))
def test_csv_fast_and_slow_paths_agree(text: str) -> None:
    """numpy's reader (fast path) and the line-by-line parser accept the same files."""

    def outcome() -> object:
        try:
            loaded = load_tensor("g.csv", text.encode(), limits=LIMITS)
        except LoadError as err:
            return str(err)
        return loaded.tensor.shape, loaded.tensor.nan_to_num(7.0).tolist(), loaded.notes

    fast = outcome()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(np, "loadtxt", _no_loadtxt)
        slow = outcome()
    assert fast == slow


def _no_loadtxt(*args: object, **kwargs: object) -> None:
    raise ValueError("fast path disabled")


@FUZZ
@given(
    rows=st.lists(
        st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1, max_size=5),
        min_size=1,
        max_size=6,
    ),
    delimiter=st.sampled_from([",", ";", "\t", " "]),
)
def test_csv_numbers_round_trip(rows: list[list[float]], delimiter: str) -> None:
    """Rectangular grids of any floats read back as their float32 values."""
    width = len(rows[0])
    rows = [row[:width] + [0.0] * (width - len(row)) for row in rows]
    text = "\n".join(delimiter.join(repr(v) for v in row) for row in rows)
    loaded = load_tensor("g.csv", text.encode(), limits=LIMITS)
    expected = torch.tensor(rows, dtype=torch.float64).to(torch.float32)
    assert torch.equal(loaded.tensor.isnan(), expected.isnan())
    assert torch.equal(loaded.tensor.nan_to_num(0.0), expected.nan_to_num(0.0))
