""".pt / .pth: tensors and containers load; code-carrying and malformed files are refused."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import pytest
import torch
from io_builders import (
    Evil,
    error_of,
    pt_bytes,
    rezip,
)

from dashboard.services.io import (
    Limits,
    LoadError,
    TensorInfo,
    list_tensors,
    load_tensor,
)


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
