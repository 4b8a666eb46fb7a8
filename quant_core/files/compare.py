"""A file's quantization against the original weights, beside the lab's own round-to-
nearest of the same original under the same format: what GPTQ, AWQ or llama.cpp's imatrix
changed compared with plain rounding.

The original is brought into the stored tensor's order first: llama.cpp's converter
permutes the rows of Llama-family query/key weights (``gguf_names.to_gguf_rows``) and an
act-order checkpoint's codes are held with their columns sorted by group
(``StoredTensor.column_order``); then both are compared cell for cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..config import QuantConfig
from ..metrics import ErrorMetrics, error_metrics
from ..quantize import quantize
from ..quantized_tensor import QuantizedTensor
from .entries import StoredTensor
from .gguf_names import to_gguf_rows

__all__ = ["FileComparison", "compare_with_original", "rtn_config"]


@dataclass(frozen=True, eq=False)
class FileComparison:
    """``original`` and ``stored`` (the file's values), float32, both in the stored
    tensor's order (``order_note`` says when that differs from the original's);
    ``file_metrics``: the file's error; ``rtn``: the lab's round-to-nearest of the
    original under ``rtn_config`` and ``rtn_metrics`` its error, or ``None`` with
    ``rtn_unavailable`` saying why."""

    original_name: str
    original: torch.Tensor
    stored: torch.Tensor
    file_metrics: ErrorMetrics
    rtn_config: QuantConfig | None
    rtn: QuantizedTensor | None
    rtn_metrics: ErrorMetrics | None
    rtn_unavailable: str | None
    order_note: tuple[str, ...]


def rtn_config(stored: StoredTensor) -> QuantConfig | None:
    """The format the lab rounds the original in to compare: the stored tensor's own
    config (for a GGUF type, its ``Recipe.LLAMA_CPP`` config: llama.cpp's reference
    quantizer without an importance matrix); ``None`` for a type the lab does not model."""
    return None if stored.quantized is None else stored.quantized.config


def _check_finite(t: torch.Tensor, what: str) -> None:
    """``ValueError`` naming ``what`` and its count of NaN and Inf values, if any."""
    n_nan, n_inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
    if n_nan or n_inf:
        raise ValueError(
            f"{what} holds {n_nan:,} NaN and {n_inf:,} Inf values of {t.numel():,}: "
            "no error can be measured"
        )


def compare_with_original(
    stored: StoredTensor,
    original: torch.Tensor,
    original_name: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    rtn: bool = True,
) -> FileComparison:
    """Compare ``stored`` with ``original`` (the unquantized tensor named
    ``original_name``, any float dtype, ``stored.shape``); ``metadata``: the GGUF file's,
    for the converter's row permutation; ``rtn``: also round the original to nearest
    under the same format. ``ValueError`` when the shapes differ, or when the original or
    the file's values hold NaN or Inf (naming which, and how many)."""
    if not isinstance(original, torch.Tensor) or not original.is_floating_point():
        raise TypeError("original must be a float tensor")
    if tuple(original.shape) != tuple(stored.shape):
        raise ValueError(
            f"{original_name} has shape {list(original.shape)}; {stored.name} (the file's) has "
            f"{list(stored.shape)}: not the same weight"
        )
    x = original.detach().to(torch.float32).contiguous()
    notes = []
    if metadata is not None:
        x, note = to_gguf_rows(x, original_name, metadata)
        if note:
            notes.append(note)
    if stored.column_order is not None:
        x = stored.in_stored_order(x).contiguous()
        notes.append("columns sorted by act-order group, as the codes are held")
    if stored.quantized is not None:
        values = stored.quantized.dequantize().reshape(x.shape)
    else:
        values = stored.dequantize()
    try:
        file_metrics = error_metrics(x, values)
    except ValueError:
        # error_metrics names its arguments ("x_hat holds 1 NaN ... quantization needs
        # finite values"): the page showed that; name the tensors instead
        for what, t in (
            (f"the original's {original_name}", x),
            (f"the file's {stored.name}", values),
        ):
            _check_finite(t, what)
        raise
    cfg = rtn_config(stored)
    rounded = rtn_metrics = None
    why = None
    if not rtn:
        why = "not asked for"
    elif cfg is None:
        why = f"the lab does not model {stored.type_name}: no round-to-nearest to compare"
    elif not bool(torch.isfinite(x).all()):
        why = "the original holds NaN or Inf"
    else:
        try:
            rounded = quantize(x, cfg)
            rtn_metrics = error_metrics(x, rounded.dequantize())
        except ValueError as err:
            why = f"{cfg.describe()} does not fit this tensor ({err})"
    return FileComparison(
        original_name, x, values, file_metrics, cfg, rounded, rtn_metrics, why, tuple(notes)
    )
