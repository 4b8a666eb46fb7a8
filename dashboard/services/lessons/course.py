"""What the lessons' labs compute, and the course's own numbers, named as the course names
them (its "quantization error" is the MSE, ``(dequantized_tensor - test_tensor).square()
.mean()``), as metric cards.

The numbers are computed by ``quant_core`` here, never typed in: on the course's 3x3
tensor at 8 bits they come out as the course printed them (170.88 for its hand-picked
``s = 3.5, z = -70``; 1.5730 asymmetric and 2.5092 symmetric per tensor; 1.8084 and 1.0781
per channel), and the tests hold them to those values. Where the course worked on random
tensors or on models we do not bundle, the same measure is taken on the bundled
all-MiniLM-L6-v2 and named the course's way.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import torch

from quant_core import (
    BlockRange,
    Format,
    LinearEval,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    ScaleDtype,
    SchemePreset,
    ZeroPoint,
    error_metrics,
    quantize,
    quantize_dequantize,
    storage_cost,
)

from ..display.decimals import fixed_decimals
from ..explorer.explore import Exploration, explore
from ..explorer.formulas import latex_number, latex_operand
from ..explorer.metric_cards import MetricCard, compact
from ..explorer.ste import StePanel
from ..model.outputs import ModelOutputs
from ..sources.examples import Example, example_tensor
from .catalog import COURSE_SCALE, COURSE_ZERO_POINT
from .forum import ForumAnswer
from .loading import RoundTrip
from .packing import COURSE_CODES, packing_picture

__all__ = [
    "beyond_linear_schemes",
    "course_error",
    "explore_given",
    "format_cards",
    "format_table",
    "forum_cards",
    "given_formulas",
    "given_range",
    "layer_cards",
    "loading_cards",
    "model_cards",
    "packing_cards",
    "ste_cards",
    "tensor_cards",
    "w8a16_cards",
]

_SYM8 = QuantConfig(8, Mode.SYMMETRIC, PerTensor())
_ASYM8 = QuantConfig(8, Mode.ASYMMETRIC, PerTensor(), zero_point=ZeroPoint.COURSE_CLAMP)
_ERROR = "the course's quantization error: (dequantized_tensor - test_tensor).square().mean()"

def beyond_linear_schemes(group_size: int) -> tuple[QuantConfig, ...]:
    """The schemes the "beyond linear" lesson compares: int4 symmetric, NF4, FP4 (E2M1) and
    FP8 (E4M3), each with one fp32 absmax scale per ``group_size`` values, then MXFP4 (FP4,
    an E8M0 power-of-two scale per 32) and NVFP4 (FP4, an FP8 E4M3 scale per 16 and an
    fp32 one per tensor) as they ship."""
    gran = PerGroup(group_size)
    return (
        QuantConfig(4, Mode.SYMMETRIC, gran),
        QuantConfig(granularity=gran, format=Format.NF4),
        QuantConfig(granularity=gran, format=Format.FP4_E2M1),
        QuantConfig(granularity=gran, format=Format.FP8_E4M3),
        QuantConfig.from_name("MXFP4"),
        QuantConfig.from_name("NVFP4"),
    )


def given_range(scale: float, zero_point: int, bits: int = 8) -> BlockRange:
    """The range whose asymmetric grid has exactly ``scale`` and ``zero_point``:
    ``[s (qmin - z), s (qmax - z)]``. Example: ``s = 3.5, z = -70`` at 8 bits is
    ``[-203, 689.5]``. ``ValueError`` for ``s <= 0`` or ``z`` outside the codes."""
    cfg = QuantConfig(bits, Mode.ASYMMETRIC)
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    if not cfg.qmin <= zero_point <= cfg.qmax:
        raise ValueError(f"zero point {zero_point} is outside {cfg.qmin}..{cfg.qmax}")
    lo = torch.tensor([[scale * (cfg.qmin - zero_point)]], dtype=torch.float32)
    hi = torch.tensor([[scale * (cfg.qmax - zero_point)]], dtype=torch.float32)
    return BlockRange(lo, hi)


def explore_given(matrix: torch.Tensor, scale: float, zero_point: int) -> Exploration:
    """``matrix`` at int8 asymmetric with the hand-picked ``scale`` and ``zero_point`` (the
    course's ``linear_q_with_scale_and_zero_point``): values beyond the grid clamp."""
    return explore(matrix, _ASYM8, ranges=given_range(scale, zero_point))


def given_formulas(scale: float, zero_point: int) -> tuple[str, ...]:
    """The course's ``linear_q_with_scale_and_zero_point`` and its de-quantization with a
    hand-picked ``scale`` and ``zero_point`` filled in (LaTeX)."""
    s = latex_number(scale)
    z = latex_operand(float(zero_point))
    return (
        rf"q = \operatorname{{clamp}}\left(\operatorname{{round}}\left(\frac{{r}}{{{s}}}"
        rf" + {z}\right), -128, 127\right)",
        rf"\hat r = s\,(q - z) = {s}\,(q - {z})",
    )


def course_error(x: torch.Tensor, cfg: QuantConfig) -> float:
    """The course's quantization error (the MSE) of ``x`` under ``cfg``."""
    return error_metrics(x, quantize_dequantize(x, cfg).values).mse


def _card(label: str, value: str, help_text: str) -> MetricCard:
    return MetricCard(label, value, help_text)


def tensor_cards(slug: str) -> tuple[MetricCard, ...]:
    """The course's numbers on its 3x3 tensor for the first four lessons (``slug``), and
    the packing lesson's; empty for other lessons."""
    x = example_tensor(Example.COURSE_3X3)
    if slug == "quantize-dequantize":
        exp = explore_given(x, COURSE_SCALE, COURSE_ZERO_POINT)
        top = int(exp.original.reshape(-1).argmax())
        return (
            _card(
                "Quantization error",
                f"{exp.metrics.mse:.4f}",
                f"{_ERROR}, with s = 3.5 and z = -70 picked by hand",
            ),
            _card(
                "Code of 728.6",
                str(int(exp.qt.codes.reshape(-1)[top])),
                "round(728.6 / 3.5 - 70) = 138, clamped to int8's 127",
            ),
            _card(
                "728.6 comes back as",
                f"{float(exp.dequantized.reshape(-1)[top]):.1f}",
                "3.5 × (127 + 70)",
            ),
        )
    if slug == "scale-zero-point":
        qt = quantize(x, _ASYM8)
        return (
            _card("scale", f"{float(qt.scale):.4f}", "(r_max - r_min) / (q_max - q_min)"),
            _card("zero_point", str(int(qt.zero_point)), "round(q_min - r_min / scale)"),
            _card(
                "Quantization error",
                f"{course_error(x, _ASYM8):.4f}",
                f"{_ERROR}, 8-bit asymmetric per tensor",
            ),
        )
    if slug == "symmetric-asymmetric":
        return (
            _card(
                "Quantization error, symmetric",
                f"{course_error(x, _SYM8):.4f}",
                f"{_ERROR}, 8 bits per tensor, s = max|r| / 127",
            ),
            _card(
                "Quantization error, asymmetric",
                f"{course_error(x, _ASYM8):.4f}",
                f"{_ERROR}, 8 bits per tensor, s = (r_max - r_min) / 255",
            ),
            _card("scale, symmetric", f"{float(quantize(x, _SYM8).scale):.4f}", "728.6 / 127"),
        )
    if slug == "granularity":
        bits = storage_cost(
            (4096, 4096),
            QuantConfig(4, Mode.SYMMETRIC, PerGroup(32), scale_dtype=ScaleDtype.FP16),
        ).bits_per_element
        return (
            _card(
                "Per tensor",
                f"{course_error(x, _SYM8):.4f}",
                f"{_ERROR}, 8-bit symmetric, one scale",
            ),
            _card(
                "Per channel, dim 0",
                f"{course_error(x, QuantConfig(8, Mode.SYMMETRIC, PerChannel(0))):.4f}",
                f"{_ERROR}, 8-bit symmetric, a scale per row",
            ),
            _card(
                "Per channel, dim 1",
                f"{course_error(x, QuantConfig(8, Mode.SYMMETRIC, PerChannel(1))):.4f}",
                f"{_ERROR}, 8-bit symmetric, a scale per column",
            ),
            _card(
                "Bits per weight, int4 g32",
                f"{bits:g}",
                "4-bit symmetric codes, one fp16 scale per group of 32: 4 + 16/32",
            ),
        )
    if slug == "packing":
        return packing_cards()
    return ()


def packing_cards() -> tuple[MetricCard, ...]:
    """The course's packed byte, as ``quant_core.pack`` makes it."""
    pic = packing_picture(COURSE_CODES, 2)
    return (
        _card("unpacked_tensor", "[1, 0, 3, 2]", "four 2-bit codes, as uint8: 4 bytes"),
        _card("packed_tensor", str(pic.packed[0]), "one uint8: 1 + 0·4 + 3·16 + 2·64"),
        _card("in bits", pic.byte_bits[0], "bit 7 first: the last code comes first"),
    )


def w8a16_cards(weight: torch.Tensor, n_linear: int) -> tuple[MetricCard, ...]:
    """What ``W8A16LinearLayer`` stores for ``weight`` (``[out, in]``): ``int8_weights``,
    one fp32 scale per row; and how many ``nn.Linear`` the replacement swaps."""
    out_f, in_f = weight.shape
    cfg = QuantConfig(8, Mode.SYMMETRIC, PerChannel(0))
    cost = storage_cost(tuple(weight.shape), cfg)
    return (
        _card("int8_weights", f"{out_f}×{in_f}", f"{out_f * in_f:,} int8 codes"),
        _card("scales", f"{out_f}", "one per output row: max|w_row| / 127 (fp32 here)"),
        _card(
            "Bytes",
            f"{cost.total_bytes:,}",
            f"codes and scales, against {cost.fp32_bytes:,} bytes of fp32 weights",
        ),
        _card(
            "nn.Linear replaced",
            str(n_linear),
            "every linear layer of all-MiniLM-L6-v2 (its weights in the model file)",
        ),
    )


def layer_cards(evals: Mapping[SchemePreset, LinearEval]) -> tuple[MetricCard, ...]:
    """The layer's output error under each preset, named as the course names them."""
    return tuple(
        _card(
            f"Output MSE, {preset.label}",
            compact(ev.metrics.mse),
            f"{preset.label}: mean squared error of X̂ Ŵᵀ + b against X Wᵀ + b; exact: "
            f"{ev.metrics.mse!r}",
        )
        for preset, ev in evals.items()
    )


def model_cards(outputs: ModelOutputs, label: str) -> tuple[MetricCard, ...]:
    """The course's memory footprint (of the linear weights) and the embeddings' cosine."""
    return (
        _card(
            "Linear weights, fp32",
            f"{outputs.fp32_bytes / 1e6:.2f} MB",
            "the memory footprint of every quantized layer's weights in float32",
        ),
        _card(
            f"Linear weights, {label}",
            f"{outputs.quantized_bytes / 1e6:.2f} MB",
            "codes, scales and zero points of the same weights",
        ),
        _card(
            "Mean embedding cosine",
            f"{outputs.mean_cosine:.5f}",
            "cosine similarity of each sentence's float and quantized embeddings, averaged "
            f"over {len(outputs.sentences)} held-out sentences",
        ),
    )


def loading_cards(rt: RoundTrip, exp: Exploration) -> tuple[MetricCard, ...]:
    """The saved file and what loading it gave back."""
    return (
        _card("File", f"{rt.file_bytes:,} B", "the whole .safetensors file, header included"),
        _card(
            "Tensors in it",
            f"{rt.tensor_bytes:,} B",
            f"packed codes and scales; the page's storage count: {exp.storage.total_bytes:,} B",
        ),
        _card(
            "Same values loaded",
            "yes" if rt.same_values else "NO",
            "the loaded tensor de-quantizes to the same float32 values, bit for bit",
        ),
    )


def format_table(weight: torch.Tensor, group_size: int) -> pd.DataFrame:
    """``beyond_linear_schemes(group_size)`` on ``weight`` (a scheme whose blocks do not fit
    its rows is left out): the MSE, the largest error, the SQNR and the bits per weight
    (scales, and NVFP4's tensor scale, counted)."""
    rows = []
    for cfg in beyond_linear_schemes(group_size):
        try:
            m = error_metrics(weight, quantize_dequantize(weight, cfg).values)
        except ValueError:
            continue
        rows.append(
            {
                "format": cfg.name,
                "MSE": m.mse,
                "max abs error": m.max_abs,
                "SQNR (dB)": m.sqnr_db,
                "bits per weight": storage_cost(tuple(weight.shape), cfg).bits_per_element,
            }
        )
    return pd.DataFrame(rows)


def format_cards(table: pd.DataFrame) -> tuple[MetricCard, ...]:
    """Each format's MSE (rows of ``format_table``), as cards."""
    return tuple(
        _card(f"MSE, {row['format']}", compact(float(row["MSE"])), f"{row['MSE']!r}")
        for _, row in table.iterrows()
    )


def _scale_card(ans: ForumAnswer) -> MetricCard:
    """``s = max|a| / 127``; for ``a`` all zeros the lab's stand-in ``s = 1`` (``0 / 127``
    would make every code ``0 / 0``), said as such rather than as ``max|a| / 127 = 1``."""
    amax = float(ans.a.abs().max())
    if amax == 0.0:
        return _card("s (all of a is 0)", f"{ans.scale:g}", "max|a| = 0: any scale gives code 0")
    if ans.scale_underflowed:
        return _card(
            "s (max|a| / 127 underflows)",
            f"{ans.scale:.4g}",
            f"max|a| / 127 = {ans.rule_scale:.4g} is below float32's smallest positive value: "
            f"the lab stands in s = {ans.scale:.4g}",
        )
    return _card("s = max|a| / 127", fixed_decimals(ans.scale, 6), f"max|a| = {amax!r}")


def forum_cards(ans: ForumAnswer) -> tuple[MetricCard, ...]:
    """The thread's numbers: ``s``, ``b[3]`` against ``min(a)``, and the storage."""
    fp32, absmax, _ = ans.storage()
    below = ans.below_min
    shown = below[0] if below else 0
    return (
        _scale_card(ans),
        _card(
            f"b[{shown}]",
            fixed_decimals(float(ans.b[shown]), 4),
            f"{int(ans.absmax.codes[shown])} × s",
        ),
        _card("min(a)", fixed_decimals(float(ans.a.min()), 4), "no min-max level lies below it"),
        _card("Stored, int8 + s", f"{absmax.bytes} B", f"{absmax.codes} + {absmax.extra} bits"),
        _card("Stored, float32", f"{fp32.bytes} B", f"{fp32.codes} bits"),
    )


def ste_cards(panel: StePanel) -> tuple[MetricCard, ...]:
    """How many values the clip stops, and the weight gradient's range."""
    g = panel.gradients
    n = g.values.numel()
    return (
        _card(
            "No gradient (clipped)",
            f"{g.n_clipped / n:.1%}",
            f"{g.n_clipped:,} of {n:,} values lie outside [0, 1] as activations",
        ),
        _card(
            "Weight grad at w = 0",
            f"{1 / g.tanh_max * g.scale:.4g}",
            "(1 - tanh² 0) / max|tanh w| = 1 / max|tanh w|",
        ),
        _card(
            "Smallest weight grad",
            compact(float(g.weight_grad.min())),
            "at the largest |w|: tanh flattens there",
        ),
    )
