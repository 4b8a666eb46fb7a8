"""Reading the quantized files people download: GGUF (llama.cpp), GPTQ, AWQ,
compressed-tensors ``pack-quantized`` and bitsandbytes 4-bit Hugging Face folders, and the
explorer's own export.

    from quant_core.files import open_quantized, AllowedRoots

    f = open_quantized("/models/llama-q4_k_m.gguf", guard=AllowedRoots((Path("/models"),)))
    for t in f.tensors:                     # from the headers alone
        print(t.name, t.type_name, t.shape, t.nbytes, t.bits_per_weight)
    st = f.load("blk.0.attn_q.weight")      # StoredTensor
    st.quantized                            # the lab's QuantizedTensor (None: values only)
    st.dequantize()                         # float32, the file's shape
    f.mix()                                 # bytes per stored type

Never imports Streamlit.
"""

from __future__ import annotations

from .access import AllowedRoots, PathGuard, QuantizedFileError
from .compare import FileComparison, compare_with_original, rtn_config
from .entries import FileKind, StoredTensor, TensorEntry, TypeShare
from .lab_export import read_lab_export_bytes
from .reader import (
    DEFAULT_MAX_ELEMENTS,
    QuantizedFile,
    is_quantized_bytes,
    is_quantized_path,
    open_quantized,
    open_quantized_bytes,
)

__all__ = [
    "DEFAULT_MAX_ELEMENTS",
    "AllowedRoots",
    "FileComparison",
    "FileKind",
    "PathGuard",
    "QuantizedFile",
    "QuantizedFileError",
    "StoredTensor",
    "TensorEntry",
    "TypeShare",
    "compare_with_original",
    "is_quantized_bytes",
    "is_quantized_path",
    "open_quantized",
    "open_quantized_bytes",
    "read_lab_export_bytes",
    "rtn_config",
]
