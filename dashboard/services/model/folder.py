"""A model folder on this machine: a Hugging Face snapshot's shards and index, and the
tensors their headers list (nothing else is read here; ``streaming`` reads the data).

A folder is one of (``open_checkpoint``; a path to one ``.safetensors`` file or to the
index works too):

1. ``model.safetensors``: one file (taken first, as ``transformers`` does);
2. ``model.safetensors.index.json`` with ``{"weight_map": {tensor name: shard file}}`` and
   the shards it names, ``model-00001-of-00003.safetensors``...: every named shard must be
   in the folder, every tensor the index maps to a shard must be in that shard's header,
   every tensor a shard holds must be mapped to it, and a file of the same ``-of-N``
   series that the index never names must hold no tensors (other files are ignored, with
   a note: a snapshot may hold ``consolidated.safetensors`` beside the shards);
3. a folder with exactly one ``.safetensors`` file, whatever its name.

Every file passes ``roots.check_inside``, is opened only if it is a regular file (a named
pipe or a device named like a shard would block the reader: ``io.regular``) and passes
``io``'s ``.safetensors`` header checks
(JSON, dtypes, byte ranges tiling the data, at most ``MAX_TENSORS`` entries) before its
tensors are listed. Sizes are not limited here: ``streaming`` decides per tensor.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from ..display.counts import counted
from ..io import LoadError, TensorInfo, list_safetensors_file
from ..io.regular import file_kind, open_regular, read_at_most
from ..io.safetensors_format import natural_key
from .checkpoint import (
    INDEX_NAME,
    SINGLE_NAME,
    Checkpoint,
    CheckpointError,
    CheckpointTensor,
    Shard,
)
from .roots import ModelRoots, PathRefused, check_inside, resolve_in_roots

__all__ = ["MAX_INDEX_BYTES", "MAX_SHARDS", "find_checkpoints", "open_checkpoint", "snapshot_key"]

# A 405B-parameter model's index is about 100 KB and names 191 shards.
MAX_INDEX_BYTES = 64 * 2**20
MAX_SHARDS = 10_000
_SERIES = re.compile(r"^(?P<stem>.+)-(?P<i>\d+)-of-(?P<n>\d+)\.safetensors$")
_SHOWN = 3  # names quoted in a message before "… (N in all)"


def snapshot_key(path: str | os.PathLike[str], roots: ModelRoots) -> str:
    """A cheap key of what ``open_checkpoint(path, roots)`` would read: the roots, the
    resolved path and the size and modification time of its ``.safetensors`` files and
    index (a directory listing and ``stat`` calls; no file is opened). ``PathRefused``
    outside the roots; a path that does not exist gives a key too (opening then says
    what is wrong)."""
    target = resolve_in_roots(path, roots)
    files = [target] if target.is_file() else []
    if target.is_dir():
        try:
            files = [
                p
                for p in itertools.islice(target.iterdir(), MAX_SHARDS * 2)
                if p.suffix.lower() == ".safetensors" or p.name == INDEX_NAME
            ]
        except OSError:
            files = []
    stats = []
    for p in sorted(files):
        try:
            st = p.stat()
        except OSError:
            continue
        stats.append(f"{p.name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join([roots.key(), str(target), *stats])


def open_checkpoint(path: str | os.PathLike[str], roots: ModelRoots) -> Checkpoint:
    """Read and cross-check the headers of the model at ``path`` (a folder, or one
    ``.safetensors`` file or the index inside one), which must be inside ``roots``.

    Raises ``PathRefused`` outside the roots and ``CheckpointError`` (a ``LoadError``,
    hence a ``ValueError``) with the problem in plain words: not a folder, no weights, a
    broken index, a missing shard, a tensor mapped to a file that does not hold it, a
    tensor no index lists, or a shard whose header ``io`` refuses."""
    target = resolve_in_roots(path, roots)
    if not target.exists():
        raise CheckpointError(f"{target} does not exist")
    if target.is_file():
        if target.name == INDEX_NAME:
            return _from_index(target.parent, roots)
        if target.suffix.lower() != ".safetensors":
            raise CheckpointError(
                f"{target} is a file but neither a .safetensors file nor {INDEX_NAME}; give "
                "the model's folder"
            )
        return _single(target.parent, target.name, roots, ())
    if not target.is_dir():
        try:
            kind = file_kind(target.stat().st_mode)
        except OSError:
            kind = "gone"
        raise CheckpointError(f"{target} is {kind}, not a folder or a file")
    names = _safetensors_names(target)
    has_index = (target / INDEX_NAME).exists()  # not a regular file: refused when read
    if SINGLE_NAME in names:
        notes = (f"{INDEX_NAME} is ignored: {SINGLE_NAME} is used",) if has_index else ()
        return _single(target, SINGLE_NAME, roots, notes)
    if has_index:
        return _from_index(target, roots)
    series = [n for n in names if _SERIES.match(n)]
    if series:
        raise CheckpointError(
            f"{target} holds {len(series)} shard files ({_names(series)}) but no "
            f"{INDEX_NAME} to say which tensor is in which"
        )
    if len(names) == 1:
        return _single(target, names[0], roots, ())
    if names:
        raise CheckpointError(
            f"{target} holds {len(names)} .safetensors files ({_names(names)}) and no "
            f"{SINGLE_NAME} or {INDEX_NAME}: which is the model? Give the file's path"
        )
    raise CheckpointError(f"{target} holds no .safetensors file (and no {INDEX_NAME})")


def _single(folder: Path, name: str, roots: ModelRoots, notes: tuple[str, ...]) -> Checkpoint:
    shard, infos = _read_shard(folder, name, roots)
    tensors = tuple(CheckpointTensor(info, name) for info in infos)
    return Checkpoint(folder, (shard,), tensors, None, notes)


def _from_index(folder: Path, roots: ModelRoots) -> Checkpoint:
    weight_map = _read_index(folder / INDEX_NAME, roots)
    by_shard: dict[str, list[str]] = {}
    for tensor, shard in weight_map.items():
        by_shard.setdefault(shard, []).append(tensor)
    if len(by_shard) > MAX_SHARDS:
        raise CheckpointError(
            f"{INDEX_NAME} names {len(by_shard):,} shards; the limit is {MAX_SHARDS:,}"
        )
    # A shard that is there but not a regular file (a named pipe) is refused when read.
    missing = [s for s in sorted(by_shard, key=natural_key) if not (folder / s).exists()]
    if missing:
        raise CheckpointError(
            f"{INDEX_NAME} names {counted(len(missing), 'shard file')} that {folder} does "
            "not hold: "
            + "; ".join(
                f"{s} (for {counted(len(by_shard[s]), 'tensor')}, e.g. {by_shard[s][0]!r})"
                for s in missing[:_SHOWN]
            )
            + ("" if len(missing) <= _SHOWN else f"; … ({len(missing)} in all)")
        )
    shards: list[Shard] = []
    tensors: list[CheckpointTensor] = []
    for name in sorted(by_shard, key=natural_key):
        shard, infos = _read_shard(folder, name, roots)
        held = {info.name for info in infos}
        absent = [t for t in by_shard[name] if t not in held]
        if absent:
            raise CheckpointError(
                f"{INDEX_NAME} maps {counted(len(absent), 'tensor')} to {name}, which does not "
                f"hold {'it' if len(absent) == 1 else 'them'}: {_names(absent)}"
            )
        elsewhere = [i.name for i in infos if weight_map.get(i.name) != name]
        if elsewhere:
            raise CheckpointError(
                f"{name} holds {counted(len(elsewhere), 'tensor')} that {INDEX_NAME} does "
                "not map to it: "
                + ", ".join(_where(t, weight_map) for t in elsewhere[:_SHOWN])
                + ("" if len(elsewhere) <= _SHOWN else f", … ({len(elsewhere)} in all)")
            )
        shards.append(shard)
        tensors += (CheckpointTensor(info, name) for info in infos)
    notes = []
    for name in _safetensors_names(folder):
        if name in by_shard:
            continue
        match = _SERIES.match(name)
        if match and any(_same_series(match, s) for s in by_shard):
            _, infos = _read_shard(folder, name, roots)
            if infos:
                raise CheckpointError(
                    f"{name} holds {len(infos)} tensor(s) that no index lists "
                    f"({_names([i.name for i in infos])}): {INDEX_NAME} never names this shard"
                )
        notes.append(f"{name} is not named by {INDEX_NAME}; ignored")
    return Checkpoint(folder, tuple(shards), tuple(tensors), INDEX_NAME, tuple(notes))


def _read_index(path: Path, roots: ModelRoots) -> dict[str, str]:
    """The index's ``weight_map``, checked: text names mapped to plain file names."""
    check_inside(path, roots)
    try:
        with open_regular(path, INDEX_NAME) as file:
            # One byte more than the limit: a file that grew since its size was read.
            raw = b"" if file.size > MAX_INDEX_BYTES else read_at_most(file.fd, MAX_INDEX_BYTES + 1)
            size = max(file.size, len(raw))
    except LoadError as err:
        raise CheckpointError(str(err)) from err
    except OSError as err:
        raise CheckpointError(f"cannot read {INDEX_NAME}: {err.strerror or err}") from err
    if size > MAX_INDEX_BYTES:
        raise CheckpointError(
            f"{INDEX_NAME} is {size:,} bytes, over the {MAX_INDEX_BYTES:,}-byte limit for an index"
        )
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise CheckpointError(f"{INDEX_NAME} is not valid JSON ({str(err)[:120]})") from err
    weight_map = parsed.get("weight_map") if isinstance(parsed, dict) else None
    if not isinstance(weight_map, dict):
        raise CheckpointError(
            f'{INDEX_NAME} has no "weight_map" object (tensor name -> shard file)'
        )
    if not weight_map:
        raise CheckpointError(f'{INDEX_NAME}: "weight_map" lists no tensors')
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise CheckpointError(
                f"{INDEX_NAME} maps {_brief(tensor)} to {_brief(shard)}; a shard file name "
                "was expected"
            )
        if Path(shard).name != shard or shard in (".", "..") or "\\" in shard or "\0" in shard:
            raise CheckpointError(
                f"{INDEX_NAME} maps {_brief(tensor)} to {_brief(shard)}, which is not a file "
                "name in the model's folder (shards must sit beside the index)"
            )
        if not shard.endswith(".safetensors"):
            raise CheckpointError(
                f"{INDEX_NAME} maps {_brief(tensor)} to {_brief(shard)}, which is not a "
                ".safetensors file"
            )
    return weight_map


