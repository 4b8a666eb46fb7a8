"""What the explorer lets users download: metrics as CSV, codes/scales/zero points as
safetensors, and the codes packed densely."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
from safetensors.torch import save

from quant_core import Format, pack

from .explore import Exploration

__all__ = ["metrics_csv", "metrics_frame", "packed_codes", "quantized_safetensors"]


def metrics_frame(exp: Exploration) -> pd.DataFrame:
    """One row per figure: error metrics, storage and clipping, with the scheme's name."""
    rows: dict[str, object] = {"scheme": exp.config.describe(), "shape": str(tuple(exp.qt.shape))}
    rows.update(dataclasses.asdict(exp.metrics))
    storage = dataclasses.asdict(exp.storage)
    rows.update({f"storage_{k}": v for k, v in storage.items()})
    rows.update(
        {
            "clipped_low": exp.clip.n_clipped_low,
            "clipped_high": exp.clip.n_clipped_high,
            "saturated": exp.clip.n_saturated,
            "levels_used": exp.levels_used,
            "levels_total": 1 << exp.config.bits,
        }
    )
    return pd.DataFrame({"metric": list(rows), "value": [str(v) for v in rows.values()]})


def metrics_csv(exp: Exploration) -> str:
    return metrics_frame(exp).to_csv(index=False)


def quantized_safetensors(exp: Exploration) -> bytes:
    """``codes``, ``scale`` and ``zero_point`` tensors; the scheme in the metadata."""
    cfg = exp.config
    meta = {
        "scheme": cfg.describe(),
        "format": cfg.format.value,
        "bits": str(cfg.bits),
        "mode": cfg.mode.value,
        "granularity": json.dumps(
            {"kind": type(cfg.granularity).__name__, **dataclasses.asdict(cfg.granularity)}
        ),
        "scale_dtype": cfg.scale_dtype.value,
        "dequantize": "s * (q - z)" if cfg.format is Format.INT else "s * value[q]",
    }
    tensors = {
        "codes": exp.qt.codes.contiguous(),
        "scale": exp.qt.scale.contiguous(),
        "zero_point": exp.qt.zero_point.contiguous(),
    }
    return save(tensors, metadata=meta)


def packed_codes(exp: Exploration) -> bytes:
    """The codes, row-major, packed at ``bits`` each, first code in the lowest bits."""
    return pack(exp.qt.codes, exp.config.bits).numpy(force=True).tobytes()
