"""Caches of the tensors pages show (synthetic, bundled, uploaded, model-folder tensors),
the bundled model and its captured linear inputs.

See ``dashboard.cache`` for the keying rule."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
import torch

from dashboard.services.io import (
    LoadedTensor,
    TensorInfo,
    list_safetensors_file,
    list_tensors,
    load_safetensors_file_tensor,
    load_tensor,
)
from dashboard.services.model.checkpoint import Checkpoint, read_tensor
from dashboard.services.model.embeddings import load_bundled_model
from dashboard.services.model.files import bundled_model_file
from dashboard.services.model.folder import find_checkpoints, open_checkpoint
from dashboard.services.model.roots import ModelRoots
from dashboard.services.sources.choice import SourceChoice
from dashboard.services.sources.prepared import PreparedSource, prepare
from dashboard.services.sources.synthetic import SyntheticSpec, make_synthetic
from dashboard.services.sources.typed import TypedValues, parse_typed_values
from quant_core import (
    ActivationCapture,
    capture_sentence_inputs,
)

__all__ = [
    "bundled_model",
    "folder_tensor",
    "linear_inputs",
    "model_checkpoint",
    "model_file",
    "model_folders",
    "model_tensor",
    "model_tensor_infos",
    "prepared",
    "synthetic_tensor",
    "typed_values",
    "upload_infos",
    "upload_tensor",
]


@st.cache_resource(max_entries=8, show_spinner=False)
def synthetic_tensor(key: str, _spec: SyntheticSpec) -> torch.Tensor:
    return make_synthetic(_spec)


@st.cache_resource(max_entries=8, show_spinner=False)
def typed_values(key: str, _text: str) -> TypedValues:
    """``key``: a digest of ``_text`` (typed text can be a megabyte: never the key itself).
    Raises ``TypedValuesError``, which is not cached: the next run parses again."""
    return parse_typed_values(_text)


@st.cache_resource(max_entries=1, show_spinner=False)
def model_file() -> Path:
    return bundled_model_file()


@st.cache_resource(max_entries=1, show_spinner=False)
def model_tensor_infos() -> tuple[TensorInfo, ...]:
    return list_safetensors_file(model_file())


@st.cache_resource(max_entries=8, show_spinner=False)
def model_tensor(name: str) -> LoadedTensor:
    return load_safetensors_file_tensor(model_file(), name)


@st.cache_resource(max_entries=4, show_spinner=False)
def upload_infos(file_id: str, filename: str, _data: bytes) -> tuple[TensorInfo, ...]:
    return list_tensors(filename, _data)


@st.cache_resource(max_entries=4, show_spinner=False)
def upload_tensor(file_id: str, filename: str, name: str | None, _data: bytes) -> LoadedTensor:
    return load_tensor(filename, _data, name)


@st.cache_resource(max_entries=8, show_spinner=False)
def prepared(
    key: str, _choice: SourceChoice, _tensor: torch.Tensor, label: str, notes: tuple[str, ...]
) -> PreparedSource:
    """``key``: ``repr`` of the source choice (the tensor it names never changes)."""
    return prepare(_choice, _tensor, label, notes)


@st.cache_resource(max_entries=1, show_spinner="Loading all-MiniLM-L6-v2…")
def bundled_model() -> torch.nn.Module:
    """The bundled sentence-transformer, loaded once per server (about 8 s)."""
    return load_bundled_model()


@st.cache_resource(max_entries=4, show_spinner="Running the model on the sentences…")
def linear_inputs(sentences: tuple[str, ...]) -> ActivationCapture:
    """The input of every linear layer of the bundled model on ``sentences`` (real tokens,
    ``[tokens, in_features]`` per layer; about 20 MB for 32 sentences). Shared by the
    Activations source, the layer page and the calibration of GPTQ/AWQ."""
    return capture_sentence_inputs(bundled_model(), sentences)


@st.cache_resource(max_entries=4, ttl=60, show_spinner=False)
def model_folders(key: str, _roots: ModelRoots) -> tuple[Path, ...]:
    """``key``: ``roots.key()``. The model folders under the allowed roots (looked for
    again after a minute: new downloads appear)."""
    return find_checkpoints(_roots)


@st.cache_resource(max_entries=8, show_spinner="Reading the model's headers…")
def model_checkpoint(key: str, _path: str, _roots: ModelRoots) -> Checkpoint:
    """``key``: ``folder.snapshot_key(path, roots)`` (the roots, the path and its files'
    sizes and times: a changed file reads the headers again). Errors are not cached."""
    return open_checkpoint(_path, _roots)


@st.cache_resource(max_entries=4, show_spinner="Reading the tensor…")
def folder_tensor(key: str, _checkpoint: Checkpoint, name: str) -> LoadedTensor:
    """``key``: ``checkpoint.key`` (its shards' names, sizes and times) and ``name``."""
    return read_tensor(_checkpoint, name)
