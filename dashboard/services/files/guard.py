"""The model roots (``services/model/roots``) as ``quant_core.files``' path guard: every
file the reader opens must resolve inside an allowed root, as for any model folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..model.roots import ModelRoots, check_inside

__all__ = ["RootsGuard"]


@dataclass(frozen=True)
class RootsGuard:
    """``check(path)``: ``roots.check_inside`` (links followed; ``PathRefused``, a
    ``ValueError``, naming the path when it leads outside every root)."""

    roots: ModelRoots

    def check(self, path: Path) -> Path:
        return check_inside(Path(path), self.roots)