def _read_shard(folder: Path, name: str, roots: ModelRoots) -> tuple[Shard, tuple[TensorInfo, ...]]:
    path = folder / name
    check_inside(path, roots)
    try:
        infos = list_safetensors_file(path)  # the io reader's header checks
        stat = path.stat()
    except PathRefused:
        raise
    except LoadError as err:
        raise CheckpointError(str(err)) from err
    except OSError as err:
        raise CheckpointError(f"cannot read {name}: {err.strerror or err}") from err
    return Shard(name, stat.st_size, stat.st_mtime_ns, len(infos)), infos


def _safetensors_names(folder: Path) -> list[str]:
    try:
        entries = [
            p.name
            for p in itertools.islice(folder.iterdir(), MAX_SHARDS * 2)
            if p.suffix.lower() == ".safetensors"
        ]
    except OSError as err:
        raise CheckpointError(f"cannot list {folder}: {err.strerror or err}") from err
    return sorted(entries, key=natural_key)


def _same_series(match: re.Match[str], other: str) -> bool:
    theirs = _SERIES.match(other)
    return theirs is not None and (theirs["stem"], theirs["n"]) == (match["stem"], match["n"])


def _where(tensor: str, weight_map: dict[str, str]) -> str:
    shard = weight_map.get(tensor)
    where = "in no index entry" if shard is None else f"mapped to {shard}"
    return f"{_brief(tensor)} ({where})"


