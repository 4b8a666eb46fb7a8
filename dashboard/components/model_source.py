"""Which model file the whole-model page analyses: the bundled one or an upload."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from dashboard import cache
from dashboard.components.persist import PERSIST

_FILES = "_model_upload_path"


@dataclass(frozen=True)
class ModelFile:
    """A ``.safetensors`` file on disk; ``key`` identifies it for caches; ``bundled`` says
    whether it is all-MiniLM-L6-v2, whose embeddings the page can compute."""

    path: Path
    key: str
    label: str
    bundled: bool


def _store_upload(name: str, data: bytes) -> Path:
    """Write an upload to a private temporary file once, so it is read lazily (memory-mapped,
    one tensor at a time) like any model on disk."""
    digest = hashlib.sha256(data).hexdigest()
    kept = st.session_state.get(_FILES)
    if kept is not None and kept[0] == digest and Path(kept[1]).exists():
        return Path(kept[1])
    if kept is not None:
        # One file per session: the previous upload's folder goes when a new one arrives.
        shutil.rmtree(Path(kept[1]).parent, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix="qlab-model-"))
    path = folder / "upload.safetensors"
    path.write_bytes(data)
    st.session_state[_FILES] = (digest, str(path), name)
    return path


def model_picker() -> ModelFile | None:
    with st.sidebar:
        st.header("Model")
        which = st.radio(
            "Weights",
            ["bundled", "upload"],
            format_func=lambda w: (
                "all-MiniLM-L6-v2 (bundled)" if w == "bundled" else "Upload a .safetensors model"
            ),
            key="m_source",
            persist_state=PERSIST,
        )
        if which == "bundled":
            return ModelFile(cache.model_file(), "bundled", "all-MiniLM-L6-v2", True)
        upload = st.file_uploader("Model (.safetensors)", type=["safetensors"], key="m_upload")
        if upload is not None:
            path = _store_upload(upload.name, upload.getvalue())
            return ModelFile(path, f"upload:{path}", upload.name, False)
        kept = st.session_state.get(_FILES)
        if kept is not None and Path(kept[1]).exists():
            st.caption(f"Using **{kept[2]}**, uploaded earlier.")
            return ModelFile(Path(kept[1]), f"upload:{kept[1]}", kept[2], False)
        st.info("Upload a .safetensors file to analyse its linear layers.")
        return None
