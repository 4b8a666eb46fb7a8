"""Which model the whole-model page analyses: the bundled one, an upload, or (when the
server allows it) a model folder on this machine.

The folder source is off unless ``QLAB_MODEL_ROOTS`` or ``model_roots`` in
``.streamlit/secrets.toml`` names the folders that may be read (``services/model/roots``);
off, the picker says in one line how to turn it on.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError

from dashboard import cache
from dashboard.components import url
from dashboard.components.persist import PERSIST
from dashboard.services.display.text import literal
from dashboard.services.files.open import QuantizedModel, path_key, quantized_path
from dashboard.services.model.checkpoint import Checkpoint
from dashboard.services.model.folder import snapshot_key
from dashboard.services.model.roots import ROOTS_ENV, ROOTS_SECRET, ModelRoots, parse_roots

__all__ = [
    "OTHER_PATH",
    "ModelFile",
    "ModelFolder",
    "folder_label",
    "folder_path_input",
    "model_picker",
    "model_query",
    "model_roots",
]

_FILES = "_model_upload_path"
OTHER_PATH = ""  # the folder choice "type a path" (no found folder has an empty path)
_LABELS = {
    "bundled": "all-MiniLM-L6-v2 (bundled)",
    # the uploader takes a quantized .gguf too: "a .safetensors model" turned those away
    "upload": "Upload a .safetensors or .gguf model",
    "folder": "Model folder on this machine",
}


@dataclass(frozen=True)
class ModelFile:
    """A ``.safetensors`` file on disk; ``key`` identifies it for caches; ``bundled`` says
    whether it is all-MiniLM-L6-v2, whose embeddings the page can compute."""

    path: Path
    key: str
    label: str
    bundled: bool


@dataclass(frozen=True)
class ModelFolder:
    """A model folder on this machine whose headers were read (``checkpoint``); its
    tensors are read one at a time by the streamed report. ``key``: the folder's content
    (every shard's name, size and time), for caches."""

    checkpoint: Checkpoint
    label: str

    bundled = False

    @property
    def key(self) -> str:
        return f"folder:{self.checkpoint.key}"


def model_roots() -> ModelRoots:
    """The allowed roots from ``QLAB_MODEL_ROOTS`` and the ``model_roots`` secret."""
    try:
        secret = st.secrets.get(ROOTS_SECRET)
    except StreamlitSecretNotFoundError:  # no secrets.toml: the usual case
        secret = None
    return parse_roots(os.environ.get(ROOTS_ENV), secret)


def _store_upload(name: str, data: bytes) -> Path:
    """Write an upload to a file in the session's private folder once, so it is read lazily
    (memory-mapped, one tensor at a time) like any model on disk. The folder goes when the
    session ends (``cache.session_files``)."""
    digest = hashlib.sha256(data).hexdigest()
    kept = st.session_state.get(_FILES)
    if kept is not None and kept[0] == digest and Path(kept[1]).exists():
        return Path(kept[1])
    if kept is not None:
        # One file per session: the previous upload goes when a new one arrives.
        Path(kept[1]).unlink(missing_ok=True)
    path = cache.session_files().folder() / f"model-{digest[:16]}.safetensors"
    path.write_bytes(data)
    st.session_state[_FILES] = (digest, str(path), name)
    return path


_SRC, _FOLDER = "m.src", "m.folder"
_MAX_PATH = 4096


def _seed_from_url(roots: ModelRoots) -> None:
    """On a session's first run (or after Back/Forward), put the link's model folder into
    the picker: ``m.src=folder&m.folder=PATH`` (``m.src=bundled`` or none: the default).
    The path is checked against the roots when the picker reads it, as a typed one is."""
    if not url.first_run("model_source"):
        return
    params = url.query_snapshot()
    src = params.get(_SRC)
    if src is None:
        return
    if src == "bundled":
        st.session_state["m_source"] = "bundled"
        return
    folder = params.get(_FOLDER) or ""
    if src != "folder":
        url.add_warning(f"Ignored the link's {_SRC}={src!r}: only bundled or folder are known.")
    elif not roots.enabled:
        url.add_warning(
            "The link names a model folder, but this server does not allow reading model "
            "folders; using the bundled model."
        )
    elif not folder or len(folder) > _MAX_PATH or any(ord(c) < 32 for c in folder):
        url.add_warning(f"Ignored the link's {_FOLDER}: not a folder path.")
    else:
        st.session_state["m_source"] = "folder"
        st.session_state["m_folder"] = OTHER_PATH
        st.session_state["m_folder_path"] = folder


def model_query() -> dict[str, str]:
    """The picked model source as the URL keeps it: ``{"m.src": "folder", "m.folder":
    PATH}`` for a model folder or file on this machine; nothing for the bundled model or an
    upload (an upload cannot travel in a link)."""
    if st.session_state.get("m_source") != "folder":
        return {}
    chosen = st.session_state.get("m_folder", OTHER_PATH)
    path = chosen if chosen != OTHER_PATH else str(st.session_state.get("m_folder_path", ""))
    path = path.strip()
    return {_SRC: "folder", _FOLDER: path} if path else {}


def model_picker() -> ModelFile | ModelFolder | QuantizedModel | None:
    """Draw the model source in the sidebar; the chosen model, or ``None`` (with a line in
    the page saying what is missing or wrong). A model folder is kept in the page's link
    (``model_query``; seeded from it on a session's first run)."""
    roots = model_roots()
    _seed_from_url(roots)
    problem: str | None = None
    with st.sidebar:
        st.header("Model")
        which = st.radio(
            "Weights",
            ["bundled", "upload", "folder"] if roots.enabled else ["bundled", "upload"],
            format_func=_LABELS.__getitem__,
            key="m_source",
            persist_state=PERSIST,
        )
        if not roots.enabled:
            st.caption(
                f"Model folders on this machine are off: set {ROOTS_ENV} (or {ROOTS_SECRET} "
                "in .streamlit/secrets.toml) to the folders that may be read."
            )
        for line in roots.problems:
            st.caption(f"Setting ignored: {literal(line)}.")
        if which == "bundled":
            return ModelFile(cache.model_file(), "bundled", "all-MiniLM-L6-v2", True)
        if which == "folder":
            path = folder_path_input(roots, "m_folder")
            if path:
                try:
                    if quantized_path(path, roots):  # a .gguf, a GPTQ/AWQ/... folder
                        qfile = cache.quantized_folder(path_key(path, roots), path, roots)
                        return QuantizedModel(qfile, qfile.name)
                    checkpoint = cache.model_checkpoint(snapshot_key(path, roots), path, roots)
                except ValueError as exc:  # PathRefused, CheckpointError, io's refusals
                    problem = str(exc)
                else:
                    return ModelFolder(checkpoint, folder_label(checkpoint.folder))
        else:
            try:
                chosen = _upload()
            except ValueError as exc:  # QuantizedFileError: a header that lies, a bad layout
                problem = str(exc)
            else:
                if chosen is not None:
                    return chosen
    if which == "folder":
        if problem is None:
            st.info(f"Give the path of a model folder inside {literal(roots.describe())}.")
        else:
            st.error(f"Model folder refused: {literal(problem)}")
    elif problem is None:
        st.info(
            "Upload a .safetensors file to analyse its linear layers, or a quantized file "
            "(.gguf, or a GPTQ/AWQ/bitsandbytes .safetensors) for its report."
        )
    else:
        st.error(f"Upload refused: {literal(problem)}")
    return None


def _upload() -> ModelFile | QuantizedModel | None:
    """The uploaded model, or ``None`` without one; ``ValueError`` (``QuantizedFileError``)
    for a file whose header the quantized-file reader refuses."""
    upload = st.file_uploader(
        "Model (.safetensors, .gguf)", type=["safetensors", "gguf"], key="m_upload"
    )
    if upload is not None:
        data = upload.getvalue()
        if cache.upload_is_quantized(upload.file_id, upload.name, data):
            return QuantizedModel(
                cache.quantized_upload(upload.file_id, upload.name, data), upload.name
            )
        path = _store_upload(upload.name, data)
        return ModelFile(path, f"upload:{path}", upload.name, False)
    kept = st.session_state.get(_FILES)
    if kept is not None and Path(kept[1]).exists():
        st.caption(f"Using **{literal(kept[2])}**, uploaded earlier.")
        return ModelFile(Path(kept[1]), f"upload:{kept[1]}", kept[2], False)
    return None


def folder_path_input(roots: ModelRoots, key: str) -> str:
    """The folder the user picked among those found under the roots (selectbox ``key``),
    or typed (text input ``{key}_path``)."""
    found = [str(p) for p in cache.model_folders(roots.key(), roots)]
    chosen = OTHER_PATH
    if found:
        chosen = st.selectbox(
            "Model folder",
            [*found, OTHER_PATH],
            format_func=lambda p: "another path…" if p == OTHER_PATH else _short(p, roots),
            key=key,
            persist_state=PERSIST,
            help="Folders under the allowed roots that hold model.safetensors, "
            "model.safetensors.index.json or .gguf files.",
        )
    if chosen != OTHER_PATH:
        return chosen
    return st.text_input(
        "Folder path (or a .safetensors or .gguf file)",
        key=f"{key}_path",
        persist_state=PERSIST,
        placeholder=str(roots.roots[0]),
        help=f"Inside {literal(roots.describe())}.",
    ).strip()


def _short(path: str, roots: ModelRoots) -> str:
    """``path`` relative to the root it lies in (the root itself as its own name)."""
    p = Path(path)
    for root in roots.roots:
        if p.is_relative_to(root):
            rel = p.relative_to(root)
            return f"{root.name}/{rel}" if rel.parts else str(root)
    return path


def folder_label(folder: Path) -> str:
    """A Hugging Face cache's ``models--org--name/snapshots/<sha>`` as ``org/name``;
    other folders by their name."""
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.removeprefix("models--").replace("--", "/")
    return folder.name or str(folder)
