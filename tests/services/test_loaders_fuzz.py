"""Fuzzing the loaders: random bytes and damaged valid files give a result or ``LoadError``.

Any other exception escaping a loader is a bug. Each test keeps its example count modest so
the whole file runs in well under 30 seconds.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save as st_save

from dashboard.services.io import (
    Limits,
    LoadedTensor,
    LoadError,
    TensorInfo,
    list_safetensors_file,
    list_tensors,
    load_safetensors_file_tensor,
    load_tensor,
)

# torch warns about the odd pickle protocol numbers that damaged pickles declare.
pytestmark = pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")

# Small limits: a damaged header must not make a fuzz example allocate gigabytes.
LIMITS = Limits(max_elements=2**20, max_bytes=2**24)
KEPT = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_loaded(loaded: LoadedTensor, info: TensorInfo | None = None) -> None:
    assert isinstance(loaded, LoadedTensor)
    assert type(loaded.tensor) is torch.Tensor
    assert loaded.tensor.dtype in KEPT and loaded.tensor.is_contiguous()
    assert loaded.tensor.numel() <= LIMITS.max_elements
    assert all(isinstance(note, str) and note for note in loaded.notes)
    if info is not None:
        assert tuple(loaded.tensor.shape) == info.shape and loaded.name == info.name


def exercise(filename: str, data: bytes) -> None:
    """List, then load every listed tensor (at most 4), then load the default one."""
    try:
        infos = list_tensors(filename, data, LIMITS)
    except LoadError as err:
        assert str(err)
        infos = ()
    for info in infos[:4]:
        try:
            check_loaded(load_tensor(filename, data, info.name, LIMITS), info)
        except LoadError as err:
            assert str(err)
    try:
        check_loaded(load_tensor(filename, data, None, LIMITS))
    except LoadError as err:
        assert str(err)


# ---------------------------------------------------------------------------------------
# Valid seed files, one per format


def _pt(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


SEEDS = {
    ".safetensors": st_save(
        {
            "w": torch.linspace(-1, 1, 12).reshape(3, 4),
            "b": torch.arange(4, dtype=torch.int8),
            "h": torch.ones(2, 2, dtype=torch.bfloat16),
            "f8": torch.ones(3, dtype=torch.float8_e4m3fn),
        }
    ),
    ".pt": _pt(
        {
            "enc": {"w": torch.linspace(-1, 1, 6).reshape(2, 3), "b": torch.zeros(2)},
            "layers": [torch.ones(3, dtype=torch.int16), torch.ones(2, dtype=torch.float16)],
            "step": 3,
        }
    ),
    ".npy": _npy(np.arange(12, dtype=np.float32).reshape(3, 4)),
    ".csv": b"a,b,c\n1,2,3\n4.5,-6e2,nan\n7,8,9\n",
}
EXTENSIONS = [*sorted(SEEDS), ".pth"]


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """``seed`` after one to four bit flips, byte writes, truncations, inserts or deletes."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete", "repeat"]))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF, *b'"9-{[,.\n']))
        elif op == "truncate":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[i : i + draw(st.integers(1, 16))]
        else:
            data[i:i] = data[i : i + draw(st.integers(1, 64))]
    return bytes(data)


# ---------------------------------------------------------------------------------------
# Random bytes and generic mutations, every format


@FUZZ
@given(ext=st.sampled_from(EXTENSIONS), data=st.binary(max_size=600))
def test_random_bytes(ext: str, data: bytes) -> None:
    exercise(f"f{ext}", data)


@FUZZ
@given(ext=st.sampled_from(EXTENSIONS), prefix=st.binary(max_size=64), data=st.data())
def test_random_bytes_behind_a_valid_signature(
    ext: str, prefix: bytes, data: st.DataObject
) -> None:
    seed = SEEDS[".pt" if ext == ".pth" else ext]
    head = seed[: data.draw(st.integers(0, min(len(seed), 128)))]
    exercise(f"f{ext}", head + prefix)


