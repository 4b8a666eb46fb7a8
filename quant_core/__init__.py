"""quant_core: linear and non-linear quantization of PyTorch tensors, pure and testable.

    from quant_core import QuantConfig, Mode, PerGroup, quantize, error_metrics
    qt = quantize(x, QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(32)))
    m = error_metrics(x, qt.dequantize())

On CPU the large passes run as compiled kernels (``Backend.COMPILED``, the default; the
eager path where compiling is not possible, or under ``QLAB_COMPILE=0``), with the same
results bit for bit: see ``quant_core.kernels``. ``warm_up_in_background()`` compiles them
at an app's start.

This package never imports Streamlit.
"""

from .activations import (
    ActivationGranularity,
    ActivationQuant,
    ActivationRanges,
    RangeComparison,
    calibrate_layer_ranges,
    calibrate_ranges,
    compare_static_dynamic,
    feature_absmax,
    outlier_features,
    quantize_activation,
)
from .algo_checks import AlgorithmWarning
from .algorithms import (
    Algorithm,
    WeightQuantResult,
    layer_output_error,
    quantize_weight,
    quantize_weights,
)
from .analysis import (
    ClipStats,
    clip_bounds,
    clip_stats,
    code_counts,
    code_total,
    histogram,
    levels_used,
)
from .awq import AWQOptions, AWQResult
from .calibration import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES, capture_sentence_inputs
from .capture import ActivationCapture, capture_linear_inputs
from .config import (
    MAX_INT_BITS,
    MIN_INT_BITS,
    DoubleQuantScales,
    FloatScales,
    Format,
    FP8Scales,
    Granularity,
    Mode,
    PerBlock,
    PerChannel,
    PerGroup,
    PerTensor,
    PowerOfTwoScales,
    QuantConfig,
    RangeMethod,
    Recipe,
    Rounding,
    ScaleDtype,
    ScaleFormat,
    SuperBlockScales,
    ZeroPoint,
    int_range,
)
from .fake_quant import FakeQuantLinears, fake_quantize_linears
from .formats import NF4_VALUES, Codebook, codebook_for
from .formats.gguf_types import GGMLType, fallback_config, fallback_type, ggml_type, ggml_types
from .formats.registry import Preset, preset_names, presets
from .formats.scales import StoredScales, check_shape
from .gptq import GPTQOptions, GPTQResult, GroupGrid
from .granularity import BlockLayout, layout_for
from .hqq import HQQOptions, HQQResult, HQQVariable
from .kernels import (
    Backend,
    active_backend,
    compile_failure,
    set_backend,
    use_backend,
)
from .linear_eval import LayerScheme, LinearEval, SchemePreset, evaluate_linear, linear_layer
from .metrics import ErrorMetrics, error_metrics
from .model import LayerReport, ModelReport, QuantizedLinear, quantize_model, report_tensor
from .model_activations import (
    LayerOutputError,
    ModelOutputReport,
    model_output_report,
    per_layer_output_errors,
    rank_layers,
)
from .packing import pack, packed_size, unpack
from .quantize import QuantizedTensor, RoundTrip, quantize, quantize_dequantize
from .ranges import BlockRange
from .research import (
    DoReFaResult,
    LevelQuantResult,
    QkVariant,
    TeachingStep,
    dorefa_quantize_weights,
    minmax_levels_quantize,
    q_k,
    q_k_codes,
    q_k_levels,
)
from .smoothquant import AlphaSweep, alpha_sweep, smooth, smoothing_factors
from .ste import dorefa_activation_ste, dorefa_weight_ste, q_k_ste
from .storage import StoragePart, StorageReport, storage_cost
from .validation import check_float_tensor
from .warmup import WarmUp, warm_up, warm_up_in_background

__all__ = [
    "CALIBRATION_SENTENCES",
    "HELD_OUT_SENTENCES",
    "MAX_INT_BITS",
    "MIN_INT_BITS",
    "NF4_VALUES",
    "AWQOptions",
    "AWQResult",
    "ActivationCapture",
    "ActivationGranularity",
    "ActivationQuant",
    "ActivationRanges",
    "Algorithm",
    "AlgorithmWarning",
    "AlphaSweep",
    "Backend",
    "BlockLayout",
    "BlockRange",
    "ClipStats",
    "Codebook",
    "DoReFaResult",
    "DoubleQuantScales",
    "ErrorMetrics",
    "FP8Scales",
    "FakeQuantLinears",
    "FloatScales",
    "Format",
    "GGMLType",
    "GPTQOptions",
    "GPTQResult",
    "Granularity",
    "GroupGrid",
    "HQQOptions",
    "HQQResult",
    "HQQVariable",
    "LayerOutputError",
    "LayerReport",
    "LayerScheme",
    "LevelQuantResult",
    "LinearEval",
    "Mode",
    "ModelOutputReport",
    "ModelReport",
    "PerBlock",
    "PerChannel",
    "PerGroup",
    "PerTensor",
    "PowerOfTwoScales",
    "Preset",
    "QkVariant",
    "QuantConfig",
    "QuantizedLinear",
    "QuantizedTensor",
    "RangeComparison",
    "RangeMethod",
    "Recipe",
    "RoundTrip",
    "Rounding",
    "ScaleDtype",
    "ScaleFormat",
    "SchemePreset",
    "StoragePart",
    "StorageReport",
    "StoredScales",
    "SuperBlockScales",
    "TeachingStep",
    "WarmUp",
    "WeightQuantResult",
    "ZeroPoint",
    "active_backend",
    "alpha_sweep",
    "calibrate_layer_ranges",
    "calibrate_ranges",
    "capture_linear_inputs",
    "capture_sentence_inputs",
    "check_float_tensor",
    "check_shape",
    "clip_bounds",
    "clip_stats",
    "code_counts",
    "code_total",
    "codebook_for",
    "compare_static_dynamic",
    "compile_failure",
    "dorefa_activation_ste",
    "dorefa_quantize_weights",
    "dorefa_weight_ste",
    "error_metrics",
    "evaluate_linear",
    "fake_quantize_linears",
    "fallback_config",
    "fallback_type",
    "feature_absmax",
    "ggml_type",
    "ggml_types",
    "histogram",
    "int_range",
    "layer_output_error",
    "layout_for",
    "levels_used",
    "linear_layer",
    "minmax_levels_quantize",
    "model_output_report",
    "outlier_features",
    "pack",
    "packed_size",
    "per_layer_output_errors",
    "preset_names",
    "presets",
    "q_k",
    "q_k_codes",
    "q_k_levels",
    "q_k_ste",
    "quantize",
    "quantize_activation",
    "quantize_dequantize",
    "quantize_model",
    "quantize_weight",
    "quantize_weights",
    "rank_layers",
    "report_tensor",
    "set_backend",
    "smooth",
    "smoothing_factors",
    "storage_cost",
    "unpack",
    "use_backend",
    "warm_up",
    "warm_up_in_background",
]

# The file readers (``quant_core.files``: GGUF, GPTQ, AWQ, compressed-tensors, bitsandbytes)
# import llama.cpp's ``gguf`` package: loaded on first use, not with every import.
_FILES = frozenset({"open_quantized", "open_quantized_bytes", "QuantizedFile", "AllowedRoots"})


def __getattr__(name: str) -> object:
    if name in _FILES:
        from . import files

        return getattr(files, name)
    raise AttributeError(f"module 'quant_core' has no attribute {name!r}")
