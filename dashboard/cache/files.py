"""Caches of quantized files (listings, stored tensors, their explorations and originals).

See ``dashboard.cache`` for the keying rule: a file's listing is keyed on its path and its
files' sizes and times (``services.files.open.path_key``) or an upload's id; a tensor on
the file's ``key`` and the tensor's name."""

from __future__ import annotations

import streamlit as st
import torch

from dashboard.services.files.open import is_quantized_upload, open_path, open_upload
from dashboard.services.files.report import FileReportStore
from dashboard.services.files.tensor import FileExploration, FileTensor, file_exploration
from dashboard.services.model.roots import ModelRoots
from dashboard.services.sources.choice import SourceChoice
from dashboard.services.sources.prepared import PreparedSource, prepare_file
from quant_core.files import QuantizedFile

__all__ = [
    "file_reports",
    "file_tensor",
    "quantized_exploration",
    "quantized_folder",
    "quantized_prepared",
    "quantized_upload",
    "upload_is_quantized",
]


@st.cache_resource(max_entries=8, show_spinner="Reading the file's headers…")
def quantized_folder(key: str, _path: str, _roots: ModelRoots) -> QuantizedFile:
    """``key``: ``path_key(path, roots)``. Errors are not cached."""
    return open_path(_path, _roots)


@st.cache_resource(max_entries=4, show_spinner="Reading the file's headers…")
def quantized_upload(file_id: str, filename: str, _data: bytes) -> QuantizedFile:
    return open_upload(filename, _data)


@st.cache_resource(max_entries=8, show_spinner=False)
def upload_is_quantized(file_id: str, filename: str, _data: bytes) -> bool:
    return is_quantized_upload(filename, _data)


@st.cache_resource(max_entries=4, show_spinner="Decoding the tensor…")
def file_tensor(key: str, _qfile: QuantizedFile, name: str) -> FileTensor:
    """``key``: the file's ``key``."""
    return FileTensor(_qfile, _qfile.load(name))


@st.cache_resource(max_entries=8, show_spinner=False)
def quantized_prepared(
    key: str, _choice: SourceChoice, _ft: FileTensor, label: str
) -> PreparedSource:
    """``key``: the file's key and the tensor's name."""
    return prepare_file(_choice, _ft, label, key)


@st.cache_resource(max_entries=4, show_spinner="Comparing with the original…")
def quantized_exploration(
    key: str, _ft: FileTensor, _original: torch.Tensor | None, original_name: str | None
) -> FileExploration:
    """``key``: the tensor's key and the original's (its file's key and name)."""
    return file_exploration(_ft, _original, original_name)


@st.cache_resource(max_entries=1, show_spinner=False)
def file_reports() -> FileReportStore:
    """The rows of whole-file reports, kept across reruns and sessions."""
    return FileReportStore()
