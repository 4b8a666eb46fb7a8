""".safetensors: uploaded bytes and files on disk, every dtype, every refusal, every limit."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from io_builders import (
    error_of,
    st_raw,
)
from safetensors import safe_open
from safetensors.torch import save as st_save
from safetensors.torch import save_file as st_save_file

from dashboard.services.io import (
    Limits,
    LoadError,
    TensorInfo,
    list_safetensors_file,
    list_tensors,
    load_safetensors_file_tensor,
    load_tensor,
)

ST_DTYPES = [
    (torch.float64, "float64", torch.float64, True),
    (torch.float32, "float32", torch.float32, False),
    (torch.float16, "float16", torch.float16, True),
    (torch.bfloat16, "bfloat16", torch.bfloat16, True),
    (torch.int64, "int64", torch.float32, True),
    (torch.int32, "int32", torch.float32, True),
    (torch.int16, "int16", torch.float32, True),
    (torch.int8, "int8", torch.float32, True),
    (torch.uint8, "uint8", torch.float32, True),
    (torch.uint16, "uint16", torch.float32, True),
    (torch.uint32, "uint32", torch.float32, True),
    (torch.uint64, "uint64", torch.float32, True),
    (torch.bool, "bool", torch.float32, True),
    (torch.float8_e4m3fn, "float8_e4m3fn", torch.float32, True),
    (torch.float8_e5m2, "float8_e5m2", torch.float32, True),
    (torch.float8_e8m0fnu, "float8_e8m0fnu", torch.float32, True),
]


@pytest.mark.parametrize(
    ("dtype", "name", "result_dtype", "noted"), ST_DTYPES, ids=[d[1] for d in ST_DTYPES]
)
def test_safetensors_dtypes_round_trip(
    dtype: torch.dtype, name: str, result_dtype: torch.dtype, noted: bool
) -> None:
    source = (torch.arange(12) % 5 + 1).reshape(3, 4)
    source = (source % 2 == 0) if dtype == torch.bool else source.to(dtype)
    data = st_save({"t": source})
    (info,) = list_tensors("m.safetensors", data)
    assert info == TensorInfo("t", (3, 4), name)
    loaded = load_tensor("m.safetensors", data, "t")
    assert loaded.tensor.dtype == result_dtype
    assert loaded.source_dtype == name
    assert loaded.tensor.is_contiguous() and type(loaded.tensor) is torch.Tensor
    torch.testing.assert_close(loaded.tensor, source.to(result_dtype), rtol=0, atol=0)
    assert bool(loaded.notes) == noted
    if noted and result_dtype == torch.float32:
        assert f"{name} values converted to float32" in loaded.notes[0]


def test_safetensors_lists_in_natural_order_and_loads_each() -> None:
    tensors = {f"layers.{i}.weight": torch.full((2, i + 1), float(i)) for i in (10, 2, 1)}
    tensors["bias"] = torch.zeros(3)
    data = st_save(tensors, metadata={"format": "pt"})
    infos = list_tensors("m.safetensors", data)
    assert [i.name for i in infos] == [
        "bias",
        "layers.1.weight",
        "layers.2.weight",
        "layers.10.weight",
    ]
    for info in infos:
        loaded = load_tensor("m.safetensors", data, info.name)
        assert torch.equal(loaded.tensor, tensors[info.name])
    assert load_tensor("m.safetensors", data).name == "bias"  # None: the first listed


def test_safetensors_with_too_many_tensors_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from quant_core.files import safetensors_header  # the one parse, the dashboard's too

    monkeypatch.setattr(safetensors_header, "MAX_TENSORS", 3)
    data = st_save({f"t{i}": torch.ones(1) for i in range(4)})
    assert "lists 4 tensors; the limit is 3" in error_of("m.safetensors", data)


def test_a_safetensors_header_of_too_many_objects_stops_the_parse_early() -> None:
    """Past ``MAX_TENSORS`` + 2 JSON objects the parse stops (quant_core's object hook)
    instead of building a 1,000,000-tensor header (over a minute) and then counting it: the
    header here is broken at its very end, which a full parse would report instead."""
    n = 100_003
    header = {f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(n)}
    text = json.dumps(header).encode()[:-1] + b", !"  # not JSON, but only at the end
    data = len(text).to_bytes(8, "little") + text + bytes(n)
    message = error_of("m.safetensors", data)
    assert message.startswith("m.safetensors: corrupt safetensors header: it holds more than")
    assert "100,002 JSON objects" in message


def test_a_safetensors_header_of_one_huge_object_is_refused_before_parsing() -> None:
    """quant_core's string-count bound, before ``json.loads``: 700,000 keys in one object
    (more strings than a header at the tensor and metadata caps holds)."""
    text = ("{" + ",".join(f'"k{i}":0' for i in range(700_000)) + "}").encode()
    message = error_of("m.safetensors", len(text).to_bytes(8, "little") + text)
    assert message.startswith("m.safetensors: corrupt safetensors header: it holds at least")
    assert "700,000 JSON strings" in message


def test_safetensors_unknown_name_lists_what_exists() -> None:
    data = st_save({"a": torch.ones(2), "b": torch.ones(2)})
    message = error_of("m.safetensors", data, "c")
    assert "no tensor named 'c'" in message and "'a', 'b'" in message


def test_safetensors_int32_extremes_convert_like_torch() -> None:
    values = torch.tensor([-(2**31), -1, 0, 2**31 - 1], dtype=torch.int32)
    loaded = load_tensor("m.safetensors", st_save({"x": values}))
    assert torch.equal(loaded.tensor, values.to(torch.float32))
    assert "may be rounded" in loaded.notes[0]


def test_large_integers_get_a_rounding_note() -> None:
    loaded = load_tensor("m.safetensors", st_save({"x": torch.tensor([2**40, 3])}))
    assert "may be rounded" in loaded.notes[0]


def test_safetensors_zero_d_tensor_loads_and_empty_is_refused() -> None:
    data = st_save({"s": torch.tensor(2.5), "e": torch.zeros(0, 3)})
    assert load_tensor("m.safetensors", data, "s").tensor.shape == ()
    assert "is empty (shape [0, 3])" in error_of("m.safetensors", data, "e")


def test_safetensors_listing_does_not_build_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    data = st_save({"a": torch.ones(4), "b": torch.ones(2)})

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("listing must not build a tensor")

    monkeypatch.setattr(np, "frombuffer", fail)
    monkeypatch.setattr(torch, "from_numpy", fail)
    assert len(list_tensors("m.safetensors", data)) == 2


@pytest.mark.parametrize(
    ("dtype", "nbytes", "kind"),
    [("C64", 64, "complex numbers"), ("F4", 4, "sub-byte"), ("F6_E2M3", 6, "sub-byte")],
)
def test_safetensors_known_but_unloadable_dtypes_list_then_refuse(
    dtype: str, nbytes: int, kind: str
) -> None:
    """Eight elements of each: 64 bytes of complex64, 4 of F4, 6 of F6."""
    data = st_raw({"x": {"dtype": dtype, "shape": [8], "data_offsets": [0, nbytes]}}, bytes(nbytes))
    (info,) = list_tensors("m.safetensors", data)
    assert info.shape == (8,) and info.dtype in (dtype, "complex64")
    message = error_of("m.safetensors", data, "x")
    assert dtype in message and kind in message


def test_safetensors_complex_from_torch_is_refused() -> None:
    data = st_save({"z": torch.ones(3, dtype=torch.complex64)})
    assert "complex" in error_of("m.safetensors", data)


def _st_header_case(header: object, data: bytes = b"") -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


ST_CORRUPT = {
    "too short": (b"\x01\x02\x03", "3 bytes, too short for the 8-byte header length"),
    "header past end": (struct.pack("<Q", 1000) + b"{}", "header length says 1,000 bytes"),
    "not json": (_st_header_case(b"{not json"), "not valid JSON"),
    "not utf8": (_st_header_case(b'{"\xff": 1}'), "not valid JSON"),
    "not an object": (_st_header_case([1, 2]), "a JSON object was expected"),
    "missing keys": (_st_header_case({"x": {"dtype": "F32"}}), "needs 'dtype', 'shape'"),
    "unknown dtype": (
        _st_header_case({"x": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}}, bytes(4)),
        "unknown dtype 'F99'",
    ),
    "negative dim": (
        _st_header_case({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, bytes(4)),
        "must be a list of non-negative integers",
    ),
    "float dim": (
        _st_header_case({"x": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}}, bytes(4)),
        "must be a list of non-negative integers",
    ),
    "bool dim": (
        _st_header_case({"x": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}),
        "must be a list of non-negative integers",
    ),
    "reversed offsets": (
        _st_header_case({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, bytes(4)),
        "must be [begin, end]",
    ),
    "size mismatch": (
        _st_header_case({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, bytes(4)),
        "needs 8 bytes but data_offsets [0, 4] span 4",
    ),
    "out of bounds": (
        _st_header_case({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, bytes(4)),
        "is truncated: tensor 'x' ends at byte 8",
    ),
    "overlap": (
        _st_header_case(
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            },
            bytes(12),
        ),
        "overlap",
    ),
    "gap": (
        _st_header_case({"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)),
        "4 unused bytes before tensor 'x'",
    ),
    "trailing bytes": (
        _st_header_case({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, bytes(9)),
        "cover 4 bytes but the file holds 9 data bytes",
    ),
    "duplicate name": (
        b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
        b'"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
        "names 'x' twice",
    ),
    "too many dims": (
        _st_header_case({"x": {"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}}),
        "has 65 dimensions; at most 64 are supported",
    ),
    "bad metadata": (_st_header_case({"__metadata__": {"a": 1}}), "__metadata__ must map text"),
    "deep json": (_st_header_case(b"[" * 100_000 + b"]" * 100_000), "not valid JSON"),
}


@pytest.mark.parametrize("case", list(ST_CORRUPT), ids=list(ST_CORRUPT))
def test_corrupt_safetensors_says_what_is_wrong(case: str) -> None:
    data, expected = ST_CORRUPT[case]
    if case == "duplicate name":
        data = _st_header_case(data, bytes(4))
    with pytest.raises(LoadError) as info:
        list_tensors("m.safetensors", data)
    assert expected in str(info.value)
    assert str(info.value).startswith("m.safetensors")


def test_truncated_safetensors_upload() -> None:
    data = st_save({"a": torch.ones(100)})
    assert "is truncated" in error_of("m.safetensors", data[:-10])


def test_safetensors_limit_is_checked_from_the_header() -> None:
    data = st_save({"big": torch.ones(100, 100), "small": torch.ones(10)})
    limits = Limits(max_elements=1000)
    assert len(list_tensors("m.safetensors", data, limits)) == 2  # listing is always fine
    message = error_of("m.safetensors", data, "big", limits=limits)
    assert "10,000 elements (shape [100, 100])" in message and "limit is 1,000" in message
    assert load_tensor("m.safetensors", data, "small", limits).tensor.numel() == 10


def test_byte_limit_counts_float32_copy_of_int8() -> None:
    data = st_save({"q": torch.ones(100, dtype=torch.int8)})
    message = error_of("m.safetensors", data, limits=Limits(max_bytes=399))
    assert "needs 400 bytes" in message and "limit is 399 bytes" in message


# ---------------------------------------------------------------------------------------
# safetensors files on disk


def test_safetensors_file_lists_and_loads(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    tensors = {"w": torch.randn(4, 5), "b": torch.arange(3, dtype=torch.int16)}
    st_save_file(tensors, path)
    infos = list_safetensors_file(path)
    assert infos == (TensorInfo("b", (3,), "int16"), TensorInfo("w", (4, 5), "float32"))
    assert infos == list_tensors("model.safetensors", path.read_bytes())
    loaded = load_safetensors_file_tensor(path, "w")
    assert torch.equal(loaded.tensor, tensors["w"])
    ints = load_safetensors_file_tensor(str(path), "b")
    assert ints.tensor.dtype == torch.float32 and ints.notes


def test_safetensors_file_tensor_off_a_cache_line_loads_aligned(tmp_path: Path) -> None:
    """A float32 tensor stored 4 bytes past the data start (after a 1-value tensor) is
    mapped off a cache line; the loaded tensor starts on one, with the same values."""
    path = tmp_path / "offset.safetensors"
    tensors = {"a": torch.ones(1), "b": torch.randn(64, 48)}
    st_save_file(tensors, path)
    # The stored view itself is off a cache line, else this test proves nothing.
    with safe_open(str(path), framework="pt", device="cpu") as handle:
        assert handle.get_tensor("b").data_ptr() % 64 != 0
    loaded = load_safetensors_file_tensor(path, "b").tensor
    assert loaded.data_ptr() % 64 == 0
    assert torch.equal(loaded, tensors["b"])


def test_huge_safetensors_file_lists_and_loads_one_tensor(tmp_path: Path) -> None:
    """A sparse 400 MB file: listing reads the header; one small tensor is memory-mapped."""
    big = 10_000 * 10_000  # float32 elements, over the default limit
    header = {
        "small": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
        "huge": {"dtype": "F32", "shape": [10_000, 10_000], "data_offsets": [16, 16 + 4 * big]},
    }
    text = json.dumps(header).encode()
    path = tmp_path / "huge.safetensors"
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(text)) + text + struct.pack("<4f", 1, 2, 3, 4))
        handle.truncate(8 + len(text) + 16 + 4 * big)
    infos = list_safetensors_file(path)
    assert [i.numel for i in infos] == [big, 4]
    assert load_safetensors_file_tensor(path, "small").tensor.tolist() == [1, 2, 3, 4]
    with pytest.raises(LoadError, match=r"100,000,000 elements \(shape \[10000, 10000\]\)"):
        load_safetensors_file_tensor(path, "huge")


def test_safetensors_limit_is_checked_before_get_tensor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library lists the file (header only); a tensor over the limit is refused before
    ``get_tensor`` would allocate it, for files on disk and for uploads alike."""
    import safetensors

    real_open = safetensors.safe_open
    reads: list[str] = []

    class Spy:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self._handle = real_open(*args, **kwargs)

        def __enter__(self) -> Spy:
            self._inner = self._handle.__enter__()
            return self

        def __exit__(self, *exc: object) -> None:
            self._handle.__exit__(*exc)

        def keys(self) -> list[str]:
            return self._inner.keys()

        def get_slice(self, name: str) -> object:
            return self._inner.get_slice(name)

        def get_tensor(self, name: str) -> torch.Tensor:
            reads.append(name)
            return self._inner.get_tensor(name)

    path = tmp_path / "m.safetensors"
    st_save_file({"w": torch.ones(50, 50), "b": torch.ones(3)}, path)
    monkeypatch.setattr(safetensors, "safe_open", Spy)
    with pytest.raises(LoadError, match="2,500 elements"):
        load_safetensors_file_tensor(path, "w", Limits(max_elements=100))
    with pytest.raises(LoadError, match="2,500 elements"):
        load_tensor("m.safetensors", path.read_bytes(), "w", Limits(max_elements=100))
    assert reads == []
    assert load_safetensors_file_tensor(path, "b", Limits(max_elements=100)).tensor.numel() == 3
    assert reads == ["b"]


def test_safetensors_file_errors(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"cannot read missing\.safetensors"):
        list_safetensors_file(tmp_path / "missing.safetensors")
    with pytest.raises(LoadError, match=r"is not a \.safetensors file"):
        list_safetensors_file(tmp_path / "model.bin")
    path = tmp_path / "cut.safetensors"
    path.write_bytes(st_save({"w": torch.ones(10)})[:-4])
    with pytest.raises(LoadError, match="is truncated"):
        list_safetensors_file(path)
    short = tmp_path / "short.safetensors"
    short.write_bytes(b"abc")
    with pytest.raises(LoadError, match="too short"):
        load_safetensors_file_tensor(short)
    good = tmp_path / "good.safetensors"
    st_save_file({"w": torch.ones(2)}, good)
    with pytest.raises(LoadError, match="no tensor named 'x'"):
        load_safetensors_file_tensor(good, "x")


@pytest.mark.parametrize("size", [0, 7])
def test_a_file_on_disk_shorter_than_the_header_length_says_so(tmp_path: Path, size: int) -> None:
    path = tmp_path / "short.safetensors"
    path.write_bytes(bytes(size))
    with pytest.raises(LoadError) as info:
        list_safetensors_file(path)
    text = str(info.value)
    assert f"short.safetensors is not a safetensors file: {size} bytes, too short" in text