def _brief(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(n if n.endswith(".safetensors") else _brief(n) for n in names[:_SHOWN])
    return shown + ("" if len(names) <= _SHOWN else f", … ({len(names)} in all)")


def find_checkpoints(
    roots: ModelRoots, max_depth: int = 4, max_folders: int = 2000, max_found: int = 50
) -> tuple[Path, ...]:
    """Folders under ``roots`` (at most ``max_depth`` levels down, visiting at most
    ``max_folders`` folders and 10,000 entries of each) that hold ``model.safetensors``,
    the index or ``.gguf`` files, breadth first, at most ``max_found``: the choices a picker offers.
    Hidden folders are skipped; links are followed only when they stay inside a root."""
    found: list[Path] = []
    visited = 0
    queue = [(root, 0) for root in roots.roots]
    seen: set[Path] = set()
    while queue and visited < max_folders and len(found) < max_found:
        folder, depth = queue.pop(0)
        try:
            resolved = folder.resolve()
        except (OSError, RuntimeError):
            continue
        if resolved in seen or not roots.contains(resolved):
            continue
        seen.add(resolved)
        visited += 1
        try:
            children = sorted(
                itertools.islice(folder.iterdir(), 10_000), key=lambda p: natural_key(p.name)
            )
        except OSError:
            continue
        names = {c.name for c in children}
        # a folder of .gguf files opens as its GGUF model (quant_core.files)
        if SINGLE_NAME in names or INDEX_NAME in names or any(n.endswith(".gguf") for n in names):
            found.append(resolved)
        if depth < max_depth:
            queue += [(c, depth + 1) for c in children if not c.name.startswith(".") and _is_dir(c)]
    return tuple(found)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False
