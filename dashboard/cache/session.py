"""Each browser session's ``SessionFiles`` (``dashboard.services.session_files``): its
kept uploads and temporary files, released when the session's websocket closes.

A session-scoped ``st.cache_resource`` (Streamlit's public API for per-session resources)
is cleared when its session disconnects, and ``on_release`` runs then. The sessions'
folders sit in one folder per server process, removed when the process exits.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path

import streamlit as st

from dashboard.services.session_files import SessionFiles

__all__ = ["session_files", "sessions_folder"]

_lock = threading.Lock()
_folder: Path | None = None


def sessions_folder() -> Path:
    """This process's folder of session folders (``qlab-sessions-*`` in the temporary
    folder), made on the first call and removed at exit."""
    global _folder
    with _lock:
        if _folder is None:
            _folder = Path(tempfile.mkdtemp(prefix="qlab-sessions-"))
            atexit.register(shutil.rmtree, _folder, ignore_errors=True)
        return _folder


def _release(files: SessionFiles) -> None:
    files.release()


@st.cache_resource(scope="session", max_entries=1, show_spinner=False, on_release=_release)
def session_files() -> SessionFiles:
    """This session's uploads and temporary files (one per session)."""
    return SessionFiles(sessions_folder())
