"""Read one tensor from an uploaded file or a file on disk, refusing hostile input clearly.

Formats, chosen by the file's extension (case-insensitive):

- ``.safetensors``: the header is parsed and checked here (dtype names, shapes, byte ranges),
  so listing costs nothing and only the chosen tensor's bytes are copied. Files on disk are
  read with ``safetensors.safe_open`` (memory-mapped, one tensor at a time).
- ``.pt`` / ``.pth``: a tensor, or a dict / list of tensors (nested containers flattened to
  dotted names such as ``encoder.layers.0.weight``), read only with
  ``torch.load(..., weights_only=True)``; anything that would run code is refused.
- ``.npy``: numeric arrays only, via ``np.load(..., allow_pickle=False)``.
- ``.csv``: a grid of numbers separated by ``,``, ``;``, tabs or spaces; a first row made only
  of text is taken as a header.

Every failure the user can cause raises ``LoadError``; its ``str`` is the message to show.
Sizes are checked against ``Limits`` before any large allocation. Integer and bool data
become float32 and float8 data become float32; float16, bfloat16 and float64 are kept as
they are; each conversion adds a line to ``LoadedTensor.notes``.

    infos = list_tensors("model.safetensors", data)       # TensorInfo per tensor
    loaded = load_tensor("model.safetensors", data, infos[0].name)
    loaded.tensor, loaded.notes
"""

from __future__ import annotations

import io
import itertools
import json
import math
import pickle
import pickletools
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TypeVar

import numpy as np
import torch

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
]

SUPPORTED_EXTENSIONS = (".safetensors", ".pt", ".pth", ".npy", ".csv")

# The safetensors library refuses headers above this size; so do we.
_MAX_SAFETENSORS_HEADER = 100_000_000
# Deeper nesting than this in a .pt file is refused rather than walked; so are more tensors.
_MAX_NESTING = 100
_MAX_TENSORS = 100_000
_MAX_DIMS = 64  # numpy's limit
# Magnitudes from 2**24 up may not survive the conversion of integers to float32 exactly.
_FLOAT32_EXACT_INT = 2**24


class LoadError(ValueError):
    """The one error the loaders raise for bad input; ``str(err)`` is the message to show."""


