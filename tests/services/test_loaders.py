"""File loaders behind the upload source: each format, each refusal, each limit."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save as st_save
from safetensors.torch import save_file as st_save_file

from dashboard.services.io import (
    DEFAULT_LIMITS,
    SUPPORTED_EXTENSIONS,
    Limits,
    LoadError,
    TensorInfo,
    list_safetensors_file,
    list_tensors,
    load_safetensors_file_tensor,
    load_tensor,
)

KEPT = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


# ---------------------------------------------------------------------------------------
# Builders


def pt_bytes(obj: object, **kwargs: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, **kwargs)
    return buffer.getvalue()


def npy_bytes(array: np.ndarray, version: tuple[int, int] | None = None) -> bytes:
    buffer = io.BytesIO()
    if version is None:
        np.save(buffer, array, allow_pickle=True)
    else:
        np.lib.format.write_array(buffer, array, version=version, allow_pickle=True)
    return buffer.getvalue()


def st_raw(header: dict[str, object], data: bytes) -> bytes:
    """A safetensors file from a header written by hand."""
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def error_of(filename: str, data: bytes, name: str | None = None, **kwargs: object) -> str:
    with pytest.raises(LoadError) as info:
        load_tensor(filename, data, name, **kwargs)
    return str(info.value)


class Evil:
    """Unpickling this runs a shell command that creates ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.path}",))


