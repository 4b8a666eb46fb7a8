"""Read one tensor from an uploaded file or a file on disk, refusing hostile input clearly.

One front for every format: ``list_tensors`` / ``load_tensor`` take a file name and its
bytes (an upload) and dispatch on the extension (case-insensitive) to one module per
format, each exposing ``list_bytes(raw, filename, limits)`` and
``load_bytes(raw, filename, name, limits)``:

- ``safetensors_format``: ``.safetensors``, uploads and files on disk alike
  (``list_safetensors_file``, ``load_safetensors_file_tensor``, and
  ``open_safetensors_file`` to stream many tensors of one file): the one reader of such
  files for every page.
- ``torch_format``: ``.pt`` / ``.pth``, through ``torch.load(..., weights_only=True)``.
- ``numpy_format``: ``.npy``, numeric arrays only.
- ``csv_format``: ``.csv``, a grid of numbers.

A new format is one more module with those two functions and a line in ``_READERS``.

Every failure the user can cause raises ``LoadError``; its ``str`` is the message to show.
Sizes are checked against ``Limits`` before any large allocation. Integer and bool data
become float32 and float8 data become float32; float16, bfloat16 and float64 are kept as
they are; each conversion adds a line to ``LoadedTensor.notes``.

    infos = list_tensors("model.safetensors", data)       # TensorInfo per tensor
    loaded = load_tensor("model.safetensors", data, infos[0].name)
    loaded.tensor, loaded.notes
"""

from __future__ import annotations

from pathlib import PurePath
from types import ModuleType

from . import csv_format, numpy_format, safetensors_format, torch_format
from .common import DEFAULT_LIMITS, Limits, LoadedTensor, LoadError, TensorInfo, display_name

__all__ = [
    "DEFAULT_LIMITS",
    "SUPPORTED_EXTENSIONS",
    "Limits",
    "LoadError",
    "LoadedTensor",
    "TensorInfo",
    "list_safetensors_file",
    "list_tensors",
    "load_safetensors_file_tensor",
    "load_tensor",
    "open_safetensors_file",
]

_READERS: dict[str, ModuleType] = {
    ".safetensors": safetensors_format,
    ".pt": torch_format,
    ".pth": torch_format,
    ".npy": numpy_format,
    ".csv": csv_format,
}
SUPPORTED_EXTENSIONS = tuple(_READERS)

list_safetensors_file = safetensors_format.list_file
load_safetensors_file_tensor = safetensors_format.load_file_tensor
open_safetensors_file = safetensors_format.open_file


def list_tensors(
    filename: str, data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS
) -> tuple[TensorInfo, ...]:
    """The tensors an uploaded file holds, in file order (safetensors: natural name order).

    Safetensors and .npy read only their headers; a .pt file is loaded (it is one pickle);
    a .csv is parsed. Raises ``LoadError`` for anything unreadable.
    """
    reader, raw = _start(filename, data)
    return reader.list_bytes(raw, filename, limits)


def load_tensor(
    filename: str,
    data: bytes | bytearray | memoryview,
    name: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> LoadedTensor:
    """Load tensor ``name`` (``None``: the first ``list_tensors`` lists) from an upload.

    Raises ``LoadError`` for an unreadable file, an unknown name, an unsupported dtype or a
    tensor over ``limits``.
    """
    reader, raw = _start(filename, data)
    return reader.load_bytes(raw, filename, name, limits)


def _start(filename: str, data: bytes | bytearray | memoryview) -> tuple[ModuleType, bytes]:
    if not isinstance(filename, str):
        raise TypeError(f"filename must be a str, got {type(filename).__name__}")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    reader = _reader_of(filename)
    raw = bytes(data)  # no copy when it is already bytes
    if not raw:
        raise LoadError(f"{display_name(filename)} is empty (0 bytes)")
    return reader, raw


def _reader_of(filename: str) -> ModuleType:
    suffix = PurePath(filename).suffix.lower()
    if suffix not in _READERS:
        shown = f"'{suffix}'" if suffix else "no extension"
        raise LoadError(
            f"{display_name(filename)} has {shown}; supported files: "
            + ", ".join(SUPPORTED_EXTENSIONS)
        )
    return _READERS[suffix]