@dataclass(frozen=True)
class Limits:
    """Size limits checked before anything large is allocated.

    ``max_elements``: the most elements one tensor may have (64 million by default, an
    8000 x 8000 matrix). ``max_bytes``: the most bytes one loaded tensor may take in memory
    (counting its float32 copy when integers are converted), and the most a ``.pt`` or
    ``.csv`` file, which are parsed whole, may hold or expand to (512 MiB by default).
    """

    max_elements: int = 64_000_000
    max_bytes: int = 512 * 2**20

    def __post_init__(self) -> None:
        for field_name in ("max_elements", "max_bytes"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{field_name} must be a positive int, got {_brief(value)}")


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class TensorInfo:
    """One tensor a file holds, known without loading its data.

    ``dtype`` is the stored type in torch's spelling (``"float32"``, ``"bfloat16"``,
    ``"int8"``, ``"float8_e4m3fn"``, ``"bool"``), or the file's own name for types torch
    cannot load (``"F4"``).
    """

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def describe(self) -> str:
        """``"encoder.weight [64, 3, 7, 7] float32"``: a label for a picker."""
        return f"{self.name} {_fmt_shape(self.shape)} {self.dtype}"


@dataclass(frozen=True)
class LoadedTensor:
    """A loaded tensor: float32, float16, bfloat16 or float64, contiguous, on the CPU.

    ``source_dtype``: the type the file stored (``"int8"``, ``"text"`` for a CSV);
    ``notes``: one sentence per conversion or interpretation, to show beside the data.
    """

    tensor: torch.Tensor
    name: str
    source_dtype: str
    notes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------
# Public entry points


def list_tensors(
    filename: str, data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS
) -> tuple[TensorInfo, ...]:
    """The tensors an uploaded file holds, in file order (safetensors: natural name order).

    Safetensors and .npy read only their headers; a .pt file is loaded (it is one pickle);
    a .csv is parsed. Raises ``LoadError`` for anything unreadable.
    """
    fmt, raw = _start(filename, data)
    if fmt == ".safetensors":
        return tuple(entry.info for entry in _parse_safetensors_header(raw, filename))
    if fmt == ".npy":
        header = _parse_npy_header(raw, filename)
        return (TensorInfo(_stem(filename), header.shape, _numpy_dtype_name(header.dtype)),)
    if fmt == ".csv":
        loaded = _load_csv(raw, filename, limits)
        return (TensorInfo(loaded.name, tuple(loaded.tensor.shape), "text"),)
    return tuple(
        TensorInfo(name, _tensor_shape(t), _torch_dtype_name(t.dtype))
        for name, t in _load_pt(raw, filename, limits)
    )


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
    fmt, raw = _start(filename, data)
    if fmt == ".safetensors":
        entries = _parse_safetensors_header(raw, filename)
        entry = _pick(entries, name, filename, key=lambda e: e.info.name)
        return _safetensors_from_bytes(entry, raw, filename, limits)
    if fmt == ".npy":
        _check_name(name, _stem(filename), filename)
        return _load_npy(raw, filename, limits)
    if fmt == ".csv":
        loaded = _load_csv(raw, filename, limits)
        _check_name(name, loaded.name, filename)
        return loaded
    tensor_name, tensor = _pick(_load_pt(raw, filename, limits), name, filename, key=_first)
    return _finish(tensor, tensor_name, _torch_dtype_name(tensor.dtype), limits)


def list_safetensors_file(path: str | Path) -> tuple[TensorInfo, ...]:
    """The tensors in a ``.safetensors`` file on disk, reading only its header."""
    path = Path(path)
    header, data_len = _read_safetensors_file_header(path)
    return tuple(entry.info for entry in _parse_header_json(header, data_len, path.name))


def load_safetensors_file_tensor(
    path: str | Path, name: str | None = None, limits: Limits = DEFAULT_LIMITS
) -> LoadedTensor:
    """Load one tensor from a ``.safetensors`` file on disk through ``safe_open`` (mmap).

    The header is checked first, and the tensor's size against ``limits``, so a huge model
    costs only the chosen tensor's memory.
    """
    from safetensors import safe_open

    path = Path(path)
    header, data_len = _read_safetensors_file_header(path)
    entries = _parse_header_json(header, data_len, path.name)
    entry = _pick(entries, name, path.name, key=lambda e: e.info.name)
    _, dtype = _loadable(entry, path.name)
    _check_size(entry.info.name, entry.info.shape, _result_itemsize(dtype), limits)
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            tensor = handle.get_tensor(entry.info.name)
    except Exception as err:  # the library's errors are not one type
        raise LoadError(
            f"{path.name}: could not read tensor '{entry.info.name}': {_short(err)}"
        ) from err
    return _finish(tensor, entry.info.name, entry.info.dtype, limits)


# ---------------------------------------------------------------------------------------
# Shared checks and conversion


def _start(filename: str, data: bytes | bytearray | memoryview) -> tuple[str, bytes]:
    if not isinstance(filename, str):
        raise TypeError(f"filename must be a str, got {type(filename).__name__}")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    fmt = _format_of(filename)
    raw = bytes(data)  # no copy when it is already bytes
    if not raw:
        raise LoadError(f"{_display(filename)} is empty (0 bytes)")
    return fmt, raw


def _format_of(filename: str) -> str:
    suffix = PurePath(filename).suffix.lower()
    if suffix not in SUPPORTED_EXTENSIONS:
        shown = f"'{suffix}'" if suffix else "no extension"
        raise LoadError(
            f"{_display(filename)} has {shown}; supported files: " + ", ".join(SUPPORTED_EXTENSIONS)
        )
    return suffix


def _display(filename: str) -> str:
    name = PurePath(filename).name or filename
    return repr(name[:80]) if len(name) > 80 or not name.isprintable() else name


def _stem(filename: str) -> str:
    return PurePath(filename).stem or "tensor"


def _first(item: tuple[str, torch.Tensor]) -> str:
    return item[0]


_T = TypeVar("_T")


def _pick(items: Iterable[_T], name: str | None, filename: str, key: Callable[[_T], str]) -> _T:
    items = list(items)
    if not items:
        raise LoadError(f"{_display(filename)} holds no tensors")
    if name is None:
        return items[0]
    for item in items:
        if key(item) == name:
            return item
    names = [key(item) for item in items]
    shown = ", ".join(_brief(n) for n in names[:5]) + (
        f", … ({len(names)} in all)" if len(names) > 5 else ""
    )
    raise LoadError(f"{_display(filename)} has no tensor named {_brief(name)}; it holds {shown}")


def _check_name(name: str | None, only: str, filename: str) -> None:
    if name is not None and name != only:
        raise LoadError(
            f"{_display(filename)} holds one tensor, {_brief(only)}; "
            f"there is no tensor named {_brief(name)}"
        )


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _check_size(name: str, shape: tuple[int, ...], itemsize: int, limits: Limits) -> None:
    """Refuse a tensor over ``limits``; called before its memory is allocated."""
    numel = math.prod(shape)
    if numel > limits.max_elements:
        raise LoadError(
            f"tensor '{name}' has {numel:,} elements (shape {_fmt_shape(shape)}); "
            f"the limit is {limits.max_elements:,} elements"
        )
    nbytes = numel * itemsize
    if nbytes > limits.max_bytes:
        raise LoadError(
            f"tensor '{name}' needs {nbytes:,} bytes in memory (shape {_fmt_shape(shape)}); "
            f"the limit is {limits.max_bytes:,} bytes"
        )


_KEPT_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _result_itemsize(dtype: torch.dtype) -> int:
    """Bytes per element of the loaded result (and of the source, if larger)."""
    return dtype.itemsize if dtype in _KEPT_FLOATS else max(dtype.itemsize, 4)


def _torch_dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _tensor_problem(tensor: torch.Tensor) -> str | None:
    """Why ``tensor`` cannot be loaded safely, or None for a plain dense CPU tensor.

    Sparse, quantized and nested tensors from a .pt file are refused: torch.load does not
    check their indices and parameters, and converting a crafted one reads or writes out of
    bounds. Meta tensors have no data.
    """
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        return f"is a tensor subclass ({type(tensor).__name__}); only plain tensors are loaded"
    if tensor.is_nested:
        return "is a nested (ragged) tensor; only regular tensors are loaded"
    if tensor.layout != torch.strided:
        return (
            f"is stored in the {str(tensor.layout).removeprefix('torch.')} layout; only dense "
            "tensors are loaded (save it with .to_dense())"
        )
    if tensor.is_quantized:
        return (
            f"is a PyTorch quantized tensor ({_torch_dtype_name(tensor.dtype)}); those are not "
            "loaded (save it with .dequantize())"
        )
    if tensor.device.type != "cpu":
        return f"has no data here (device '{tensor.device.type}')"
    return None


def _tensor_shape(tensor: torch.Tensor) -> tuple[int, ...]:
    """The shape for a listing; () for a tensor without one (nested tensors)."""
    try:
        return tuple(int(d) for d in tensor.shape)
    except Exception:  # nested tensors have no single shape
        return ()


def _finish(tensor: torch.Tensor, name: str, source_dtype: str, limits: Limits) -> LoadedTensor:
    """Check kind and size, then make ``tensor`` a plain contiguous float tensor.

    The size check comes first: a .pt tensor may be a zero-stride view of one stored value
    that claims a huge shape and would allocate it when made contiguous.
    """
    problem = _tensor_problem(tensor)
    if problem:
        raise LoadError(f"tensor '{name}' {problem}")
    shape = tuple(int(d) for d in tensor.shape)
    dtype = tensor.dtype
    if dtype.is_complex:
        raise LoadError(
            f"tensor '{name}' is complex ({_torch_dtype_name(dtype)}); only real numbers "
            "can be quantized here (save its .real or .imag part)"
        )
    _check_size(name, shape, _result_itemsize(dtype), limits)
    if math.prod(shape) == 0:
        raise LoadError(f"tensor '{name}' is empty (shape {_fmt_shape(shape)}); nothing to show")
    notes: list[str] = []
    try:
        tensor = tensor.detach()
        if dtype in _KEPT_FLOATS:
            if dtype != torch.float32:
                notes.append(f"Stored as {_torch_dtype_name(dtype)}; kept as it is.")
        elif dtype.is_floating_point:
            tensor = tensor.to(torch.float32)
            notes.append(f"{_torch_dtype_name(dtype)} values converted to float32.")
        elif dtype == torch.bool:
            tensor = tensor.to(torch.float32)
            notes.append("bool values converted to float32 (False → 0, True → 1).")
        else:
            tensor = tensor.to(torch.float32)
            note = f"{_torch_dtype_name(dtype)} values converted to float32."
            if bool((tensor.abs() >= _FLOAT32_EXACT_INT).any()):
                note += f" Some magnitudes reach 2^24 = {_FLOAT32_EXACT_INT:,}; may be rounded."
            notes.append(note)
        tensor = tensor.contiguous()
        if type(tensor) is not torch.Tensor:  # nn.Parameter
            tensor = tensor.as_subclass(torch.Tensor)
    except Exception as err:  # dtypes torch cannot convert (bits8, uint4, ...)
        raise LoadError(
            f"tensor '{name}' ({_torch_dtype_name(dtype)}) could not be converted to a float "
            f"tensor: {_short(err)}"
        ) from err
    return LoadedTensor(tensor, name, source_dtype, tuple(notes))


def _short(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------
# safetensors


@dataclass(frozen=True)
class _StDtype:
    """A safetensors dtype: display name, bits per element, how to build it (or None)."""

    name: str
    bits: int
    numpy: str | None  # little-endian numpy type of the raw bytes
    torch: torch.dtype | None  # reinterpret those bytes as this torch dtype


_ST_DTYPES: dict[str, _StDtype] = {
    "F64": _StDtype("float64", 64, "<f8", torch.float64),
    "F32": _StDtype("float32", 32, "<f4", torch.float32),
    "F16": _StDtype("float16", 16, "<f2", torch.float16),
    "BF16": _StDtype("bfloat16", 16, "<u2", torch.bfloat16),
    "I64": _StDtype("int64", 64, "<i8", torch.int64),
    "I32": _StDtype("int32", 32, "<i4", torch.int32),
    "I16": _StDtype("int16", 16, "<i2", torch.int16),
    "I8": _StDtype("int8", 8, "i1", torch.int8),
    "U64": _StDtype("uint64", 64, "<u8", torch.uint64),
    "U32": _StDtype("uint32", 32, "<u4", torch.uint32),
    "U16": _StDtype("uint16", 16, "<u2", torch.uint16),
    "U8": _StDtype("uint8", 8, "u1", torch.uint8),
    "BOOL": _StDtype("bool", 8, "u1", torch.bool),
    "F8_E4M3": _StDtype("float8_e4m3fn", 8, "u1", torch.float8_e4m3fn),
    "F8_E5M2": _StDtype("float8_e5m2", 8, "u1", torch.float8_e5m2),
    "F8_E8M0": _StDtype("float8_e8m0fnu", 8, "u1", torch.float8_e8m0fnu),
    # Known to the format but not loadable here.
    "C64": _StDtype("complex64", 64, None, None),
    "F4": _StDtype("F4", 4, None, None),
    "F6_E2M3": _StDtype("F6_E2M3", 6, None, None),
    "F6_E3M2": _StDtype("F6_E3M2", 6, None, None),
}


@dataclass(frozen=True)
class _StEntry:
    info: TensorInfo
    st_dtype: str
    begin: int  # byte offsets into the data section
    end: int


def _parse_safetensors_header(raw: bytes, filename: str) -> tuple[_StEntry, ...]:
    shown = _display(filename)
    if len(raw) < 8:
        raise LoadError(
            f"{shown} is not a safetensors file: {len(raw)} bytes, too short for the 8-byte "
            "header length"
        )
    header_len = int.from_bytes(raw[:8], "little")
    available = len(raw) - 8
    if header_len > available:
        raise LoadError(
            f"{shown} is truncated or not a safetensors file: its header length says "
            f"{header_len:,} bytes but only {available:,} bytes follow"
        )
    return _parse_header_json(raw[8 : 8 + header_len], available - header_len, filename)


def _read_safetensors_file_header(path: Path) -> tuple[bytes, int]:
    """Read only the JSON header of a file on disk; also the size of its data section."""
    shown = _display(path.name)
    if path.suffix.lower() != ".safetensors":
        raise LoadError(f"{shown} is not a .safetensors file")
    try:
        with path.open("rb") as handle:
            size = path.stat().st_size
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise LoadError(
                    f"{shown} is not a safetensors file: {size} bytes, too short for the "
                    "8-byte header length"
                )
            header_len = int.from_bytes(prefix, "little")
            if header_len > size - 8:
                raise LoadError(
                    f"{shown} is truncated or not a safetensors file: its header length says "
                    f"{header_len:,} bytes but only {size - 8:,} bytes follow"
                )
            if header_len > _MAX_SAFETENSORS_HEADER:
                raise LoadError(
                    f"{shown}: header of {header_len:,} bytes is over the "
                    f"{_MAX_SAFETENSORS_HEADER:,}-byte limit"
                )
            header = handle.read(header_len)
    except OSError as err:
        raise LoadError(f"cannot read {shown}: {err.strerror or _short(err)}") from err
    return header, size - 8 - header_len


def _reject_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise LoadError(f"the header names {_brief(key)} twice")
        out[key] = value
    return out


def _parse_header_json(header: bytes, data_len: int, filename: str) -> tuple[_StEntry, ...]:
    """Validate a safetensors header against a data section of ``data_len`` bytes."""
    shown = _display(filename)
    if len(header) > _MAX_SAFETENSORS_HEADER:
        raise LoadError(
            f"{shown}: header of {len(header):,} bytes is over the "
            f"{_MAX_SAFETENSORS_HEADER:,}-byte limit"
        )
    try:
        text = header.decode("utf-8")
        parsed = json.loads(text, object_pairs_hook=_reject_duplicates)
    except LoadError as err:
        raise LoadError(f"{shown}: corrupt safetensors header: {err}") from err
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise LoadError(
            f"{shown} is corrupt or not a safetensors file: its header is not valid JSON "
            f"({_short(err, 120)})"
        ) from err
    if not isinstance(parsed, dict):
        raise LoadError(f"{shown}: corrupt safetensors header: a JSON object was expected")
    metadata = parsed.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise LoadError(f"{shown}: corrupt safetensors header: __metadata__ must map text to text")
    if len(parsed) > _MAX_TENSORS:
        raise LoadError(f"{shown} lists {len(parsed):,} tensors; the limit is {_MAX_TENSORS:,}")
    entries = [_parse_entry(name, spec, shown) for name, spec in parsed.items()]
    _check_layout(entries, data_len, shown)
    return tuple(sorted(entries, key=lambda e: _natural_key(e.info.name)))


def _parse_entry(name: str, spec: object, shown: str) -> _StEntry:
    where = f"{shown}: tensor {_brief(name)}"
    if not isinstance(spec, dict) or not {"dtype", "shape", "data_offsets"} <= spec.keys():
        raise LoadError(f"{where}: needs 'dtype', 'shape' and 'data_offsets' in the header")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if not isinstance(dtype, str) or dtype not in _ST_DTYPES:
        raise LoadError(
            f"{where} has unknown dtype {_brief(dtype)}; known: " + ", ".join(sorted(_ST_DTYPES))
        )
    if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
        raise LoadError(f"{where}: shape {_brief(shape)} must be a list of non-negative integers")
    if len(shape) > _MAX_DIMS:
        raise LoadError(f"{where} has {len(shape)} dimensions; at most {_MAX_DIMS} are supported")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_count(o) for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise LoadError(
            f"{where}: data_offsets {_brief(offsets)} must be [begin, end], 0 <= begin <= end"
        )
    shape_t = tuple(shape)
    bits = math.prod(shape_t) * _ST_DTYPES[dtype].bits
    if bits % 8:
        raise LoadError(f"{where}: shape {_fmt_shape(shape_t)} of {dtype} is not whole bytes")
    begin, end = offsets
    if end - begin != bits // 8:
        raise LoadError(
            f"{where}: shape {_fmt_shape(shape_t)} of {dtype} needs {bits // 8:,} bytes but "
            f"data_offsets [{begin}, {end}] span {end - begin:,}"
        )
    return _StEntry(TensorInfo(name, shape_t, _ST_DTYPES[dtype].name), dtype, begin, end)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_layout(entries: list[_StEntry], data_len: int, shown: str) -> None:
    """Tensors must tile the data section exactly: no overlap, no gap, nothing past the end."""
    position = 0
    previous = None
    for entry in sorted(entries, key=lambda e: (e.begin, e.end)):
        if entry.end > data_len:
            raise LoadError(
                f"{shown} is truncated: tensor {_brief(entry.info.name)} ends at byte "
                f"{entry.end:,} of the data but the file holds {data_len:,} data bytes"
            )
        if entry.begin < position:
            raise LoadError(
                f"{shown} is corrupt: tensors {_brief(previous)} and {_brief(entry.info.name)} "
                f"overlap (bytes {entry.begin:,}-{position:,})"
            )
        if entry.begin > position:
            raise LoadError(
                f"{shown} is corrupt: {entry.begin - position:,} unused bytes before tensor "
                f"{_brief(entry.info.name)}"
            )
        position = entry.end
        previous = entry.info.name
    if position != data_len:
        raise LoadError(
            f"{shown} is corrupt: its tensors cover {position:,} bytes but the file holds "
            f"{data_len:,} data bytes"
        )


def _natural_key(name: str) -> list[tuple[int, int, str]]:
    """``layers.2`` before ``layers.10`` (digit runs compared by length, then text)."""
    key = []
    for part in re.split(r"(\d+)", name):
        if part.isdecimal():
            digits = part.lstrip("0")
            key.append((0, len(digits), digits))
        else:
            key.append((1, 0, part))
    return key


def _loadable(entry: _StEntry, filename: str) -> tuple[str, torch.dtype]:
    """The numpy type of ``entry``'s raw bytes and the torch dtype they hold, or LoadError."""
    spec = _ST_DTYPES[entry.st_dtype]
    if spec.numpy is None or spec.torch is None:
        kind = "complex numbers" if entry.st_dtype.startswith("C") else "a packed sub-byte type"
        raise LoadError(
            f"tensor '{entry.info.name}' in {_display(filename)} has dtype {entry.st_dtype} "
            f"({kind}), which cannot be loaded here"
        )
    return spec.numpy, spec.torch


def _safetensors_from_bytes(
    entry: _StEntry, raw: bytes, filename: str, limits: Limits
) -> LoadedTensor:
    """Build only ``entry``'s tensor from its byte slice of an uploaded file."""
    raw_type, dtype = _loadable(entry, filename)
    info = entry.info
    _check_size(info.name, info.shape, _result_itemsize(dtype), limits)
    data_start = 8 + int.from_bytes(raw[:8], "little")
    chunk = bytearray(memoryview(raw)[data_start + entry.begin : data_start + entry.end])
    array = np.frombuffer(chunk, dtype=raw_type)
    array = array.astype(array.dtype.newbyteorder("="), copy=False)  # no copy on x86/ARM
    tensor = torch.from_numpy(array)
    if dtype == torch.bool:
        tensor = tensor != 0
    elif tensor.dtype != dtype:
        tensor = tensor.view(dtype)
    return _finish(tensor.reshape(info.shape), info.name, info.dtype, limits)


# ---------------------------------------------------------------------------------------
# .npy


@dataclass(frozen=True)
class _NpyHeader:
    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype
    data_offset: int


def _numpy_dtype_name(dtype: np.dtype) -> str:
    return dtype.name  # no byte order: '>f4' is "float32"


def _parse_npy_header(raw: bytes, filename: str) -> _NpyHeader:
    shown = _display(filename)
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
            f"{shown} is corrupt: its .npy header cannot be read ({_short(err)})"
        ) from err
    if not all(_is_count(d) for d in shape):
        raise LoadError(f"{shown} is corrupt: shape {_brief(shape)} in its header is not valid")
    if len(shape) > _MAX_DIMS:
        raise LoadError(f"{shown} has {len(shape)} dimensions; at most {_MAX_DIMS} are supported")
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
    shown = _display(filename)
    header = _parse_npy_header(raw, filename)
    name, dtype = _stem(filename), header.dtype
    itemsize = dtype.itemsize if dtype.kind == "f" else max(dtype.itemsize, 4)
    _check_size(name, header.shape, itemsize, limits)
    expected = math.prod(header.shape) * dtype.itemsize
    available = len(raw) - header.data_offset
    if available < expected:
        raise LoadError(
            f"{shown} is truncated: its header promises shape {_fmt_shape(header.shape)} of "
            f"{dtype.name} ({expected:,} bytes) but only {available:,} bytes of data follow"
        )
    if available > expected:
        raise LoadError(
            f"{shown} is corrupt: {available - expected:,} unexpected bytes follow the array "
            f"data ({expected:,} bytes for shape {_fmt_shape(header.shape)} of {dtype.name})"
        )
    try:
        array = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception as err:  # numpy's reader raises several types
        raise LoadError(f"{shown} cannot be read as .npy: {_short(err)}") from err
    if not isinstance(array, np.ndarray) or array.dtype != dtype:
        raise LoadError(f"{shown} did not read back as the array its header describes")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if not array.flags.c_contiguous:  # not np.ascontiguousarray: it makes 0-d arrays 1-D
        array = array.copy(order="C")
    tensor = torch.from_numpy(array)
    return _finish(tensor, name, _numpy_dtype_name(dtype), limits)


# ---------------------------------------------------------------------------------------
# .pt / .pth

_PICKLE_GLOBAL = re.compile(r"GLOBAL ([\w.]+)", re.IGNORECASE)
_UNPICKLER_DETAIL = re.compile(
    r"WeightsUnpickler error:(.*?)(Check the documentation|$)", re.DOTALL
)


def _load_pt(raw: bytes, filename: str, limits: Limits) -> list[tuple[str, torch.Tensor]]:
    """Unpickle with ``weights_only=True`` and flatten to ``(dotted name, tensor)`` pairs."""
    shown = _display(filename)
    if len(raw) > limits.max_bytes:
        raise LoadError(
            f"{shown} is {len(raw):,} bytes; .pt files are loaded whole and the limit is "
            f"{limits.max_bytes:,} bytes (a .safetensors file on disk has no such limit)"
        )
    if not raw.startswith(b"PK\x03\x04"):
        raise LoadError(_not_zip_message(raw, shown))
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            expanded = sum(member.file_size for member in archive.infolist())
    except Exception as err:  # zipfile raises several types on damaged archives
        raise LoadError(
            f"{shown} is corrupt: its zip archive cannot be read ({_short(err)})"
        ) from err
    if expanded > limits.max_bytes:
        raise LoadError(
            f"{shown} expands to {expanded:,} bytes; the limit is {limits.max_bytes:,} bytes"
        )
    try:
        obj = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise LoadError(_unpickling_message(str(err), shown)) from err
    except Exception as err:  # torch.load raises many types on damaged files
        raise LoadError(f"{shown} is corrupt or not a PyTorch tensor file: {_short(err)}") from err
    return _flatten(obj, _stem(filename), shown)


def _code_refusal(shown: str, global_name: str | None) -> str:
    what = f" ('{global_name}')" if global_name else ""
    return (
        f"{shown} was refused: loading it would run or import Python code{what}. Only "
        "tensors and dicts or lists of tensors are accepted, and nothing in the file was "
        "run. For a model, save model.state_dict() instead of the model."
    )


def _unpickling_message(text: str, shown: str) -> str:
    found = _PICKLE_GLOBAL.search(text)
    if found:
        return _code_refusal(shown, _short(found.group(1).rstrip("."), 80))
    detail = _UNPICKLER_DETAIL.search(text)
    return (
        f"{shown} is corrupt or not a plain tensor file; the safe loader refused it"
        f" ({_short(detail.group(1) if detail and detail.group(1).strip() else text, 160)})"
    )


# Globals that PyTorch's pre-1.6 format itself uses; any other one in a bare pickle is code.
_TORCH_LEGACY_GLOBALS = re.compile(r"(torch(\._utils)?|collections) \w+")


def _not_zip_message(raw: bytes, shown: str) -> str:
    """Why a .pt file that is not a zip archive is refused, naming any code it would import.

    Bare pickles and PyTorch's pre-1.6 format are never unpickled here: even torch's
    restricted loader allocates the storage sizes they declare before reading any data.
    The scan below only reads opcodes; it runs nothing.
    """
    suspect, is_pickle = _scan_pickle(raw)
    if suspect:
        return _code_refusal(shown, _short(suspect, 80))
    if is_pickle or raw[257:262] == b"ustar":
        return (
            f"{shown} is a bare pickle or uses PyTorch's old (before 1.6) file format; it is "
            "refused because such files can run code or make the loader allocate memory the "
            "file does not hold. Nothing in it was run. Re-save it with a current torch.save."
        )
    return f"{shown} is not a PyTorch file: it is neither a zip archive nor a pickle"


def _scan_pickle(raw: bytes) -> tuple[str | None, bool]:
    """(the first import that is not PyTorch's own, or None; whether ``raw`` is a pickle)."""
    strings: list[str] = []
    try:
        for opcode, arg, _pos in pickletools.genops(raw):
            if opcode.name == "GLOBAL" and isinstance(arg, str):
                candidate = arg
            elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                candidate = f"{strings[-2]} {strings[-1]}"
            else:
                if isinstance(arg, str):
                    strings.append(arg)
                continue
            if not _TORCH_LEGACY_GLOBALS.fullmatch(candidate):
                return candidate.replace(" ", "."), True
    except Exception:  # not a pickle, or a damaged one
        return None, False
    return None, True


def _flatten(obj: object, root: str, shown: str) -> list[tuple[str, torch.Tensor]]:
    """Tensors in ``obj`` with dotted names, depth first in container order; others skipped.

    Each container is walked once (a pickle can share one container many times, or make it
    hold itself), so the work is bounded by the file's size.
    """
    found: list[tuple[str, torch.Tensor]] = []
    names: set[str] = set()
    skipped: set[str] = set()
    walked: set[int] = set()
    stack: list[tuple[str, object, int]] = [("", obj, 0)]
    while stack:
        prefix, value, depth = stack.pop()
        if isinstance(value, torch.Tensor):
            if len(found) >= _MAX_TENSORS:
                raise LoadError(f"{shown} holds more than {_MAX_TENSORS:,} tensors")
            name = prefix or root
            unique, n = name, 2
            while unique in names:
                unique, n = f"{name} ({n})", n + 1
            names.add(unique)
            found.append((unique, value))
            continue
        if isinstance(value, dict):
            children = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            children = [(str(i), v) for i, v in enumerate(value)]
        else:
            skipped.add(type(value).__name__)
            continue
        if id(value) in walked:
            continue
        if depth >= _MAX_NESTING:
            raise LoadError(f"{shown} nests containers more than {_MAX_NESTING} levels deep")
        walked.add(id(value))
        for key, child in reversed(children):
            stack.append((f"{prefix}.{key}" if prefix else key, child, depth + 1))
    if not found:
        what = f" (it holds {', '.join(sorted(skipped))})" if skipped else ""
        raise LoadError(f"{shown} holds no tensors{what}")
    return found


# ---------------------------------------------------------------------------------------
# .csv

_DELIMITERS = (",", "\t", ";")
_SPACE = re.compile(r"\s")
# Lines longer than this are split piece by piece, so a hostile one-line file stays small.
_LONG_LINE = 1 << 20
# Lines handed to numpy's reader at a time; a bad block is re-read line by line.
_CSV_BLOCK = 1 << 16


def _load_csv(raw: bytes, filename: str, limits: Limits) -> LoadedTensor:
    """Parse a grid of numbers; rows and columns in messages count from 1, blank lines too."""
    shown = _display(filename)
    if len(raw) > limits.max_bytes:
        raise LoadError(f"{shown} is {len(raw):,} bytes; the limit is {limits.max_bytes:,} bytes")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        row = raw.count(b"\n", 0, err.start) + 1
        raise LoadError(
            f"{shown} is not UTF-8 text: undecodable byte at row {row} (byte {err.start + 1:,}); "
            "is it really a CSV file?"
        ) from err
    if "\x00" in text:
        raise LoadError(f"{shown} contains NUL bytes: it is a binary file, not a CSV")
    newline = "\n" if "\n" in text or "\r" not in text else "\r"  # "\r" alone: old Mac files
    sample = [line for _, line in itertools.islice(_csv_lines(text, newline), 20)]
    if not sample:
        raise LoadError(f"{shown} holds no numbers (only blank lines)")
    delimiter = next((d for d in _DELIMITERS if any(d in line for line in sample)), None)
    n_cols = _n_cells(sample[0], delimiter)
    n_lines = text.count(newline) + 1
    estimate = n_lines * n_cols  # an upper bound, from the line count and the first row
    if estimate > limits.max_elements or estimate * 8 > limits.max_bytes:  # parsed as float64
        raise LoadError(
            f"{shown} has up to {estimate:,} cells ({n_lines:,} lines x {n_cols:,} columns); "
            f"the limit is {min(limits.max_elements, limits.max_bytes // 8):,} cells"
        )
    notes: list[str] = []
    rows: Iterator[tuple[int, str]] = _csv_lines(text, newline)
    first_row, first_line = next(rows)
    if _is_header(first_line, delimiter):
        labels = [_quote(c.strip(), 20) for c in next(_chunks(first_line, delimiter))[1][:6]]
        more = ", …" if n_cols > 6 else ""
        notes.append(f"Row {first_row} read as a header: {', '.join(labels)}{more}.")
    else:
        rows = itertools.chain([(first_row, first_line)], rows)
    out = np.empty((n_lines, n_cols), dtype=np.float64)
    n_rows = 0
    while block := list(itertools.islice(rows, _CSV_BLOCK)):
        _parse_block(block, delimiter, out[n_rows : n_rows + len(block)], shown)
        n_rows += len(block)
    if n_rows == 0:
        raise LoadError(f"{shown} holds a header row but no rows of numbers")
    grid = out[:n_rows]
    with np.errstate(over="ignore"):
        values = grid.astype(np.float32)
    overflowed = int(np.count_nonzero(np.isfinite(grid) & ~np.isfinite(values)))
    notes.append("CSV numbers read as float32.")
    if overflowed:
        notes.append(f"{_count(overflowed, 'value')} beyond float32's range became ±inf.")
    return LoadedTensor(torch.from_numpy(values), _stem(filename), "text", tuple(notes))


def _parse_block(
    block: list[tuple[int, str]], delimiter: str | None, out: np.ndarray, shown: str
) -> None:
    """Parse lines into ``out``: numpy's C reader first, then line by line for the message.

    ``np.loadtxt`` (without quote handling) accepts the same cells as ``_cell_value``; a
    fuzz test checks that. When it fails (quoted cells, a bad cell, a ragged row), the slow
    path finds the first bad row and cell, or parses the block itself.
    """
    try:
        values = np.loadtxt(
            [line for _, line in block],
            dtype=np.float64,
            delimiter=delimiter,
            comments=None,
            quotechar=None,  # its quote rules are looser than ours ('"1"2' reads as 12)
            ndmin=2,
        )
        if values.shape == out.shape:
            out[:] = values
            return
    except Exception:  # numpy raises ValueError, and others on odd input: parse it slowly
        pass
    n_cols = out.shape[1]
    for i, (row, line) in enumerate(block):
        n = _n_cells(line, delimiter)
        if n != n_cols:
            raise LoadError(
                f"{shown}: row {row} has {_count(n, 'column')}; the rows above have {n_cols}"
            )
        _parse_line(line, delimiter, out[i], row, shown)


def _csv_lines(text: str, newline: str) -> Iterator[tuple[int, str]]:
    """(1-based row number, line without its ending) for each non-blank line, lazily."""
    start, row = 0, 1
    while start <= len(text):
        end = text.find(newline, start)
        end = len(text) if end < 0 else end
        line = text[start:end]
        if line.endswith("\r"):
            line = line[:-1]
        if line and not line.isspace():
            yield row, line
        start, row = end + 1, row + 1


def _chunks(line: str, delimiter: str | None) -> Iterator[tuple[str, list[str]]]:
    """``(piece, its cells)`` for pieces of about ``_LONG_LINE`` characters cut at separators.

    The cells of all pieces together are ``line.split(delimiter)``; a hostile one-line file
    is never split into one huge list.
    """
    start, end = 0, len(line)
    while True:
        cut = end
        if end - start > _LONG_LINE:
            if delimiter:
                found = line.find(delimiter, start + _LONG_LINE)
            else:
                match = _SPACE.search(line, start + _LONG_LINE)
                found = match.start() if match else -1
            cut = found if found >= 0 else end
        piece = line[start:cut]
        yield piece, piece.split(delimiter) if delimiter else piece.split()
        if cut >= end:
            return
        start = cut + 1


def _n_cells(line: str, delimiter: str | None) -> int:
    if delimiter:
        return line.count(delimiter) + 1
    return sum(len(cells) for _, cells in _chunks(line, None))


def _is_header(line: str, delimiter: str | None) -> bool:
    """A row of text labels: no cell is a number, and at least one is not empty."""
    labelled = False
    for _, cells in _chunks(line, delimiter):
        for cell in cells:
            if _cell_value(cell) is not None:
                return False
            labelled = labelled or bool(cell.strip())
    return labelled


def _cell_value(cell: str) -> float | None:
    """The number in one cell (surrounding spaces and quotes allowed), or None."""
    text = cell.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1].strip()
    if not text or not text.isascii() or "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _parse_line(line: str, delimiter: str | None, out: np.ndarray, row: int, shown: str) -> None:
    """Write the numbers of ``line`` into ``out`` or raise ``LoadError`` naming the bad cell."""
    column = 0
    for piece, cells in _chunks(line, delimiter):
        stop = column + len(cells)
        if piece.isascii() and "_" not in piece:
            try:  # the common case: plain numbers, parsed at C speed
                out[column:stop] = [float(cell) for cell in cells]
                column = stop
                continue
            except ValueError:
                pass
        for offset, cell in enumerate(cells):
            value = _cell_value(cell)
            if value is None:
                where = f"{shown}: row {row}, column {column + offset + 1}"
                if not cell.strip():
                    raise LoadError(f"{where} is empty; expected a number")
                raise LoadError(f"{where} holds {_quote(cell.strip())}, which is not a number")
            out[column + offset] = value
        column = stop


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _brief(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: names and values from files can be huge."""
    text = repr(value) if not isinstance(value, list | tuple) or len(value) < 20 else "[…]"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(text: str, limit: int = 40) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(shown) if not shown.isprintable() else f"'{shown}'"
