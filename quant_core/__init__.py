"""quant_core: linear and non-linear quantization of PyTorch tensors, pure and testable.

    from quant_core import QuantConfig, Mode, PerGroup, quantize, error_metrics
    qt = quantize(x, QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(32)))
    m = error_metrics(x, qt.dequantize())

This package never imports Streamlit.
"""

from .algo_checks import AlgorithmWarning
from .algorithms import (
    Algorithm,
    WeightQuantResult,
    layer_output_error,
    quantize_weight,
    quantize_weights,
)
from .analysis import ClipStats, clip_bounds, clip_stats, code_counts, levels_used
from .awq import AWQOptions, AWQResult
from .config import (
    MAX_INT_BITS,
    MIN_INT_BITS,
    Format,
    Granularity,
    Mode,
    PerChannel,
    PerGroup,
    PerTensor,
    QuantConfig,
    RangeMethod,
    Rounding,
    ScaleDtype,
    ZeroPoint,
    int_range,
)
from .formats import NF4_VALUES, Codebook, codebook_for
from .gptq import GPTQOptions, GPTQResult
from .granularity import BlockLayout, layout_for
from .hqq import HQQOptions, HQQResult, HQQVariable
from .metrics import ErrorMetrics, error_metrics
from .model import LayerReport, ModelReport, QuantizedLinear, quantize_model, report_tensor
from .packing import pack, packed_size, unpack
from .quantize import QuantizedTensor, quantize
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
from .storage import StorageReport, storage_cost
from .validation import check_float_tensor

__all__ = [
    "MAX_INT_BITS",
    "MIN_INT_BITS",
    "NF4_VALUES",
    "AWQOptions",
    "AWQResult",
    "Algorithm",
    "AlgorithmWarning",
    "BlockLayout",
    "BlockRange",
    "ClipStats",
    "Codebook",
    "DoReFaResult",
    "ErrorMetrics",
    "Format",
    "GPTQOptions",
    "GPTQResult",
    "Granularity",
    "HQQOptions",
    "HQQResult",
    "HQQVariable",
    "LayerReport",
    "LevelQuantResult",
    "Mode",
    "ModelReport",
    "PerChannel",
    "PerGroup",
    "PerTensor",
    "QkVariant",
    "QuantConfig",
    "QuantizedLinear",
    "QuantizedTensor",
    "RangeMethod",
    "Rounding",
    "ScaleDtype",
    "StorageReport",
    "TeachingStep",
    "WeightQuantResult",
    "ZeroPoint",
    "check_float_tensor",
    "clip_bounds",
    "clip_stats",
    "code_counts",
    "codebook_for",
    "dorefa_quantize_weights",
    "error_metrics",
    "int_range",
    "layer_output_error",
    "layout_for",
    "levels_used",
    "minmax_levels_quantize",
    "pack",
    "packed_size",
    "q_k",
    "q_k_codes",
    "q_k_levels",
    "quantize",
    "quantize_model",
    "quantize_weight",
    "quantize_weights",
    "report_tensor",
    "storage_cost",
    "unpack",
]
