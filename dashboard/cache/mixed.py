"""Caches of the mixed-precision page: the tables' results, where they run, the bundled
model's importance and held-out inputs, and a causal LM with its float reference.

See ``dashboard.cache`` for the keying rule."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
import torch

from dashboard.services.mixed.runner import Placement, TableStore, choose_placement
from dashboard.services.mixed.sources import EmbeddingJudgement, embedding_judgement
from quant_core import CALIBRATION_SENTENCES, HELD_OUT_SENTENCES, QuantConfig
from quant_core.calibration import run_sentences
from quant_core.mixed import importance_from_capture
from quant_core.mixed.causal import (
    CausalLM,
    Reference,
    accumulate_importance,
    load_causal_lm,
    reference,
    tokens,
)
from quant_core.mixed.texts import CALIBRATION_TEXT

from .sources import bundled_model, linear_inputs

__all__ = [
    "bundled_held_out",
    "bundled_importance",
    "bundled_judgement",
    "bundled_reference",
    "causal_importance",
    "causal_lm",
    "causal_reference",
    "placement",
    "tables",
]


@st.cache_resource(max_entries=1, show_spinner=False)
def tables() -> TableStore:
    """Task results per (model content, candidates, importance), the last 8 tables."""
    return TableStore(max_tables=8)


@st.cache_resource(max_entries=4, ttl=300, show_spinner="Looking for the Ray cluster…")
def placement(ray_address: str | None, local_workers: int) -> Placement:
    """Connected once per process (Ray's connection is the process's); a fallback is
    looked at again after 5 minutes."""
    return choose_placement(ray_address, local_workers)


@st.cache_resource(max_entries=1, show_spinner="Input importance on the calibration sentences…")
def bundled_importance() -> dict[str, torch.Tensor]:
    """``diag(XᵀX) / tokens`` of every linear layer of the bundled model on the
    calibration sentences, by weight name."""
    return dict(importance_from_capture(linear_inputs(CALIBRATION_SENTENCES)))


@st.cache_resource(max_entries=1, show_spinner=False)
def bundled_held_out() -> dict[str, torch.Tensor]:
    """The inputs of every linear layer on the held-out sentences, by layer name."""
    return dict(linear_inputs(HELD_OUT_SENTENCES).inputs)


@st.cache_resource(max_entries=1, show_spinner=False)
def bundled_reference() -> torch.Tensor:
    """The fp32 embeddings of the held-out sentences ``[18, 384]``."""
    return run_sentences(bundled_model(), HELD_OUT_SENTENCES)


@st.cache_resource(max_entries=1, show_spinner="Loading the model with transformers…")
def causal_lm(key: str, _folder: Path) -> CausalLM:
    """``key``: the folder's content key. Errors (``ModelUnavailable``) are not cached."""
    return load_causal_lm(_folder)


@st.cache_resource(max_entries=2, show_spinner="Running the float model on the held-out text…")
def causal_reference(key: str, _folder: Path, max_tokens: int) -> Reference:
    return reference(causal_lm(key, _folder), max_tokens=max_tokens)


@st.cache_resource(max_entries=2, show_spinner="Input importance on the calibration text…")
def causal_importance(key: str, _folder: Path, max_tokens: int) -> dict[str, torch.Tensor]:
    lm = causal_lm(key, _folder)
    ids = tokens(lm, CALIBRATION_TEXT, max_tokens)
    return accumulate_importance(lm.model, lambda: lm.model(input_ids=ids))


@st.cache_resource(max_entries=16, show_spinner="Running the model on the held-out sentences…")
def bundled_judgement(
    key: tuple[tuple[str, str], ...], _configs: dict[str, QuantConfig]
) -> EmbeddingJudgement:
    """``key``: (tensor, config name) pairs of ``_configs``, what each tensor is stored in
    (``configs_of``). The bundled model's held-out sentence embeddings with those
    weights fake-quantized, against fp32."""
    return embedding_judgement(bundled_model(), HELD_OUT_SENTENCES, _configs, bundled_reference())
