"""A Hugging Face folder of ``.safetensors`` shards (quantized or not), or one such file:
its tensors from the headers, grouped into the weights their packed parts store.

Which files (as ``transformers`` takes them): ``model.safetensors`` if present, else the
shards ``model.safetensors.index.json`` maps tensors to (each must be in the folder and
hold exactly the tensors mapped to it), else the folder's only ``.safetensors`` file. The
quantization settings come from ``hf_config``; the layouts from ``hf_layouts``. A file
with the explorer's export metadata is one quantized tensor (``lab_export``).

Listing reads the headers and, per bitsandbytes weight, its quant state (a JSON object of
about 200 bytes stored as a tensor), per compressed-tensors weight its ``weight_shape``
(two integers): what the weight's shape and type are made of.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path

import torch

from .access import (
    Blob,
    Location,
    PathGuard,
    QuantizedFileError,
    locate,
    read_json,
    reopen,
)
from .entries import FileKind, StoredTensor, TensorEntry
from .hf_config import KIND_OF, QuantSpec, read_spec
from .hf_layouts import Layer, decode_layer, find_layers, layer_entry, plain_entry, plain_tensor
from .lab_export import is_lab_export, read_lab_export
from .safetensors_header import STEntry, STHeader, read_header, read_tensor

__all__ = [
    "INDEX_NAME",
    "MAX_INDEX_BYTES",
    "SINGLE_NAME",
    "SafetensorsSource",
    "natural_key",
    "open_folder",
]

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
MAX_INDEX_BYTES = 64 * 2**20
MAX_SHARDS = 10_000


class SafetensorsSource:
    """The weights of some ``.safetensors`` files: ``entries``, the folder's ``kind`` and
    ``spec``, and ``load``."""

    def __init__(
        self,
        shards: Mapping[str, Location],
        headers: Mapping[str, STHeader],
        spec: QuantSpec | None,
        guard: PathGuard,
        max_elements: int,
    ):
        self.shards = dict(shards)
        self.headers = dict(headers)
        self.spec = spec
        self.guard = guard
        self.max_elements = max_elements
        self._where: dict[str, tuple[str, STEntry]] = {}
        for shard, header in headers.items():
            for name, e in header.entries.items():
                if name in self._where:
                    raise QuantizedFileError(
                        f"{shard}: tensor {name!r} is also in {self._where[name][0]}"
                    )
                self._where[name] = (shard, e)
        self.metadata: dict[str, str] = {}
        if len(headers) == 1:
            self.metadata = dict(next(iter(headers.values())).metadata)
        self.export = len(headers) == 1 and is_lab_export(next(iter(headers.values())))
        self._layers: dict[str, tuple[Layer, object]] = {}
        entries: list[TensorEntry] = []
        if self.export:
            entries.append(self._export_entry())
            self.kind = FileKind.LAB_EXPORT
        else:
            layers, plain = find_layers(set(self._where))
            layouts = set()
            with ExitStack() as stack:
                blobs: dict[str, Blob] = {}

                def read_small(name: str) -> torch.Tensor:
                    shard, e = self._where[name]
                    if shard not in blobs:
                        blobs[shard] = stack.enter_context(reopen(self.shards[shard], guard))
                    return read_tensor(blobs[shard], e)

                shard_of = {n: s for n, (s, _) in self._where.items()}
                for layer in layers:
                    parts = {n: self._where[n][1] for n in layer.parts.values()}
                    # the shard(s) holding this weight's parts, not "2 shards"
                    held = sorted({shard_of[n] for n in parts}, key=natural_key)
                    entry, geo = layer_entry(
                        layer, spec, parts, shard_of, read_small, " and ".join(held)
                    )
                    if entry.name in plain or entry.name in self._layers:
                        raise QuantizedFileError(
                            f"{entry.file}: weight {entry.name!r} is stored both packed and "
                            "as a plain tensor"
                        )
                    layouts.add(geo.extra["layout"])  # type: ignore[attr-defined]
                    self._layers[entry.name] = (layer, geo)
                    entries.append(entry)
            for name in plain:
                shard, e = self._where[name]
                entries.append(plain_entry(e, shard))
            self.kind = _kind(spec, layouts, _shown(shards))
        self.entries = tuple(sorted(entries, key=lambda e: natural_key(e.name)))

    def _export_entry(self) -> TensorEntry:
        from .lab_export import export_config, export_name

        shard, header = next(iter(self.headers.items()))
        cfg, shape = export_config(header.metadata, shard)
        nbytes = sum(e.nbytes for e in header.entries.values())
        return TensorEntry(
            # the tensor's own name when the export records it: matched with the original
            export_name(header.metadata, Path(shard).name),
            cfg.name,
            shape,
            nbytes,
            shard,
            True,
            parts=tuple(header.entries),
        )

    def load(self, entry: TensorEntry) -> StoredTensor:
        if self.export:
            ((shard, header),) = self.headers.items()
            with reopen(self.shards[shard], self.guard) as blob:
                qt = read_lab_export(blob, header, self.max_elements)
            return StoredTensor(entry, qt)
        if entry.name not in self._layers:
            shard, e = self._where[entry.name]
            with reopen(self.shards[shard], self.guard) as blob:
                return plain_tensor(entry, read_tensor(blob, e))
        layer, geo = self._layers[entry.name]
        tensors: dict[str, torch.Tensor] = {}
        with ExitStack() as stack:
            blobs: dict[str, Blob] = {}
            for role, name in layer.parts.items():
                shard, e = self._where[name]
                if shard not in blobs:
                    blobs[shard] = stack.enter_context(reopen(self.shards[shard], self.guard))
                tensors[role] = read_tensor(blobs[shard], e)
        return decode_layer(entry, geo, tensors, entry.file)  # type: ignore[arg-type]


def _shown(shards: Mapping[str, Location]) -> str:
    return next(iter(shards)) if len(shards) == 1 else f"{len(shards)} shards"


def _kind(spec: QuantSpec | None, layouts: set[object], shown: str) -> FileKind:
    if spec is not None:
        return KIND_OF[type(spec)]
    if len(layouts) > 1:
        names = ", ".join(sorted(k.value for k in layouts))  # type: ignore[attr-defined]
        raise QuantizedFileError(f"{shown} mixes packed layouts ({names}); one is expected")
    return layouts.pop() if layouts else FileKind.SAFETENSORS  # type: ignore[return-value]


def natural_key(name: str) -> list[tuple[int, int, str]]:
    """``layers.2`` before ``layers.10``: digit runs compared by length, then text, not
    by ``int`` (a name of over 4,300 digits made ``int`` raise a ``ValueError`` naming no
    file). The order tensors, shards and folders are listed in, here and in the
    dashboard."""
    import re

    key = []
    for part in re.split(r"(\d+)", name):
        if part.isdecimal():
            digits = part.lstrip("0")
            key.append((0, len(digits), digits))
        else:
            key.append((1, 0, part))
    return key


def _read_index(path: Path, guard: PathGuard) -> dict[str, str]:
    parsed = read_json(path, guard, MAX_INDEX_BYTES)
    weight_map = parsed.get("weight_map") if isinstance(parsed, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise QuantizedFileError(f'{INDEX_NAME} has no "weight_map" (tensor name -> shard file)')
    for tensor, shard in weight_map.items():
        if (
            not isinstance(shard, str)
            or Path(shard).name != shard
            or shard in (".", "..")
            or not shard.endswith(".safetensors")
        ):
            raise QuantizedFileError(
                f"{INDEX_NAME} maps {tensor!r} to {str(shard)[:80]!r}, which is not a "
                ".safetensors file beside the index"
            )
    return weight_map


def open_folder(
    target: Path, guard: PathGuard, max_elements: int
) -> tuple[SafetensorsSource, tuple[str, ...]]:
    """The safetensors weights at ``target`` (a folder, one ``.safetensors`` file, or the
    index), and notes on which files were taken."""
    if target.is_file():
        folder = target.parent
        if target.name == INDEX_NAME:
            names, notes, weight_map = _from_index(folder, guard)
        else:
            names, notes, weight_map = [target.name], (), None
    else:
        folder = target
        names, notes, weight_map = _pick(folder, guard)
    spec = read_spec(folder, guard)
    shards: dict[str, Location] = {}
    headers: dict[str, STHeader] = {}
    for name in names:
        location = locate(folder / name, guard)
        with reopen(location, guard) as blob:
            headers[name] = read_header(blob)
        shards[name] = location
    if weight_map is not None:
        _check_index(weight_map, headers)
    return SafetensorsSource(shards, headers, spec, guard, max_elements), notes


def _pick(folder: Path, guard: PathGuard) -> tuple[list[str], tuple[str, ...], dict | None]:
    try:
        listed = itertools.islice(folder.iterdir(), 2 * MAX_SHARDS)
        names = sorted(p.name for p in listed if p.suffix.lower() == ".safetensors")
    except OSError as err:
        raise QuantizedFileError(f"cannot list {folder.name}: {err.strerror or err}") from err
    if SINGLE_NAME in names:
        return [SINGLE_NAME], (), None
    if guard.check(folder / INDEX_NAME).is_file():
        return _from_index(folder, guard)
    if len(names) == 1:
        return names, (), None
    if names:
        raise QuantizedFileError(
            f"{folder.name} holds {len(names)} .safetensors files and no {SINGLE_NAME} or "
            f"{INDEX_NAME}: which is the model? Give the file's path"
        )
    raise QuantizedFileError(f"{folder.name} holds no .safetensors or .gguf file")


def _from_index(folder: Path, guard: PathGuard) -> tuple[list[str], tuple[str, ...], dict]:
    weight_map = _read_index(folder / INDEX_NAME, guard)
    names = sorted(set(weight_map.values()), key=natural_key)
    if len(names) > MAX_SHARDS:
        raise QuantizedFileError(
            f"{INDEX_NAME} names {len(names):,} shards; the limit is {MAX_SHARDS:,}"
        )
    missing = [n for n in names if not guard.check(folder / n).is_file()]
    if missing:
        raise QuantizedFileError(
            f"{INDEX_NAME} names {len(missing)} shard file{'' if len(missing) == 1 else 's'} "
            f"that {folder.name} does not hold: {', '.join(missing[:3])}"
        )
    listed = f"{len(names)} shard{'' if len(names) == 1 else 's'}"  # not "1 shards"
    return names, (f"{listed} listed by {INDEX_NAME}",), weight_map


def _check_index(weight_map: Mapping[str, str], headers: Mapping[str, STHeader]) -> None:
    for shard, header in headers.items():
        for name in header.entries:
            if weight_map.get(name) != shard:
                raise QuantizedFileError(
                    f"{shard} holds tensor {name!r}, which {INDEX_NAME} maps to "
                    f"{weight_map.get(name, 'no shard')}"
                )
    for name, shard in weight_map.items():
        if name not in headers[shard].entries:
            raise QuantizedFileError(
                f"{INDEX_NAME} maps tensor {name!r} to {shard}, which does not hold it"
            )
