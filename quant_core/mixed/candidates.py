"""The schemes a mixed-precision allocation chooses among, each with a short name.

A ``Candidate`` is a name and a ``QuantConfig``; nothing else in ``quant_core.mixed``
depends on which configs they are: storage comes from ``storage_cost`` and codes from
``quantize``, so any config (a named preset of the lab included) plugs in unchanged.

``DEFAULT_CANDIDATES`` are shipped layouts the lab's formats can express, fp16 scales as
shipped files store them (bits per weight for a ``[4096, 4096]`` weight):

=============  =========================================  ========
name           config                                     bits/w
=============  =========================================  ========
``int8_pc``    int8 symmetric, one scale per output row   8.004
``q8_g32``     int8 symmetric, blocks of 32 (GGUF Q8_0)   8.5
``fp8_pc``     FP8 E4M3, one scale per output row         8.004
``int4_g128``  int4 asymmetric, blocks of 128 (GPTQ/AWQ)  4.156
``nf4_g64``    NF4, blocks of 64 (bitsandbytes)           4.25
``fp4_g32``    FP4 E2M1, blocks of 32                     4.5
``int3_g64``   int3 asymmetric, blocks of 64              3.297
``int2_g64``   int2 asymmetric, blocks of 64              2.281
=============  =========================================  ========

``gguf_type(cfg)`` is the llama.cpp tensor type that stores exactly ``cfg``'s codes and
scales, where there is one: the config's own ``gguf_type`` when its class has one, else
``Q8_0`` for int8 symmetric blocks of 32 with fp16 scales.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..config import Format, Mode, PerChannel, PerGroup, QuantConfig, ScaleDtype

__all__ = [
    "DEFAULT_CANDIDATES",
    "NAME_PATTERN",
    "Candidate",
    "candidate_named",
    "check_candidates",
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
        """``"int4_g128 (int4 asym g128 s:fp16)"``."""
        return f"{self.name} ({self.config.describe()})"


def _cfg(**kw: object) -> QuantConfig:
    return QuantConfig(scale_dtype=ScaleDtype.FP16, **kw)  # type: ignore[arg-type]


DEFAULT_CANDIDATES: tuple[Candidate, ...] = (
    Candidate("int8_pc", _cfg(bits=8, granularity=PerChannel(0))),
    Candidate("q8_g32", _cfg(bits=8, granularity=PerGroup(32))),
    Candidate("fp8_pc", _cfg(format=Format.FP8_E4M3, granularity=PerChannel(0))),
    Candidate("int4_g128", _cfg(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(128))),
    Candidate("nf4_g64", _cfg(format=Format.NF4, granularity=PerGroup(64))),
    Candidate("fp4_g32", _cfg(format=Format.FP4_E2M1, granularity=PerGroup(32))),
    Candidate("int3_g64", _cfg(bits=3, mode=Mode.ASYMMETRIC, granularity=PerGroup(64))),
    Candidate("int2_g64", _cfg(bits=2, mode=Mode.ASYMMETRIC, granularity=PerGroup(64))),
)

_BY_NAME = {c.name: c for c in DEFAULT_CANDIDATES}


def candidate_named(name: str) -> Candidate:
    """The default candidate called ``name``; ``ValueError`` listing the names otherwise."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown scheme {name!r}; known: {', '.join(_BY_NAME)}"
        ) from None


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


_Q8_0 = _cfg(bits=8, granularity=PerGroup(32))


def gguf_type(cfg: QuantConfig) -> str | None:
    """The GGUF tensor type storing exactly ``cfg`` (module docstring), or ``None``."""
    own = getattr(cfg, "gguf_type", None)
    if own is not None:
        return str(getattr(own, "name", own))
    return "Q8_0" if cfg == _Q8_0 else None
