"""The research quantizers (min-max levels, DoReFa) as explorer formats.

A research result maps code ``c`` (``0 .. 2^k - 1``) to one of ``2^k`` evenly spaced
levels, so in real arithmetic it is the float-offset form ``x_hat = s q + m`` with signed
codes ``q = c - 2^(k-1)``, ``s`` the level spacing and ``m`` the level of ``q = 0``. In
float32, though, ``fl(fl(q s) + m)`` and the research formula (``min + c step``,
``(2 q_k(u) - 1) max|w|``) round differently: on random tensors about nine in ten level
tables differ from the affine form in at least one level, by one or two ulps. So the
explorer gets a ``LevelTableTensor``: a per-tensor ``QuantizedTensor`` (int, asymmetric,
float min) whose ``scale`` and ``offset`` are that affine description, for the hover and
the formulas, and whose ``dequantize()`` looks the codes up in the research result's own
level table: bit for bit the research output, so every map, metric and count measures it.

Storage is what a reader needs to rebuild that table exactly (``minmax_levels`` /
``dorefa_levels``): the codes plus ``x_min`` and ``x_max`` (float32 each) for min-max
levels; plus ``max|w|`` (float32) for rescaled DoReFa; nothing for plain DoReFa, whose
levels in ``[-1, 1]`` depend on ``k`` and the variant only. ``max|tanh(w)|`` normalises
while quantizing but is not needed to dequantize.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from quant_core import (
    BlockRange,
    ClipStats,
    Mode,
    PerTensor,
    QuantConfig,
    QuantizedTensor,
    StorageReport,
    ZeroPoint,
    layout_for,
)
from quant_core.research import (
    DoReFaResult,
    LevelQuantResult,
    dorefa_levels,
    dorefa_quantize_weights,
    minmax_levels,
    minmax_levels_quantize,
)

from ..state.research import ResearchFormat, ResearchScheme
from .explore import Exploration, explore

__all__ = [
    "LevelTableTensor",
    "ResearchExploration",
    "explore_research",
    "level_table",
    "research_config",
    "research_result",
    "research_storage",
    "research_tensor",
    "stored_parameters",
]


@dataclass(frozen=True, eq=False)
class LevelTableTensor(QuantizedTensor):
    """A per-tensor ``QuantizedTensor`` whose codes index ``table``: the ``2^bits`` levels
    (float32, ascending), ``table[q - qmin]`` for signed code ``q``. ``scale`` and
    ``offset`` describe the same levels as ``x_hat = s q + m`` (to within float32 rounding);
    ``dequantize``, ``levels`` and ``representable_range`` read the table itself.
    ``research`` and ``parameters`` (name, value pairs of ``stored_parameters``) say where
    the table comes from: ``level_table(research, dict(parameters))`` rebuilds it."""

    table: torch.Tensor | None = None
    research: ResearchScheme | None = None
    parameters: tuple[tuple[str, float], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        n = 1 << self.config.bits
        if not isinstance(self.table, torch.Tensor) or tuple(self.table.shape) != (n,):
            got = None if self.table is None else tuple(self.table.shape)
            raise ValueError(
                f"table must hold the {n} levels of {self.config.bits} bits, got {got}"
            )
        if self.layout.n_blocks != 1:
            raise ValueError(f"a level table is per tensor, got {self.layout.n_blocks} blocks")

    def _table(self) -> torch.Tensor:
        assert self.table is not None  # checked in __post_init__
        return self.table

    def dequantize(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """``table[q - qmin]``: float32, the codes' shape; written into ``out`` when given
        (as ``QuantizedTensor.dequantize``)."""
        dest = None if out is None else self._checked_out(out)
        return self._into(dest, self._table()[self.codes.to(torch.int64) - self.config.qmin])

    def levels(self, block: int = 0) -> torch.Tensor:
        if block != 0:
            raise ValueError(f"block {block} out of range: this tensor has 1 block")
        return self._table().clone()

    def representable_range(self) -> BlockRange:
        t = self._table()
        return BlockRange(t[:1].reshape(1, 1), t[-1:].reshape(1, 1))


def research_config(bits: int) -> QuantConfig:
    """The config a research result is shown under: int ``bits`` asymmetric, per tensor,
    float-min offset, fp32 scale (``x_hat = s q + m``)."""
    return QuantConfig(
        bits=bits, mode=Mode.ASYMMETRIC, granularity=PerTensor(), zero_point=ZeroPoint.FLOAT_MIN
    )


def research_result(x: torch.Tensor, scheme: ResearchScheme) -> LevelQuantResult | DoReFaResult:
    """The research quantizer ``scheme`` names, applied to ``x`` (finite, float)."""
    if scheme.format is ResearchFormat.MINMAX_LEVELS:
        return minmax_levels_quantize(x, scheme.bits, scheme.variant)
    return dorefa_quantize_weights(x, scheme.bits, rescale=scheme.rescale, variant=scheme.variant)


def stored_parameters(
    scheme: ResearchScheme, result: LevelQuantResult | DoReFaResult
) -> dict[str, float]:
    """The numbers stored beside the codes, by name: ``x_min``, ``x_max`` (min-max levels),
    ``max|w|`` (rescaled DoReFa) or none (plain DoReFa)."""
    if isinstance(result, LevelQuantResult):
        return {"x_min": result.x_min, "x_max": result.x_max}
    return {"max|w|": result.scale} if scheme.rescale else {}


def level_table(scheme: ResearchScheme, params: dict[str, float]) -> torch.Tensor:
    """The ``2^k`` levels rebuilt from ``stored_parameters``: exactly the result's."""
    if scheme.format is ResearchFormat.MINMAX_LEVELS:
        return minmax_levels(params["x_min"], params["x_max"], scheme.bits, scheme.variant)
    return dorefa_levels(scheme.bits, scheme.variant, params.get("max|w|", 1.0))


