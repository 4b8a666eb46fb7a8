"""An activation explored under static ranges: calibrated on some sentences' inputs of a
layer, applied to other sentences' inputs of the same layer."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quant_core import ActivationRanges, QuantConfig, calibrate_ranges
from quant_core.activations import check_activation

from ..explorer.explore import Exploration, explore

__all__ = ["StaticExploration", "static_exploration"]


@dataclass(frozen=True, eq=False)
class StaticExploration:
    """``exploration``: the held-out matrix quantized with ``ranges`` (its ``clip`` counts
    the held-out values beyond them); ``ranges``: calibrated on ``ranges.n_tokens`` tokens."""

    exploration: Exploration
    ranges: ActivationRanges

    @property
    def clipped_fraction(self) -> float:
        clip = self.exploration.clip
        return clip.n_clipped / clip.n_elements if clip.n_elements else 0.0


def static_exploration(
    calibration: torch.Tensor, matrix: torch.Tensor, cfg: QuantConfig
) -> StaticExploration:
    """Calibrate ``cfg``'s ranges on ``calibration`` ``[tokens', F]`` and explore ``matrix``
    ``[tokens, F]`` (the same layer's inputs on other sentences) with them.

    Raises ``ValueError`` for a per-token or per-group ``cfg`` (ranges of other tokens do
    not exist for new ones: static ranges are per-tensor or per-feature) and for matrices
    with different feature counts.
    """
    calibration = check_activation(calibration, "calibration")
    matrix = check_activation(matrix, "matrix")
    if calibration.shape[1] != matrix.shape[1]:
        raise ValueError(
            f"calibration has {calibration.shape[1]} features and the matrix "
            f"{matrix.shape[1]}: static ranges apply to the same layer's inputs"
        )
    ranges = calibrate_ranges(calibration, cfg)
    return StaticExploration(explore(matrix, cfg, ranges=ranges.ranges), ranges)
