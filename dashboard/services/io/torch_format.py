"""``.pt`` / ``.pth``: a tensor, or a dict / list of tensors (nested containers flattened to
dotted names such as ``encoder.layers.0.weight``), read only with
``torch.load(..., weights_only=True)``; anything that would run code is refused.
"""

from __future__ import annotations

import io
import pickle
import pickletools
import re
import zipfile

import torch

from .common import (
    MAX_TENSORS,
    Limits,
    LoadedTensor,
    LoadError,
    TensorInfo,
    display_name,
    finish,
    pick,
    short,
    stem,
    tensor_shape,
    torch_dtype_name,
)

__all__ = ["list_bytes", "load_bytes"]

# Deeper nesting than this in a .pt file is refused rather than walked.
_MAX_NESTING = 100


def list_bytes(raw: bytes, filename: str, limits: Limits) -> tuple[TensorInfo, ...]:
    """Every tensor of the file (it is one pickle: loading is listing)."""
    return tuple(
        TensorInfo(name, tensor_shape(t), torch_dtype_name(t.dtype))
        for name, t in _load_pt(raw, filename, limits)
    )


def load_bytes(raw: bytes, filename: str, name: str | None, limits: Limits) -> LoadedTensor:
    tensor_name, tensor = pick(_load_pt(raw, filename, limits), name, filename, key=_first)
    return finish(tensor, tensor_name, torch_dtype_name(tensor.dtype), limits)


def _first(item: tuple[str, torch.Tensor]) -> str:
    return item[0]


_PICKLE_GLOBAL = re.compile(r"GLOBAL ([\w.]+)", re.IGNORECASE)
_UNPICKLER_DETAIL = re.compile(
    r"WeightsUnpickler error:(.*?)(Check the documentation|$)", re.DOTALL
)


def _load_pt(raw: bytes, filename: str, limits: Limits) -> list[tuple[str, torch.Tensor]]:
    """Unpickle with ``weights_only=True`` and flatten to ``(dotted name, tensor)`` pairs."""
    shown = display_name(filename)
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
            f"{shown} is corrupt: its zip archive cannot be read ({short(err)})"
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
        raise LoadError(f"{shown} is corrupt or not a PyTorch tensor file: {short(err)}") from err
    return _flatten(obj, stem(filename), shown)


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
        return _code_refusal(shown, short(found.group(1).rstrip("."), 80))
    detail = _UNPICKLER_DETAIL.search(text)
    return (
        f"{shown} is corrupt or not a plain tensor file; the safe loader refused it"
        f" ({short(detail.group(1) if detail and detail.group(1).strip() else text, 160)})"
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
        return _code_refusal(shown, short(suspect, 80))
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
            if len(found) >= MAX_TENSORS:
                raise LoadError(f"{shown} holds more than {MAX_TENSORS:,} tensors")
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
