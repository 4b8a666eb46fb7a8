"""The io front: format detection, empty files, argument types, limits, the result types;
and that nothing under io imports Streamlit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from io_builders import (
    error_of,
    npy_bytes,
)

from dashboard.services.io import (
    DEFAULT_LIMITS,
    SUPPORTED_EXTENSIONS,
    Limits,
    LoadError,
    TensorInfo,
    list_tensors,
    load_tensor,
)


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
