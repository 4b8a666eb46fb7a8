"""The lessons: one per chapter of the course "Quantization in Depth" (DeepLearning.AI with
Hugging Face), in the course's order, then the two forum questions. Each lesson is data:
its narrative, the question the learner answers before the lab shows the result, and the
lab it opens at the course's own settings (``Lab`` values). What the lab computes, and
the course's numbers, are in ``course``; the page only draws them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from quant_core import (
    Format,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QkVariant,
    QuantConfig,
    SchemePreset,
    ZeroPoint,
)

from ..sources.choice import ExampleSource, ModelSource, SourceChoice, SyntheticSource
from ..sources.examples import Example
from ..sources.synthetic import SyntheticSpec
from .packing import COURSE_CODES

__all__ = [
    "COURSE_SCALE",
    "COURSE_ZERO_POINT",
    "LESSONS",
    "QUERY_WEIGHT",
    "Control",
    "ForumLab",
    "Lab",
    "LayerLab",
    "Lesson",
    "ModelLab",
    "PackingLab",
    "Question",
    "SteLab",
    "TensorLab",
    "lesson_by_slug",
    "neighbours",
]

COURSE_TENSOR = ExampleSource(Example.COURSE_3X3)
THREAD_A = ExampleSource(Example.VECTOR_10)
QUERY_LAYER = "encoder.layer.0.attention.self.query"
QUERY_WEIGHT = ModelSource(f"{QUERY_LAYER}.weight")
COURSE_SCALE = 3.5
COURSE_ZERO_POINT = -70
"""The scale and zero point the course's first lesson picks by hand."""


class Control(enum.Enum):
    """A widget a tensor lab offers."""

    BITS = "bits"
    MODE = "mode"
    GRANULARITY = "granularity"
    FORMAT = "format"
    SCALE_ZERO = "scale_zero"


@dataclass(frozen=True)
class TensorLab:
    """One tensor (``source``) under one scheme: the explorer's metrics, formulas and worked
    table. ``scheme``: the course's settings, where the widgets start; ``controls``: the
    widgets offered; ``given``: the course's hand-picked ``(scale, zero_point)`` instead
    of a scale from the data (``Control.SCALE_ZERO``); ``round_trip``: also save the
    quantized tensor and load it back."""

    source: SourceChoice
    scheme: QuantConfig
    controls: tuple[Control, ...]
    given: tuple[float, int] | None = None
    round_trip: bool = False


@dataclass(frozen=True)
class LayerLab:
    """One linear layer of the bundled model, its output under ``offered`` presets; the
    widget starts at ``preset``."""

    layer: str
    preset: SchemePreset
    offered: tuple[SchemePreset, ...]


@dataclass(frozen=True)
class ModelLab:
    """Every linear layer of the bundled model under a preset; its sentence embeddings."""

    preset: SchemePreset
    offered: tuple[SchemePreset, ...]


@dataclass(frozen=True)
class PackingLab:
    """Codes packed at ``bits``, as a picture."""

    codes: tuple[int, ...] = COURSE_CODES
    bits: int = 2


@dataclass(frozen=True)
class ForumLab:
    """The forum's ``a`` (or the learner's own values): absmax int8 against min-max levels."""

    source: ExampleSource = THREAD_A


@dataclass(frozen=True)
class SteLab:
    """DoReFa's forward and backward on ``source`` at ``bits`` with ``variant``."""

    source: SourceChoice
    bits: int = 2
    variant: QkVariant = QkVariant.ORIGINAL


Lab = TensorLab | LayerLab | ModelLab | PackingLab | ForumLab | SteLab


@dataclass(frozen=True)
class Question:
    """Asked before the lab shows its result: ``options`` with the ``answer``'s index, and
    ``why`` (shown once answered). Answers that depend on computed numbers are checked
    against them by the tests."""

    prompt: str
    options: tuple[str, ...]
    answer: int
    why: str

    def __post_init__(self) -> None:
        if not 0 <= self.answer < len(self.options):
            raise ValueError(f"answer {self.answer} is not one of {len(self.options)} options")