@settings(FUZZ, max_examples=400)
@given(ext=st.sampled_from(sorted(SEEDS)), data=st.data())
def test_mutated_valid_files(ext: str, data: st.DataObject) -> None:
    exercise(f"f{ext}", data.draw(mutated(SEEDS[ext])))


# ---------------------------------------------------------------------------------------
# safetensors: header edits and well-formed headers with odd contents

ST_DTYPE_NAMES = [
    "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL",
    "F8_E4M3", "F8_E5M2", "F8_E8M0", "C64", "F4", "F6_E2M3", "F6_E3M2",
]  # fmt: skip
ST_BITS = {"F64": 64, "I64": 64, "U64": 64, "C64": 64, "F32": 32, "I32": 32, "U32": 32}
ST_BITS |= {"F16": 16, "BF16": 16, "I16": 16, "U16": 16, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}

JSON_JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
    | st.sampled_from(ST_DTYPE_NAMES),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


def _st_file(header: object, data: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def _st_header(raw: bytes) -> dict[str, dict[str, object]]:
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8 : 8 + n])


@FUZZ
@given(data=st.data())
def test_safetensors_header_edits(data: st.DataObject) -> None:
    raw = SEEDS[".safetensors"]
    header = _st_header(raw)
    body = raw[8 + struct.unpack("<Q", raw[:8])[0] :]
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(st.sampled_from(sorted(header)))
        field = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", "entry", "metadata"]))
        junk = data.draw(JSON_JUNK)
        if field == "entry":
            header[name] = junk  # type: ignore[assignment]
        elif field == "metadata":
            header["__metadata__"] = junk  # type: ignore[assignment]
        elif isinstance(header[name], dict):
            header[name][field] = junk
    exercise("m.safetensors", _st_file(header, body))


@st.composite
def well_formed_safetensors(draw: st.DrawFn) -> bytes:
    """Consistent headers: any dtype, odd shapes (0-d, empty, 1-wide), random payload bytes."""
    header: dict[str, object] = {}
    chunks: list[bytes] = []
    offset = 0
    for i in range(draw(st.integers(1, 4))):
        dtype = draw(st.sampled_from(ST_DTYPE_NAMES))
        shape = draw(
            st.lists(st.integers(0, 5), max_size=4) | st.lists(st.just(1), min_size=60, max_size=64)
        )
        numel = int(np.prod(shape)) if shape else 1
        bits = numel * ST_BITS.get(dtype, 8)
        if bits % 8:  # sub-byte types: eight times the elements make whole bytes
            shape, bits = [*shape[:-1], shape[-1] * 8] if shape else [8], bits * 8
        size = bits // 8
        chunks.append(draw(st.binary(min_size=size, max_size=size)))
        header[f"t{i}"] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    return _st_file(header, b"".join(chunks))


@FUZZ
@given(raw=well_formed_safetensors())
def test_well_formed_safetensors_with_random_payloads(raw: bytes) -> None:
    exercise("m.safetensors", raw)
    infos = list_tensors("m.safetensors", raw, LIMITS)  # well formed: listing always works
    assert len(infos) == len(_st_header(raw))


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(FUZZ, max_examples=100)
@given(data=st.data())
def test_safetensors_files_on_disk(fuzz_dir: Path, data: st.DataObject) -> None:
    raw = data.draw(mutated(SEEDS[".safetensors"]) | well_formed_safetensors())
    path = fuzz_dir / "m.safetensors"
    path.write_bytes(raw)
    try:
        infos = list_safetensors_file(path)
    except LoadError:
        infos = ()
    for info in infos[:4]:
        try:
            check_loaded(load_safetensors_file_tensor(path, info.name, LIMITS), info)
        except LoadError as err:
            assert str(err)
    try:
        load_safetensors_file_tensor(path, None, LIMITS)
    except LoadError as err:
        assert str(err)


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
