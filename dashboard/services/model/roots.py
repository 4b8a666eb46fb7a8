"""Which folders of this machine the whole-model page may read: the setting, and the check
every path passes before anything is opened.

Off by default: a path box on a shared server would expose the server's files. The setting
names the allowed root folders, in the environment variable ``QLAB_MODEL_ROOTS``
(``os.pathsep``-separated: ``:`` on Linux) and/or as ``model_roots = ["/models", ...]`` in
``.streamlit/secrets.toml``; both count when both are set.

A path is used only when it lies inside a root once symlinks and ``..`` are resolved
(``resolve_in_roots``). Every file read later is checked the same way (``check_inside``):
a Hugging Face snapshot's files are often links into a ``blobs`` folder, which must then
be inside a root too. The check is made on the resolved path before any test of
existence, so a refused path tells nothing about what lies outside the roots.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..io import LoadError

__all__ = [
    "ROOTS_ENV",
    "ROOTS_SECRET",
    "ModelRoots",
    "PathRefused",
    "check_inside",
    "parse_roots",
    "resolve_in_roots",
]

ROOTS_ENV = "QLAB_MODEL_ROOTS"
ROOTS_SECRET = "model_roots"


class PathRefused(LoadError):
    """A path outside the allowed roots, or the folder source is off; ``str(err)`` is the
    message to show (a ``LoadError``, hence a ``ValueError``)."""


@dataclass(frozen=True)
class ModelRoots:
    """The allowed root folders, resolved (symlinks followed), in the order given;
    ``problems``: one sentence per entry of the setting that was left out."""

    roots: tuple[Path, ...] = ()
    problems: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for root in self.roots:
            if not isinstance(root, Path) or not root.is_absolute():
                raise ValueError(f"ModelRoots.roots must be absolute paths, got {root!r}")

    @property
    def enabled(self) -> bool:
        """Whether the folder source is on (at least one usable root)."""
        return bool(self.roots)

    def contains(self, resolved: Path) -> bool:
        """Whether the already resolved path ``resolved`` is a root or lies below one."""
        return any(resolved.is_relative_to(root) for root in self.roots)

    def describe(self) -> str:
        """The roots as the messages name them: ``"/data/models, /scratch"``."""
        return ", ".join(str(r) for r in self.roots) or "none"

    def key(self) -> str:
        """A cache key of the roots."""
        return os.pathsep.join(str(r) for r in self.roots)


def parse_roots(env_value: str | None, secret_value: object = None) -> ModelRoots:
    """The roots named by ``QLAB_MODEL_ROOTS`` (``env_value``, ``os.pathsep``-separated)
    and by the secret ``model_roots`` (``secret_value``: a list of folder paths, or one).

    An entry must be an absolute path (``~`` expanded) to an existing folder; others are
    left out with a sentence in ``problems``. Empty and absent settings give no roots
    (``enabled`` is false)."""
    if env_value is not None and not isinstance(env_value, str):
        raise TypeError(f"env_value must be a str or None, got {type(env_value).__name__}")
    entries: list[tuple[str, object]] = []
    if env_value is not None:
        entries += [(ROOTS_ENV, part) for part in env_value.split(os.pathsep) if part.strip()]
    problems: list[str] = []
    if isinstance(secret_value, str):
        secret_value = [secret_value]
    if secret_value is not None:
        if isinstance(secret_value, Sequence) and not isinstance(secret_value, bytes):
            entries += [(ROOTS_SECRET, part) for part in secret_value]
        else:
            problems.append(
                f"secrets {ROOTS_SECRET} must be a list of folder paths, got "
                f"{type(secret_value).__name__}; ignored"
            )
    roots: list[Path] = []
    for where, entry in entries:
        if not isinstance(entry, str) or not entry.strip() or "\0" in entry:
            problems.append(f"{where}: {entry!r} is not a folder path; ignored")
            continue
        path = Path(entry.strip()).expanduser()
        if not path.is_absolute():
            problems.append(f"{where}: {entry!r} is not an absolute path; ignored")
            continue
        resolved = _resolve(path)
        if resolved is None or not resolved.is_dir():
            problems.append(f"{where}: {entry!r} is not an existing folder; ignored")
            continue
        if resolved not in roots:
            roots.append(resolved)
    return ModelRoots(tuple(roots), tuple(problems))


def resolve_in_roots(path: str | os.PathLike[str], roots: ModelRoots) -> Path:
    """``path`` with ``~``, symlinks and ``..`` resolved, if it lies inside one of ``roots``.

    Raises ``PathRefused`` naming the path and the roots when the source is off, the path
    is empty or relative, or it resolves outside every root."""
    if not isinstance(roots, ModelRoots):
        raise TypeError(f"roots must be ModelRoots, got {type(roots).__name__}")
    if not roots.enabled:
        raise PathRefused(
            f"model folders are off on this server: set {ROOTS_ENV} (or {ROOTS_SECRET} in "
            ".streamlit/secrets.toml) to the folders that may be read"
        )
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or a path, got {type(path).__name__}")
    text = os.fspath(path).strip()
    if not text:
        raise PathRefused("no folder given")
    if "\0" in text:
        raise PathRefused(f"{text!r} is not a path (it holds a NUL character)")
    given = Path(text).expanduser()
    if not given.is_absolute():
        raise PathRefused(
            f"{text!r} is not an absolute path; give the full path, inside {roots.describe()}"
        )
    resolved = _resolve(given)
    if resolved is None or not roots.contains(resolved):
        # Where a link leads outside is never said (it would reveal the server's files):
        # only which link inside a root leads out, a path the user could see anyway.
        link = _link_out(Path(os.path.normpath(given)), roots)
        via = f" ({link} is a link that leads out of them)" if link is not None else ""
        raise PathRefused(
            f"{text} is outside the allowed folders{via}; allowed: {roots.describe()}"
        )
    return resolved


def check_inside(path: Path, roots: ModelRoots) -> Path:
    """``path`` (a file of a model folder already inside a root) resolved, if where it
    leads is inside a root too; otherwise ``PathRefused`` naming the link, not where it
    leads (which would reveal the server's files)."""
    resolved = _resolve(path)
    if resolved is None:
        raise PathRefused(f"{path.name} is a broken or looping link")
    if not roots.contains(resolved):
        raise PathRefused(
            f"{path.name} is a link that leads outside the allowed folders "
            f"({roots.describe()}); add the folder it links into to {ROOTS_ENV}"
        )
    return resolved


def _link_out(written: Path, roots: ModelRoots) -> Path | None:
    """The first link along ``written`` (an absolute path, ``..`` already removed) that
    lies inside a root but leads out of every root, once resolved (possibly through
    further links); ``None`` when ``written`` does not start inside a root."""
    parts = written.parts
    for i in range(1, len(parts) + 1):
        prefix = Path(*parts[:i])
        if not roots.contains(prefix):
            continue  # above the roots, as written
        resolved = _resolve(prefix)
        if resolved is None or not roots.contains(resolved):
            return prefix
    return None


def _resolve(path: Path) -> Path | None:
    """``path.resolve()``, or ``None`` for a symlink loop or an unusable path."""
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError):
        return None