@dataclass(frozen=True)
class Lesson:
    """``slug`` (its URL's ``lesson=``), ``title``, ``chapters`` (the course's own titles it
    covers, empty for a forum question), ``narrative`` (paragraphs, Markdown of our own),
    ``question`` and ``lab``."""

    slug: str
    title: str
    chapters: tuple[str, ...]
    narrative: tuple[str, ...]
    question: Question
    lab: Lab


_INT8_ASYM_COURSE = QuantConfig(8, Mode.ASYMMETRIC, PerTensor(), zero_point=ZeroPoint.COURSE_CLAMP)
_TENSOR_CONTROLS = (Control.BITS, Control.MODE, Control.GRANULARITY)

LESSONS: tuple[Lesson, ...] = (
    Lesson(
        "quantize-dequantize",
        "Quantize and de-quantize a tensor",
        ("Quantize and De-quantize a Tensor",),
        (
            "Quantization stores each number of a tensor as a small integer, its **code** "
            "*q*, plus a few shared numbers that say how to turn codes back into values. "
            "Linear quantization uses two: a **scale** *s* and a **zero point** *z*. A "
            "value *r* becomes *q* = round(*r* / *s* + *z*), clamped to the 256 codes of "
            "int8 (−128 to 127); de-quantizing gives *r̂* = *s* (*q* − *z*) back.",
            "The course starts from its 3×3 test tensor and a scale and zero point picked "
            "by hand, *s* = 3.5 and *z* = −70, and measures the **quantization error**: the "
            "mean of the squared differences between the tensor and its de-quantized copy "
            "(the MSE). Change *s* and *z* in the lab: a scale too small clamps the large "
            "values, one too large leaves most codes unused.",
        ),
        Question(
            "With s = 3.5 and z = −70, what does 728.6 come back as after quantizing and "
            "de-quantizing?",
            (
                "728.6, exactly",
                "728.0, the nearest multiple of 3.5",
                "689.5: its code is clamped at 127",
                "0: it is out of range",
            ),
            2,
            "728.6 / 3.5 − 70 = 138.2, beyond int8's largest code 127: the code is clamped "
            "to 127, and 3.5 × (127 + 70) = 689.5. That one value makes most of the error.",
        ),
        TensorLab(COURSE_TENSOR, _INT8_ASYM_COURSE, (Control.SCALE_ZERO,), given=(3.5, -70)),
    ),
    Lesson(
        "scale-zero-point",
        "Get the scale and zero point",
        ("Get the Scale and Zero Point",),
        (
            "Instead of guessing *s* and *z*, map the tensor's range onto the codes' range: "
            "its smallest value *r*min onto *q*min = −128 and its largest *r*max onto "
            "*q*max = 127. Two equations, two unknowns: *s* = (*r*max − *r*min) / "
            "(*q*max − *q*min) and *z* = round(*q*min − *r*min / *s*).",
            "Every value of the tensor now has a code, nothing is clamped: what error is "
            "left comes from rounding alone, at most half a step (*s* / 2) per value. Try "
            "fewer bits in the lab and watch the step grow.",
        ),
        Question(
            "Which code does the tensor's smallest value, −184.0, land on?",
            ("−128", "−77", "−51", "0"),
            0,
            "r_min is mapped onto q_min by construction: −184 / 3.5788 − 77 = −128.4, "
            "rounded to −128. (−51 is −184 / s without the zero point; −77 is z itself, the "
            "code of 0.)",
        ),
        TensorLab(COURSE_TENSOR, _INT8_ASYM_COURSE, (Control.BITS,)),
    ),
    Lesson(
        "symmetric-asymmetric",
        "Symmetric vs asymmetric mode",
        ("Symmetric vs Asymmetric Mode",),
        (
            "**Symmetric** mode keeps *z* = 0 and a range symmetric around zero: "
            "*s* = max|*r*| / *q*max (127 at 8 bits). It stores one number fewer per block "
            "and its products are simpler, but when the values are not centred on zero, "
            "part of the codes is never used.",
            "**Asymmetric** mode (the last lesson's) spends all its codes on [*r*min, "
            "*r*max]. The course compares the two on its 3×3 tensor at 8 bits, one scale "
            "for the whole tensor.",
        ),
        Question(
            "At 8 bits with one scale per tensor, which mode gives the course's tensor the "
            "smaller quantization error?",
            ("Symmetric", "Asymmetric", "They are equal"),
            1,
            "Its step is (728.6 + 184) / 255 = 3.5788, symmetric's "
            "728.6 / 127 = 5.7370, because symmetric also covers [−728.6, −184) where the "
            "tensor has no value.",
        ),
        TensorLab(COURSE_TENSOR, QuantConfig(8, Mode.SYMMETRIC, PerTensor()), _TENSOR_CONTROLS),
    ),
    Lesson(
        "granularity",
        "Finer granularity for more precision",
        ("Finer Granularity for more Precision",),
        (
            "One scale for the whole tensor is set by its single largest value. Giving each "
            "row (**per channel**) or each small **group** of values its own scale fits "
            "each part better, at the price of storing more scales.",
            "The price is counted in bits per weight: codes plus the scales shared out over "
            "the values they serve. The course's example: 4-bit codes with one 16-bit scale "
            "per group of 32 cost 4 + 16 / 32 = 4.5 bits per weight. On a 3×3 tensor, "
            "three 32-bit scales are a heavy price; on a 384×384 weight they cost "
            "0.08 bits per weight.",
        ),
        Question(
            "4-bit symmetric codes with one fp16 scale per group of 32 values: how many "
            "bits per weight?",
            ("4", "4.5", "5", "20"),
            1,
            "4 bits of code plus a 16-bit scale shared by 32 values: 4 + 16 / 32 = 4.5.",
        ),
        TensorLab(COURSE_TENSOR, QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)), _TENSOR_CONTROLS),
    ),
    Lesson(
        "weights-activations",
        "Weights and activations for inference",
        ("Quantizing Weights & Activations for Inference",),
        (
            "A linear layer computes *Y* = *X* *W*ᵀ + *b*. **W8A16** quantizes the weights "
            "*W* to 8 bits and keeps the activations *X* (the layer's inputs) in 16-bit "
            "floats: the weights take a quarter of the memory and are de-quantized when "
            "the layer runs.",
            "**W8A8** quantizes the inputs too, so the product can run in integers. The "
            "inputs change with every sentence, so their scales are taken on the fly, one "
            "per token. Below, the first query projection of all-MiniLM-L6-v2 on the "
            "bundled sentences.",
        ),
        Question(
            "Which scheme leaves the smaller error in the layer's output?",
            ("W8A16", "W8A8", "They are equal"),
            0,
            "W8A8 adds the rounding of every input to the weights' own error.",
        ),
        LayerLab(
            QUERY_LAYER,
            SchemePreset.W8A16,
            (SchemePreset.W8A16, SchemePreset.W8A8, SchemePreset.W4A16_G128, SchemePreset.W4A8),
        ),
    ),
    Lesson(
        "custom-quantizer",
        "An 8-bit quantizer, and the model's linear layers replaced",
        ("Custom Build an 8-Bit Quantizer", "Replace PyTorch layers with Quantized Layers"),
        (
            "The course's `W8A16LinearLayer` keeps `int8_weights`, one scale per output row "
            "(the row's max|*w*| / 127) and the bias; its forward pass de-quantizes on the "
            "fly: `F.linear(x, int8_weights.to(x.dtype)) * scales + bias`. Then "
            "`replace_linear_with_target_and_quantize` walks the model and swaps every "
            "`nn.Linear` (but the ones it is told to skip) for that layer.",
            "The lab opens the same scheme, int8 symmetric with one scale per row, on the "
            "first query weight of all-MiniLM-L6-v2, [384, 384].",
        ),
        Question(
            "How many scales does W8A16LinearLayer keep for a [384, 384] weight?",
            ("1", "384", "768", "147,456"),
            1,
            "One per output row: 384 scales for 147,456 int8 weights.",
        ),
        TensorLab(
            QUERY_WEIGHT,
            QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)),
            (Control.BITS, Control.GRANULARITY),
        ),
    ),
    Lesson(
        "whole-model",
        "Quantize a whole open-source model",
        ("Quantize any Open Source PyTorch Model",),
        (
            "With the replacement function, a whole model is quantized in one call. The "
            "course measures its memory footprint before and after, and checks that the "
            "model still does its job.",
            "Here all-MiniLM-L6-v2 with every linear layer quantized, and its sentence "
            "embeddings compared with the float model's on sentences that took no part in "
            "any calibration (the cosine similarity of each pair).",
        ),
        Question(
            "After W8A16 on every linear layer, how close are MiniLM's sentence embeddings "
            "to the float ones (mean cosine similarity)?",
            ("Above 0.999", "About 0.95", "About 0.5"),
            0,
            "8-bit weights with a scale per row change each output by far "
            "less than the differences between sentences.",
        ),
        ModelLab(
            SchemePreset.W8A16, (SchemePreset.W8A16, SchemePreset.W4A16_G128, SchemePreset.W8A8)
        ),
    ),
    Lesson(
        "load-back",
        "Load quantized weights back",
        ("Load your Quantized Weights from HuggingFace Hub",),
        (
            "A quantized model is worth sharing only if it loads again without the "
            "original weights. The course saves the quantized state dict, builds the "
            "model's skeleton, replaces its layers and loads the int8 weights and scales "
            "into them.",
            "The explorer's export does the same for one tensor: a `.safetensors` file "
            "with the packed codes, the scales (and zero points), and in its metadata the "
            "formula to de-quantize. Below, the int8 per-row query weight saved and read "
            "back.",
        ),
        Question(
            "Reading the file back gives which values?",
            (
                "The original float weights",
                "Exactly the de-quantized values from before saving",
                "Values close to the de-quantized ones, rounded once more",
            ),
            1,
            "The file holds the codes and scales, and "
            "s (q − z) gives the same numbers again. The original floats are gone.",
        ),
        TensorLab(
            QUERY_WEIGHT,
            QuantConfig(8, Mode.SYMMETRIC, PerChannel(0)),
            _TENSOR_CONTROLS,
            round_trip=True,
        ),
    ),
    Lesson(
        "packing",
        "Pack and unpack 2-bit weights",
        ("Weights Packing", "Packing 2-bit Weights", "Unpacking 2-bit Weights"),
        (
            "PyTorch has no 2-bit or 4-bit dtype: 2-bit codes kept in a `torch.uint8` "
            "tensor still take a whole byte each. **Packing** puts several codes in each "
            "byte: four 2-bit codes, two 4-bit ones. The course packs its "
            "`unpacked_tensor` [1, 0, 3, 2] into one byte, the first code in the lowest "
            "bits; **unpacking** shifts and masks them out again.",
            "Type your own codes and pick a width: 3-bit codes do not divide a byte, so "
            "some straddle two bytes.",
        ),
        Question(
            "The four 2-bit codes [1, 0, 3, 2] packed into one byte, the first code in the "
            "lowest bits: which byte?",
            ("177", "78", "6", "27"),
            0,
            "1 + 0·4 + 3·16 + 2·64 = 177 = 0b10110001: read from bit 7 down, 10 11 00 01, "
            "the last code first. (78 = 0b01001110 would put the first code in the highest "
            "bits.)",
        ),
        PackingLab(),
    ),
    Lesson(
        "beyond-linear",
        "Beyond linear quantization",
        ("Beyond Linear Quantization",),
        (
            "Linear quantization spaces its levels evenly. The weights of a trained network "
            "are bell-shaped: most lie near zero, few are large. **NF4** (QLoRA) puts its 16 "
            "levels at the quantiles of a normal distribution, denser near zero; **FP4** "
            "(E2M1) and **FP8** (E4M3) are tiny floating-point formats whose levels are "
            "spaced by powers of two. Each keeps one absmax scale per block.",
            "Today's hardware formats quantize the scales too: **MXFP4** (OCP "
            "microscaling) stores FP4 values with one power-of-two scale (E8M0, 8 bits) "
            "per 32 values, 4.25 bits per weight; **NVFP4** one FP8 (E4M3) scale per 16 "
            "values and a float32 scale for the whole tensor, 4.5 bits. The lab opens NF4 "
            "with one scale per 64 values on a MiniLM weight; switch the format and compare.",
        ),
        Question(
            "On a MiniLM weight with one scale per group of 64, which 4-bit format has the "
            "smallest error?",
            ("int4 (symmetric)", "NF4", "FP4 (E2M1)"),
            1,
            "Its levels follow the bell shape of the weights, so the many small "
            "weights get finer steps.",
        ),
        TensorLab(
            QUERY_WEIGHT,
            QuantConfig(format=Format.NF4, granularity=PerGroup(64)),
            (Control.FORMAT, Control.GRANULARITY),
        ),
    ),
    Lesson(
        "forum-min-max",
        "From the forum: what min_max_quantize did to a",
        (),
        (
            "A learner asked: *why did `min_max_quantize` turn `a` into `b`, and where is "
            "the size reduction if both are float32?* The answer was \"256 levels between "
            "min and max\". The numbers say otherwise.",
            "`b` is exactly 8-bit **symmetric absmax** quantization, de-quantized: "
            "*s* = max|*a*| / 127, codes round(*a* / *s*). Both tensors are float32 because "
            "`b` is the de-quantized copy; the saving is in what is stored instead, 8-bit "
            "codes and one float scale. Paste your own values in the box to check them the "
            "same way.",
        ),
        Question(
            "b[3] = 0.5423, but min(a) = 0.5491. Can b come from 256 levels between min(a) "
            "and max(a)?",
            ("Yes", "No"),
            1,
            "Every min-max level lies in [min(a), max(a)], and 0.5423 is below it. "
            "It is 13 × s with s = 5.2983 / 127: absmax.",
        ),
        ForumLab(),
    ),
    Lesson(
        "forum-backward",
        "From the forum: the backward pass, and inputs in [0, 1]",
        (),
        (
            "A learner asked about DoReFa / AdaBits' *q*k: *could you elaborate on the "
            "backward?*, and *how do you ensure the input is in [0, 1]?*",
            "*q*k is a staircase, so its derivative is zero almost everywhere. The "
            "**straight-through estimator** keeps the staircase forward and passes the "
            "gradient through it unchanged backward; what surrounds *q*k decides the rest. "
            "The plots are computed by torch autograd on the lab's tensor.",
        ),
        Question(
            "Activations are clipped to [0, 1] before q_k. What gradient does the STE pass "
            "back for x = 1.5?",
            ("1: straight through", "0: it was clipped", "1.5"),
            1,
            "The STE passes the gradient through q_k, but the clip before it is flat "
            "beyond 1, so nothing flows back to x = 1.5.",
        ),
        SteLab(SyntheticSource(SyntheticSpec(rows=64, cols=64))),
    ),
)

_BY_SLUG = {lesson.slug: lesson for lesson in LESSONS}


def lesson_by_slug(slug: str) -> Lesson:
    """The lesson whose URL's ``lesson=`` is ``slug``; ``ValueError`` naming the known ones."""
    try:
        return _BY_SLUG[slug]
    except (KeyError, TypeError):
        known = ", ".join(_BY_SLUG)
        raise ValueError(f"unknown lesson {slug!r}; the lessons are: {known}") from None


def neighbours(lesson: Lesson) -> tuple[Lesson | None, Lesson | None]:
    """The previous and next lessons (``None`` at either end)."""
    i = LESSONS.index(lesson)
    return (LESSONS[i - 1] if i > 0 else None, LESSONS[i + 1] if i + 1 < len(LESSONS) else None)
