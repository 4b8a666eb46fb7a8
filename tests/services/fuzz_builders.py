"""What the io fuzz tests share: small limits, the check that a load is sound or a
``LoadError``, and one valid seed file per format."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from safetensors.torch import save as st_save

from dashboard.services.io import (
    Limits,
    LoadedTensor,
    LoadError,
    TensorInfo,
    list_tensors,
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