def research_tensor(
    codes: torch.Tensor,
    shape: tuple[int, ...],
    scheme: ResearchScheme,
    params: dict[str, float],
    input_dtype: torch.dtype = torch.float32,
) -> LevelTableTensor:
    """A ``LevelTableTensor`` of ``shape`` from unsigned codes ``c`` (``0 .. 2^k - 1``, any
    integer dtype), ``scheme`` and its ``stored_parameters`` (the table is
    ``level_table(scheme, params)``)."""
    t = level_table(scheme, params)
    n = t.numel()
    cfg = research_config(scheme.bits)
    # the affine description: spacing s over 2^k - 1 steps, m the level of q = 0 (c = 2^(k-1))
    s = (t[-1] - t[0]) / (n - 1)
    code_dtype = torch.int8 if scheme.bits <= 8 else torch.int16
    return LevelTableTensor(
        codes=(codes.to(torch.int32) + cfg.qmin).to(code_dtype).reshape(shape),
        scale=s.reshape(()),
        zero_point=torch.zeros((), dtype=torch.int32),
        config=cfg,
        layout=layout_for(shape, cfg.granularity),
        input_dtype=input_dtype,
        chosen_range=BlockRange(t[:1].reshape(1, 1), t[-1:].reshape(1, 1)),
        offset=t[-cfg.qmin].reshape(()).clone(),
        table=t,
        research=scheme,
        parameters=tuple(params.items()),
    )


def research_storage(shape: tuple[int, ...], scheme: ResearchScheme) -> StorageReport:
    """Codes at ``bits`` each plus the float32 numbers ``stored_parameters`` names (2 for
    min-max levels, 1 for rescaled DoReFa, 0 for plain DoReFa), counted as scales.
    Example: ``[384, 384]`` at 3 bits, min-max levels: ``3 + 64/147456 = 3.0004`` bits per
    element; plain DoReFa: exactly 3."""
    n = math.prod(shape)
    n_params = 2 if scheme.format is ResearchFormat.MINMAX_LEVELS else int(scheme.rescale)
    total = n * scheme.bits + 32 * n_params
    return StorageReport(
        n_elements=n,
        n_scales=n_params,
        n_zero_points=0,
        code_bits=scheme.bits,
        scale_bits=32,
        zero_point_bits=0,
        total_bits=total,
        bits_per_element=total / n,
        total_bytes=math.ceil(total / 8),
        fp32_bytes=4 * n,
        fp16_bytes=2 * n,
        ratio_vs_fp32=32 * n / total,
        ratio_vs_fp16=16 * n / total,
    )


def _storage_note(scheme: ResearchScheme) -> str:
    if scheme.format is ResearchFormat.MINMAX_LEVELS:
        return "x_min and x_max (float32 each) rebuild the levels exactly"
    if scheme.rescale:
        return "max|w| (float32) rescales the levels; max|tanh w| is not needed to dequantize"
    return "nothing else: the levels in [-1, 1] depend on the bits and q_k only"


@dataclass(frozen=True, eq=False)
class ResearchExploration:
    """``exploration`` (maps, metrics, storage) of the research ``result`` under
    ``scheme``; ``exploration.qt`` is the ``LevelTableTensor``."""

    scheme: ResearchScheme
    result: LevelQuantResult | DoReFaResult
    exploration: Exploration

    @property
    def parameters(self) -> dict[str, float]:
        return stored_parameters(self.scheme, self.result)


def explore_research(matrix: torch.Tensor, scheme: ResearchScheme) -> ResearchExploration:
    """Quantize ``matrix`` (``[R, C]``, finite) with the research quantizer ``scheme`` and
    measure it as the explorer measures any scheme. Storage is ``research_storage``;
    nothing counts as clipped (the normalisation maps every value into ``[0, 1]``; the
    saturated count is that of the two end codes). Raises ``ValueError`` for a matrix with
    NaN/Inf (the research quantizers take finite tensors) or not 2-D."""
    if not isinstance(scheme, ResearchScheme):
        raise TypeError(f"scheme must be a ResearchScheme, got {type(scheme).__name__}")
    if matrix.dim() != 2:
        raise ValueError(f"explore expects a 2-D matrix, got shape {tuple(matrix.shape)}")
    if not bool(torch.isfinite(matrix).all()):
        raise ValueError(
            f"{scheme.format.label} needs finite values: the research quantizers normalise "
            "by the tensor's min and max (or max|tanh w|), which NaN/Inf would not give"
        )
    x = matrix.to(torch.float32)
    result = research_result(x, scheme)
    shape = tuple(x.shape)
    params = stored_parameters(scheme, result)
    qt = research_tensor(result.codes, shape, scheme, params, matrix.dtype)
    exp = explore(x, qt.config, quantized=qt)
    clip = ClipStats(
        n_elements=exp.clip.n_elements,
        n_clipped_low=0,
        n_clipped_high=0,
        n_saturated=exp.clip.n_saturated,
    )
    exp = replace(
        exp,
        storage=research_storage(shape, scheme),
        clip=clip,
        scheme_label=scheme.describe(),
        storage_note=_storage_note(scheme),
    )
    return ResearchExploration(scheme, result, exp)
