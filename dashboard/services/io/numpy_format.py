"""``.npy``: numeric arrays only, via ``np.load(..., allow_pickle=False)``."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
import torch

from .common import (
    MAX_DIMS,
    Limits,
    LoadedTensor,
    LoadError,
    TensorInfo,
    brief,
    check_only_name,
    check_size,
    display_name,
    finish,
    fmt_shape,
    is_count,
    short,
    stem,
)

__all__ = ["list_bytes", "load_bytes"]


def list_bytes(raw: bytes, filename: str, limits: Limits) -> tuple[TensorInfo, ...]:
    """The one array of the file, from its header alone."""
    header = _parse_npy_header(raw, filename)
    return (TensorInfo(stem(filename), header.shape, _numpy_dtype_name(header.dtype)),)


def load_bytes(raw: bytes, filename: str, name: str | None, limits: Limits) -> LoadedTensor:
    check_only_name(name, stem(filename), filename)
    return _load_npy(raw, filename, limits)


@dataclass(frozen=True)
class _NpyHeader:
    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype
    data_offset: int


def _numpy_dtype_name(dtype: np.dtype) -> str:
    return dtype.name  # no byte order: '>f4' is "float32"


def _parse_npy_header(raw: bytes, filename: str) -> _NpyHeader:
    shown = display_name(filename)
    if not raw.startswith(b"\x93NUMPY"):
        raise LoadError(f"{shown} is not a .npy file: it does not start with the \\x93NUMPY mark")
    handle = io.BytesIO(raw)
    fmt = np.lib.format
    try:
        major, _minor = fmt.read_magic(handle)
        if major == 1:
            shape, fortran_order, dtype = fmt.read_array_header_1_0(handle)
        elif major in (2, 3):
            shape, fortran_order, dtype = fmt.read_array_header_2_0(handle)
        else:
            raise LoadError(f"{shown} uses .npy format version {major}, which is not supported")
    except LoadError:
        raise
    except Exception as err:  # numpy's header parser raises several types
        raise LoadError(
            f"{shown} is corrupt: its .npy header cannot be read ({short(err)})"
        ) from err
    if not all(is_count(d) for d in shape):
        raise LoadError(f"{shown} is corrupt: shape {brief(shape)} in its header is not valid")
    if len(shape) > MAX_DIMS:
        raise LoadError(f"{shown} has {len(shape)} dimensions; at most {MAX_DIMS} are supported")
    _check_npy_dtype(dtype, shown)
    return _NpyHeader(tuple(shape), bool(fortran_order), dtype, handle.tell())


def _check_npy_dtype(dtype: np.dtype, shown: str) -> None:
    kind = dtype.kind
    if kind == "O" or dtype.hasobject:
        raise LoadError(
            f"{shown} holds Python objects (object dtype), which could run code when loaded; "
            "only numeric arrays are accepted"
        )
    if kind == "c":
        raise LoadError(
            f"{shown} holds complex numbers ({dtype.name}); only real numbers can be quantized"
        )
    if kind == "f" and dtype.itemsize not in (2, 4, 8):
        raise LoadError(f"{shown} holds {dtype.name} (long double); save it as float64")
    if kind not in "fiub":
        what = {"U": "text", "S": "bytes", "V": "structured records", "M": "dates", "m": "times"}
        raise LoadError(
            f"{shown} holds {what.get(kind, 'non-numeric data')} (dtype {dtype!s}); "
            "only numeric arrays are accepted"
        )


def _load_npy(raw: bytes, filename: str, limits: Limits) -> LoadedTensor:
    shown = display_name(filename)
    header = _parse_npy_header(raw, filename)
    name, dtype = stem(filename), header.dtype
    itemsize = dtype.itemsize if dtype.kind == "f" else max(dtype.itemsize, 4)
    check_size(name, header.shape, itemsize, limits)
    expected = math.prod(header.shape) * dtype.itemsize
    available = len(raw) - header.data_offset
    if available < expected:
        raise LoadError(
            f"{shown} is truncated: its header promises shape {fmt_shape(header.shape)} of "
            f"{dtype.name} ({expected:,} bytes) but only {available:,} bytes of data follow"
        )
    if available > expected:
        raise LoadError(
            f"{shown} is corrupt: {available - expected:,} unexpected bytes follow the array "
            f"data ({expected:,} bytes for shape {fmt_shape(header.shape)} of {dtype.name})"
        )
    try:
        array = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception as err:  # numpy's reader raises several types
        raise LoadError(f"{shown} cannot be read as .npy: {short(err)}") from err
    if not isinstance(array, np.ndarray) or array.dtype != dtype:
        raise LoadError(f"{shown} did not read back as the array its header describes")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if not array.flags.c_contiguous:  # not np.ascontiguousarray: it makes 0-d arrays 1-D
        array = array.copy(order="C")
    tensor = torch.from_numpy(array)
    return finish(tensor, name, _numpy_dtype_name(dtype), limits)
