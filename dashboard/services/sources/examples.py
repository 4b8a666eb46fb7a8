"""The teaching material's example tensors."""

from __future__ import annotations

import enum

import torch

__all__ = ["Example", "example_tensor"]


class Example(enum.Enum):
    """The teaching material's examples; ``TYPED`` is the learner's own values, typed or
    pasted into a box (``TypedSource``), and has no fixed tensor."""

    RANDOM_4X4 = "random_4x4"
    COURSE_3X3 = "course_3x3"
    VECTOR_10 = "vector_10"
    TYPED = "typed"

    @property
    def label(self) -> str:
        return _EXAMPLE_LABELS[self]


_EXAMPLE_LABELS = {
    Example.RANDOM_4X4: "4x4 random normal (seed 0)",
    Example.COURSE_3X3: "3x3 course tensor [[191.6, -13.5, 728.6], ...]",
    Example.VECTOR_10: "10-value vector [0.9372, 2.3312, ...]",
    Example.TYPED: "Your own values (type or paste)",
}

_COURSE_3X3 = ((191.6, -13.5, 728.6), (92.14, 295.5, -184.0), (0.0, 684.6, 245.5))
_VECTOR_10 = (0.9372, 2.3312, 3.2122, 0.5491, 5.2983, 1.5295, 0.8926, 2.7871, 3.0447, 4.5377)


def example_tensor(example: Example) -> torch.Tensor:
    """The example as a float32 tensor: ``[4, 4]``, ``[3, 3]`` or ``[10]``. ``TYPED`` has
    no tensor of its own (its values come with a ``TypedSource``): ``ValueError``."""
    if example is Example.RANDOM_4X4:
        return torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    if example is Example.COURSE_3X3:
        return torch.tensor(_COURSE_3X3, dtype=torch.float32)
    if example is Example.VECTOR_10:
        return torch.tensor(_VECTOR_10, dtype=torch.float32)
    if example is Example.TYPED:
        raise ValueError("Example.TYPED has no fixed values: they come with a TypedSource")
    raise ValueError(f"unknown example {example!r}")
