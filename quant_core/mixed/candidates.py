"""The schemes a mixed-precision allocation chooses among, each with a short name.

A ``Candidate`` is a name and a ``QuantConfig``; nothing else in ``quant_core.mixed``
depends on which configs they are: storage comes from ``storage_cost`` and codes from
``quantize``, so any config plugs in unchanged.

``ALL_CANDIDATES``: every shipped format of the registry (``QuantConfig.from_name``, named
by ``config.name``: ``Q4_K``, ``MXFP4``, ``NVFP4``, ``NF4_DQ``, ...) and two layouts the
GPTQ/AWQ and per-channel worlds ship, fp16 scales:

=============  ==========================================  ===============================
name           config                                      bits/w of a ``[4096, 4096]``
=============  ==========================================  ===============================
``int4_g128``  int4 asymmetric, blocks of 128 (GPTQ/AWQ)   ``4 + 16/128 + 4/128 = 4.156``
``int8_pc``    int8 symmetric, one scale per output row    ``8 + 16/4096 = 8.004``
=============  ==========================================  ===============================

``DEFAULT_CANDIDATES``: the formats people ship (``SHIPPED``, the sweep's one-click set)
and those two.

A GGUF type whose blocks do not divide a tensor's rows is stored by ``llama-quantize`` in
its fallback type (Q4_K -> Q5_0 for 384-wide rows): ``config_for`` gives the config a
tensor is then actually stored in, and the table measures that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..config import Mode, PerChannel, PerGroup, QuantConfig, ScaleDtype
from ..formats.gguf_types import fallback_config
from ..formats.registry import SHIPPED_SET, presets

__all__ = [
    "ALL_CANDIDATES",
    "DEFAULT_CANDIDATES",
    "LAB_CANDIDATES",
    "NAME_PATTERN",
    "SHIPPED",
    "Candidate",
    "candidate_named",
    "check_candidates",
    "config_for",
    "gguf_type",
]

NAME_PATTERN = re.compile(r"[A-Za-z0-9_.+-]{1,40}")


@dataclass(frozen=True)
class Candidate:
    """A scheme the allocation may give a tensor: ``name`` (letters, digits, ``_.+-``, at
    most 40: it goes into URLs, file names and recipes) and its ``config``."""

    name: str
    config: QuantConfig

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name):
            raise ValueError(
                f"candidate name {self.name!r} must be 1-40 letters, digits or _.+-"
            )
        if not isinstance(self.config, QuantConfig):
            raise TypeError(f"candidate config must be a QuantConfig, got {self.config!r}")

    @property
    def label(self) -> str:
        """``"int4_g128 (int4 asym g128 s:fp16)"``: the name and what the config is."""
        return f"{self.name} ({self.config.describe()})"


def _fp16(**kw: object) -> QuantConfig:
    return QuantConfig(scale_dtype=ScaleDtype.FP16, **kw)  # type: ignore[arg-type]


LAB_CANDIDATES: tuple[Candidate, ...] = (
    Candidate("int4_g128", _fp16(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(128))),
    Candidate("int8_pc", _fp16(bits=8, granularity=PerChannel(0))),
)
ALL_CANDIDATES: tuple[Candidate, ...] = (
    *(Candidate(p.name, p.config) for p in presets()),
    *LAB_CANDIDATES,
)
SHIPPED: tuple[str, ...] = SHIPPED_SET
"""The formats people ship (``formats.registry.SHIPPED_SET``, the sweep's one click too)."""

_BY_NAME = {c.name: c for c in ALL_CANDIDATES}
DEFAULT_CANDIDATES: tuple[Candidate, ...] = (
    *(_BY_NAME[n] for n in SHIPPED),
    *LAB_CANDIDATES,
)


def candidate_named(name: str) -> Candidate:
    """The candidate called ``name``; ``ValueError`` listing the names otherwise."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown scheme {name!r}; known: {', '.join(_BY_NAME)}") from None


def check_candidates(candidates: Iterable[Candidate]) -> tuple[Candidate, ...]:
    """``candidates`` as a tuple, checked: at least one, all ``Candidate``, names unique."""
    out = tuple(candidates)
    if not out:
        raise ValueError("pick at least one candidate scheme")
    seen: set[str] = set()
    for c in out:
        if not isinstance(c, Candidate):
            raise TypeError(f"candidates must be Candidate values, got {c!r}")
        if c.name in seen:
            raise ValueError(f"candidate name {c.name!r} is given twice")
        seen.add(c.name)
    return out


def config_for(candidate: Candidate, shape: tuple[int, ...]) -> QuantConfig:
    """The config a ``shape`` tensor is stored in under ``candidate``: its own, or for a
    GGUF type whose blocks do not divide the rows, llama-quantize's fallback type's
    (``ValueError`` when not even that fits: llama-quantize keeps it in F16)."""
    return fallback_config(candidate.config, tuple(shape))


def gguf_type(cfg: QuantConfig) -> str | None:
    """The GGUF tensor type storing exactly ``cfg`` (``cfg.gguf_type``), or ``None``."""
    return cfg.gguf_type
