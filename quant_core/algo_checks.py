"""Input checks and warnings shared by the weight-quantization algorithms (GPTQ, AWQ, HQQ)."""

from __future__ import annotations

import warnings

import torch

from .config import Format, QuantConfig, Rounding
from .validation import check_float_tensor

__all__ = [
    "AlgorithmWarning",
    "check_calibration",
    "check_config",
    "check_weight",
    "emit",
]


class AlgorithmWarning(UserWarning):
    """A weight-quantization algorithm ran, but on input it had to work around (too few
    calibration tokens, a Hessian that needed more dampening, ...). The same messages are
    kept in the result's ``warnings`` so a UI can show them."""


def emit(messages: list[str], message: str) -> None:
    """Record ``message`` for the result and raise it as an ``AlgorithmWarning``."""
    messages.append(message)
    warnings.warn(message, AlgorithmWarning, stacklevel=3)


def check_weight(w: object, name: str = "w") -> torch.Tensor:
    """``w`` if it is a finite 2-D float tensor ``[out_features, in_features]``."""
    w = check_float_tensor(w, name)
    if w.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D linear weight [out_features, in_features], "
            f"got shape {tuple(w.shape)}"
        )
    return w


def check_calibration(x: object, in_features: int, name: str = "calibration") -> torch.Tensor:
    """``x`` if it is a finite 2-D float tensor ``[tokens, in_features]`` with at least one
    token; a batch ``[batch, seq, in_features]`` must be flattened (and its padding
    dropped) by the caller."""
    if x is None:
        raise ValueError(
            f"{name} is required: pass the layer's inputs [tokens, {in_features}] "
            "(e.g. from quant_core.calibration.capture_sentence_inputs)"
        )
    x = check_float_tensor(x, name)
    if x.dim() != 2:
        raise ValueError(
            f"{name} must be 2-D [tokens, in_features], got shape {tuple(x.shape)}; "
            "flatten batch and sequence dimensions (without padding tokens) first"
        )
    if x.shape[1] != in_features:
        raise ValueError(
            f"{name} has {x.shape[1]} features per token but the weight has "
            f"{in_features} input features"
        )
    return x


def check_config(cfg: object, algorithm: str, *, integer_only: bool) -> QuantConfig:
    """``cfg`` if it is a ``QuantConfig`` the algorithm supports: nearest rounding, and an
    integer format when ``integer_only``."""
    if not isinstance(cfg, QuantConfig):
        raise TypeError(f"cfg must be a QuantConfig, got {type(cfg).__name__}")
    if integer_only and cfg.format is not Format.INT:
        raise ValueError(
            f"{algorithm} quantizes onto an integer grid; format {cfg.format.value} is not "
            "supported (use format=int, or RTN/AWQ for codebook formats)"
        )
    if cfg.rounding is not Rounding.NEAREST:
        raise ValueError(
            f"{algorithm} needs rounding=nearest (its updates assume the deterministic "
            f"nearest grid point), got rounding={cfg.rounding.value}"
        )
    return cfg
