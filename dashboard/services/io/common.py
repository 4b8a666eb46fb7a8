"""What every format reader shares: the result types, the size limits, the conversion to a
float tensor, and short quoting of names and values taken from files for messages."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePath
from typing import TypeVar

import torch

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_DIMS",
    "MAX_TENSORS",
    "Limits",
    "LoadError",
    "LoadedTensor",
    "TensorInfo",
    "brief",
    "check_only_name",
    "check_size",
    "count",
    "display_name",
    "finish",
    "fmt_shape",
    "is_count",
    "pick",
    "quote",
    "result_itemsize",
    "short",
    "stem",
    "tensor_shape",
    "torch_dtype_name",
]

# More tensors than this in one file are refused rather than listed.
MAX_TENSORS = 100_000
MAX_DIMS = 64  # numpy's limit
# Magnitudes from 2**24 up may not survive the conversion of integers to float32 exactly.
_FLOAT32_EXACT_INT = 2**24
# Where a loaded tensor must start: a cache line (torch's CPU allocator gives at least this).
_ALIGNMENT = 64


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
                raise ValueError(f"Limits.{field_name} must be a positive int, got {brief(value)}")


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
        return f"{self.name} {fmt_shape(self.shape)} {self.dtype}"


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


def display_name(filename: str) -> str:
    name = PurePath(filename).name or filename
    return repr(name[:80]) if len(name) > 80 or not name.isprintable() else name


def stem(filename: str) -> str:
    return PurePath(filename).stem or "tensor"


_T = TypeVar("_T")


def pick(items: Iterable[_T], name: str | None, filename: str, key: Callable[[_T], str]) -> _T:
    items = list(items)
    if not items:
        raise LoadError(f"{display_name(filename)} holds no tensors")
    if name is None:
        return items[0]
    for item in items:
        if key(item) == name:
            return item
    names = [key(item) for item in items]
    shown = ", ".join(brief(n) for n in names[:5]) + (
        f", … ({len(names)} in all)" if len(names) > 5 else ""
    )
    raise LoadError(f"{display_name(filename)} has no tensor named {brief(name)}; it holds {shown}")


def check_only_name(name: str | None, only: str, filename: str) -> None:
    if name is not None and name != only:
        raise LoadError(
            f"{display_name(filename)} holds one tensor, {brief(only)}; "
            f"there is no tensor named {brief(name)}"
        )


def fmt_shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def check_size(name: str, shape: tuple[int, ...], itemsize: int, limits: Limits) -> None:
    """Refuse a tensor over ``limits``; called before its memory is allocated."""
    numel = math.prod(shape)
    if numel > limits.max_elements:
        raise LoadError(
            f"tensor '{name}' has {numel:,} elements (shape {fmt_shape(shape)}); "
            f"the limit is {limits.max_elements:,} elements"
        )
    nbytes = numel * itemsize
    if nbytes > limits.max_bytes:
        raise LoadError(
            f"tensor '{name}' needs {nbytes:,} bytes in memory (shape {fmt_shape(shape)}); "
            f"the limit is {limits.max_bytes:,} bytes"
        )


_KEPT_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def result_itemsize(dtype: torch.dtype) -> int:
    """Bytes per element of the loaded result (and of the source, if larger)."""
    return dtype.itemsize if dtype in _KEPT_FLOATS else max(dtype.itemsize, 4)


def torch_dtype_name(dtype: torch.dtype) -> str:
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
            f"is a PyTorch quantized tensor ({torch_dtype_name(tensor.dtype)}); those are not "
            "loaded (save it with .dequantize())"
        )
    if tensor.device.type != "cpu":
        return f"has no data here (device '{tensor.device.type}')"
    return None


def tensor_shape(tensor: torch.Tensor) -> tuple[int, ...]:
    """The shape for a listing; () for a tensor without one (nested tensors)."""
    try:
        return tuple(int(d) for d in tensor.shape)
    except Exception:  # nested tensors have no single shape
        return ()


def finish(tensor: torch.Tensor, name: str, source_dtype: str, limits: Limits) -> LoadedTensor:
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
            f"tensor '{name}' is complex ({torch_dtype_name(dtype)}); only real numbers "
            "can be quantized here (save its .real or .imag part)"
        )
    check_size(name, shape, result_itemsize(dtype), limits)
    if math.prod(shape) == 0:
        raise LoadError(f"tensor '{name}' is empty (shape {fmt_shape(shape)}); nothing to show")
    notes: list[str] = []
    try:
        tensor = tensor.detach()
        if dtype in _KEPT_FLOATS:
            if dtype != torch.float32:
                notes.append(f"Stored as {torch_dtype_name(dtype)}; kept as it is.")
        elif dtype.is_floating_point:
            tensor = tensor.to(torch.float32)
            notes.append(f"{torch_dtype_name(dtype)} values converted to float32.")
        elif dtype == torch.bool:
            tensor = tensor.to(torch.float32)
            notes.append("bool values converted to float32 (False → 0, True → 1).")
        else:
            tensor = tensor.to(torch.float32)
            note = f"{torch_dtype_name(dtype)} values converted to float32."
            if bool((tensor.abs() >= _FLOAT32_EXACT_INT).any()):
                note += f" Some magnitudes reach 2^24 = {_FLOAT32_EXACT_INT:,}; may be rounded."
            notes.append(note)
        tensor = tensor.contiguous()
        if tensor.data_ptr() % _ALIGNMENT:
            # A view into a file's mapping starts wherever the header ended (MiniLM's word
            # embeddings: 24 bytes past a cache line). Vector loads then straddle cache
            # lines, and every rerun's passes over it pay: the explorer's quantize and
            # metrics of those embeddings took 74 ms on the view, 54 ms on a copy.
            tensor = tensor.clone()
        if type(tensor) is not torch.Tensor:  # nn.Parameter
            tensor = tensor.as_subclass(torch.Tensor)
    except Exception as err:  # dtypes torch cannot convert (bits8, uint4, ...)
        raise LoadError(
            f"tensor '{name}' ({torch_dtype_name(dtype)}) could not be converted to a float "
            f"tensor: {short(err)}"
        ) from err
    return LoadedTensor(tensor, name, source_dtype, tuple(notes))


def short(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_count(value: object) -> bool:
    """A size or offset: a non-negative integer below ``2^64`` (a ``usize``, as the
    safetensors library parses it); larger ones multiplied into counts too long to print
    (over 4,300 digits), a ``ValueError`` instead of a ``LoadError``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64


def count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def brief(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: names and values from files can be huge."""
    text = repr(value) if not isinstance(value, list | tuple) or len(value) < 20 else "[…]"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(text: str, limit: int = 40) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return repr(shown) if not shown.isprintable() else f"'{shown}'"