def rezip(raw: bytes, replace: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    """A copy of the zip archive ``raw`` with entries ending in a key of ``replace`` swapped."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w", compression) as dst:
        for entry in src.namelist():
            new = next((v for k, v in replace.items() if entry.endswith(k)), None)
            dst.writestr(entry, src.read(entry) if new is None else new)
    return out.getvalue()


# ---------------------------------------------------------------------------------------
# Format detection, empty files, API basics


def test_services_never_import_streamlit() -> None:
    code = (
        "import sys, dashboard.services.io, dashboard.services.sources.values; "
        "print('streamlit' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("filename", ["w.txt", "w", "w.npz", "w.safetensors.bak", "w.pkl"])
def test_unsupported_extension_names_the_supported_ones(filename: str) -> None:
    message = error_of(filename, b"anything")
    assert ".safetensors, .pt, .pth, .npy, .csv" in message


@pytest.mark.parametrize("filename", ["W.NPY", "w.Npy", "dir/sub/w.npy"])
def test_extension_is_case_insensitive_and_paths_are_fine(filename: str) -> None:
    loaded = load_tensor(filename, npy_bytes(np.ones((2, 2), np.float32)))
    assert loaded.tensor.shape == (2, 2)


@pytest.mark.parametrize("ext", SUPPORTED_EXTENSIONS)
def test_empty_file_is_refused(ext: str) -> None:
    assert "is empty (0 bytes)" in error_of(f"w{ext}", b"")
    with pytest.raises(LoadError, match="is empty"):
        list_tensors(f"w{ext}", b"")


def test_load_error_is_a_value_error() -> None:
    assert issubclass(LoadError, ValueError)


def test_limits_validate_and_default() -> None:
    assert Limits(64_000_000, 512 * 2**20) == DEFAULT_LIMITS
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(ValueError, match="positive int"):
            Limits(max_elements=bad)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        DEFAULT_LIMITS.max_elements = 3  # type: ignore[misc]


def test_wrong_argument_types_are_programming_errors() -> None:
    with pytest.raises(TypeError):
        load_tensor("w.npy", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        list_tensors(Path("w.npy"), b"x")  # type: ignore[arg-type]


def test_bytearray_and_memoryview_are_accepted() -> None:
    data = npy_bytes(np.arange(3, dtype=np.float32))
    for wrapped in (bytearray(data), memoryview(data)):
        assert load_tensor("a.npy", wrapped).tensor.tolist() == [0.0, 1.0, 2.0]


def test_tensor_info_helpers() -> None:
    info = TensorInfo("conv.weight", (64, 3, 7, 7), "float32")
    assert info.numel == 64 * 3 * 7 * 7
    assert info.describe() == "conv.weight [64, 3, 7, 7] float32"


# ---------------------------------------------------------------------------------------
# safetensors from uploaded bytes

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
    from dashboard.services.io import safetensors_format

    monkeypatch.setattr(safetensors_format, "MAX_TENSORS", 3)
    data = st_save({f"t{i}": torch.ones(1) for i in range(4)})
    assert "lists 4 tensors; the limit is 3" in error_of("m.safetensors", data)


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
    "too short": (b"\x01\x02\x03", "too short for the 8-byte header length"),
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


def test_safetensors_file_limit_is_checked_before_safe_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import safetensors

    path = tmp_path / "m.safetensors"
    st_save_file({"w": torch.ones(50, 50)}, path)

    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("safe_open must not run for a tensor over the limit")

    monkeypatch.setattr(safetensors, "safe_open", fail)
    with pytest.raises(LoadError, match="2,500 elements"):
        load_safetensors_file_tensor(path, "w", Limits(max_elements=100))


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


# ---------------------------------------------------------------------------------------
# .pt / .pth


def test_pt_bare_tensor_is_named_after_the_file() -> None:
    data = pt_bytes(torch.arange(6.0).reshape(2, 3))
    assert list_tensors("weights.PTH", data) == (TensorInfo("weights", (2, 3), "float32"),)
    loaded = load_tensor("weights.pth", data)
    assert loaded.name == "weights" and loaded.tensor.sum() == 15


def test_pt_nested_state_dict_is_flattened_in_order() -> None:
    obj = {
        "model": {"enc": {"weight": torch.ones(2, 2), "bias": torch.zeros(2)}},
        "layers": [torch.ones(1), (torch.ones(3, dtype=torch.int8),)],
        "epoch": 7,
        "name": "run",
    }
    data = pt_bytes(obj)
    names = [i.name for i in list_tensors("ckpt.pt", data)]
    assert names == ["model.enc.weight", "model.enc.bias", "layers.0", "layers.1.0"]
    loaded = load_tensor("ckpt.pt", data, "layers.1.0")
    assert loaded.tensor.dtype == torch.float32 and loaded.source_dtype == "int8"
    assert loaded.notes == ("int8 values converted to float32.",)


def test_pt_model_state_dict_and_parameters() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    data = pt_bytes(model.state_dict())
    infos = list_tensors("m.pt", data)
    assert [i.name for i in infos] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    loaded = load_tensor("m.pt", pt_bytes({"p": torch.nn.Parameter(torch.ones(2))}), "p")
    assert type(loaded.tensor) is torch.Tensor and not loaded.tensor.requires_grad


def test_pt_without_tensors_is_refused() -> None:
    message = error_of("m.pt", pt_bytes({"epoch": 3, "lr": 0.1}))
    assert "holds no tensors" in message and "float" in message and "int" in message


def test_pt_self_referencing_and_deep_containers() -> None:
    loop: list[object] = [torch.ones(2)]
    loop.append(loop)
    assert [i.name for i in list_tensors("m.pt", pt_bytes(loop))] == ["0"]
    deep: object = torch.ones(1)
    for _ in range(150):
        deep = [deep]
    with pytest.raises(LoadError, match="nests containers more than 100 levels"):
        list_tensors("m.pt", pt_bytes(deep))


def test_pt_shared_containers_are_walked_once() -> None:
    node: object = [torch.ones(1)]
    for _ in range(60):  # 2**60 paths if each shared list were walked per path
        node = [node, node]
    assert len(list_tensors("m.pt", pt_bytes(node))) == 1


def test_pt_colliding_dotted_names_stay_distinct() -> None:
    data = pt_bytes({"a.b": torch.ones(1), "a": {"b": torch.zeros(1)}})
    assert [i.name for i in list_tensors("m.pt", data)] == ["a.b", "a.b (2)"]
    assert load_tensor("m.pt", data, "a.b (2)").tensor.item() == 0


def test_pt_evil_reduce_via_torch_save_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for payload in (Evil(marker), {"w": torch.ones(2), "x": Evil(marker)}):
        data = pt_bytes(payload)
        for call in (list_tensors, load_tensor):
            with pytest.raises(LoadError) as info:
                call("evil.pt", data)
            assert "was refused: loading it would run or import Python code" in str(info.value)
            assert "posix.system" in str(info.value) or "nt.system" in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pt_evil_bare_pickle_is_refused_and_never_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    message = error_of("evil.pth", pickle.dumps(Evil(marker), protocol=protocol))
    assert "was refused: loading it would run or import Python code" in message
    assert "nothing in the file was run" in message
    assert not marker.exists()


def test_pt_evil_pickle_inside_a_torch_zip_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    data = rezip(pt_bytes(torch.ones(2)), {"data.pkl": pickle.dumps(Evil(marker), protocol=2)})
    assert "would run or import Python code" in error_of("evil.pt", data)
    assert not marker.exists()


def test_pt_whole_module_is_refused_with_state_dict_hint() -> None:
    message = error_of("model.pt", pt_bytes(torch.nn.Linear(2, 2)))
    assert "torch.nn.modules.linear.Linear" in message and "state_dict()" in message


def test_pt_legacy_format_is_refused() -> None:
    data = pt_bytes(torch.ones(3), _use_new_zipfile_serialization=False)
    message = error_of("old.pt", data)
    assert "old (before 1.6) file format" in message and "Re-save" in message


def test_pt_zero_stride_view_is_refused_before_it_is_materialized() -> None:
    """torch.save keeps views: one stored float can claim 100 million elements."""
    data = pt_bytes({"v": torch.zeros(1).expand(10_000, 10_000)})
    assert len(data) < 5_000
    (info,) = list_tensors("m.pt", data)
    assert info.numel == 10**8
    assert "100,000,000 elements" in error_of("m.pt", data)


def test_pt_zip_bomb_is_refused_before_loading() -> None:
    data = rezip(pt_bytes(torch.zeros(1_000_000)), {}, compression=zipfile.ZIP_DEFLATED)
    assert len(data) < 100_000
    message = error_of("bomb.pt", data, limits=Limits(max_bytes=1_000_000))
    assert "expands to 4,00" in message and "limit is 1,000,000 bytes" in message


def test_pt_file_over_byte_limit_is_refused() -> None:
    data = pt_bytes(torch.zeros(1000))
    assert "loaded whole" in error_of("m.pt", data, limits=Limits(max_bytes=1000))


@pytest.mark.parametrize(
    ("mangle", "expected"),
    [
        (lambda d: d[: len(d) // 2], "is corrupt"),
        (lambda d: b"PK\x03\x04" + bytes(200), "is corrupt"),
        (lambda d: b"not a checkpoint", "neither a zip archive nor a pickle"),
        (lambda d: rezip(d, {"data.pkl": b"\x80\x02garbage"}), "Unsupported operand 103"),
        (lambda d: rezip(d, {"data/0": b"\x00" * 3}), "is corrupt"),
    ],
    ids=["truncated", "zip magic only", "text", "bad pickle", "short storage"],
)
def test_corrupt_pt_says_what_is_wrong(mangle: object, expected: str) -> None:
    data = mangle(pt_bytes(torch.ones(4)))  # type: ignore[operator]
    assert expected in error_of("m.pt", data)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_pt_complex_sparse_quantized_nested_and_meta_tensors_are_refused() -> None:
    obj = {
        "z": torch.ones(2, dtype=torch.complex64),
        "s": torch.eye(3).to_sparse(),
        "q": torch.quantize_per_tensor(torch.tensor([0.5, 1.0]), 0.5, 0, torch.qint8),
        "n": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
        "m": torch.empty(2, 2, device="meta"),
        "ok": torch.ones(1),
    }
    data = pt_bytes(obj)
    assert [i.name for i in list_tensors("m.pt", data)] == list(obj)
    assert "is complex" in error_of("m.pt", data, "z")
    assert "sparse_coo layout; only dense tensors" in error_of("m.pt", data, "s")
    assert "quantized tensor (qint8)" in error_of("m.pt", data, "q")
    assert "nested (ragged) tensor" in error_of("m.pt", data, "n")
    assert "device 'meta'" in error_of("m.pt", data, "m")
    assert load_tensor("m.pt", data, "ok").tensor.tolist() == [1.0]


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_pt_crafted_sparse_tensors_are_never_densified() -> None:
    """torch.load does not check sparse indices; densifying these writes out of bounds."""
    coo = torch.sparse_coo_tensor(
        torch.tensor([[0, 10**9], [0, 5]]), torch.ones(2), (3, 3), check_invariants=False
    )
    csr = torch.sparse_csr_tensor(
        torch.tensor([0, 5, 1, 2]),
        torch.tensor([0, 99, 1]),
        torch.ones(3),
        (3, 3),
        check_invariants=False,
    )
    data = pt_bytes({"coo": coo, "csr": csr})
    assert "only dense tensors" in error_of("m.pt", data, "coo")
    assert "only dense tensors" in error_of("m.pt", data, "csr")


# ---------------------------------------------------------------------------------------
# .npy


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


# ---------------------------------------------------------------------------------------
# .csv


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


def test_csv_long_lines_and_blocks_parse_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny piece and block sizes exercise the paths a huge file takes."""
    from dashboard.services.io import csv_format

    text = "x,y,z\n" + "\n".join(f"{i},{i * 0.5},-{i}e3" for i in range(40)) + "\n"
    spaced = text.replace(",", "  ")
    expected = load_tensor("g.csv", text.encode()).tensor
    monkeypatch.setattr(csv_format, "_LONG_LINE", 3)
    monkeypatch.setattr(csv_format, "_CSV_BLOCK", 7)
    assert torch.equal(load_tensor("g.csv", text.encode()).tensor, expected)
    assert torch.equal(load_tensor("g.csv", spaced.encode()).tensor, expected)
    bad = text.replace("30,15.0", "30,1 5.0")
    assert "row 32, column 2 holds '1 5.0'" in error_of("g.csv", bad.encode())
    ragged = text.replace("\n25,", "\n25,7,")
    assert "row 27 has 4 columns; the rows above have 3" in error_of("g.csv", ragged.encode())


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
