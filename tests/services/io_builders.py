"""Builders of test files for the io tests: .pt/.npy/.safetensors bytes, a code-carrying
pickle, and the message of a refused load."""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from dashboard.services.io import LoadError, load_tensor


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
