"""The value sets and scale formats of quantization formats, one module per family.

- ``codebooks``: formats beyond linear, whose codes index a table of values (NF4, FP4, FP6,
  FP8, IQ4_NL, ternary).
- ``integer``: the linear integer grid's per-block parameters (scales, zero points, offsets).
"""

from __future__ import annotations

from .codebooks import NF4_MIN_SCALE, NF4_VALUES, Codebook, codebook_for

__all__ = ["NF4_MIN_SCALE", "NF4_VALUES", "Codebook", "codebook_for"]
