"""Fuzzing the io readers: random bytes, mutated valid files and safetensors header edits give
a result or ``LoadError``; any other exception escaping a reader is a bug. Each test keeps
its example count modest."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from fuzz_builders import (
    EXTENSIONS,
    FUZZ,
    LIMITS,
    SEEDS,
    check_loaded,
    exercise,
    mutated,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.services.io import (
    LoadError,
    list_safetensors_file,
    list_tensors,
    load_safetensors_file_tensor,
)

# torch warns about the odd pickle protocol numbers that damaged pickles declare.
pytestmark = pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")

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


def test_sizes_too_long_to_print_are_a_load_error() -> None:
    """Two dimensions of 4,000 digits (JSON allows them) multiplied into a byte count
    Python refuses to print (over 4,300 digits): a ``ValueError`` escaped, not a
    ``LoadError``. Sizes are ``usize`` values, below ``2^64``, as the library parses them."""
    header = {"x": {"dtype": "F32", "shape": [10**4000, 10**4000], "data_offsets": [0, 4]}}
    text = json.dumps(header).encode()
    raw = struct.pack("<Q", len(text)) + text + bytes(4)
    with pytest.raises(LoadError, match=r"^u\.safetensors: tensor 'x': shape \[1000"):
        list_tensors("u.safetensors", raw, LIMITS)
