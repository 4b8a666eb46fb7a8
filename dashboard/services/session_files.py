"""What one browser session keeps that is not small, released together when it ends: the
bytes of its uploads (kept so that a file is still there after a visit to another page)
and its temporary files (the Whole model page reads an upload from disk).

Why: a closed tab's session used to keep both. Streamlit keeps a disconnected session
(its state, and the bytes its file widgets received) for ``server.disconnectedSessionTTL``
seconds in case the browser reconnects, so a kept copy of an upload doubled what each
closed session held (about 300 MiB for a 150 MB upload), and the Whole model page's
temporary files were never removed (three sessions left 300 MB on disk).
``dashboard.cache.session_files`` gives each session one ``SessionFiles``, released when
its websocket closes (Streamlit's session-scoped ``st.cache_resource`` calls
``on_release`` then); Streamlit's own copy goes when the session is dropped, after the
time-to-live set in ``.streamlit/config.toml``.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from pathlib import Path

__all__ = ["KeptUpload", "SessionFiles"]


class KeptUpload:
    """An upload kept for the session: ``file_id`` (Streamlit's, unique per upload),
    ``name`` (the file's name as uploaded) and ``data`` (its bytes; ``None`` once
    released). Kept in the session's state; ``SessionFiles.keep`` registers it so that
    the session's end drops the bytes even while the state itself lives on."""

    __slots__ = ("_data", "_lock", "file_id", "name")

    def __init__(self, file_id: str, name: str, data: bytes) -> None:
        if not isinstance(file_id, str) or not isinstance(name, str):
            raise TypeError(f"file_id and name must be str, got {file_id!r}, {name!r}")
        if not isinstance(data, bytes):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        self.file_id = file_id
        self.name = name
        self._data: bytes | None = data
        self._lock = threading.Lock()

    @property
    def data(self) -> bytes | None:
        """The bytes, or ``None`` once released."""
        with self._lock:
            return self._data

    @property
    def nbytes(self) -> int:
        """How many bytes it holds now (0 once released)."""
        data = self.data
        return 0 if data is None else len(data)

    def release(self) -> None:
        """Drop the bytes (for good: the session's next run asks for the file again unless
        its widget still holds it)."""
        with self._lock:
            self._data = None

    def __repr__(self) -> str:
        return f"KeptUpload({self.file_id!r}, {self.name!r}, {self.nbytes} bytes)"


class SessionFiles:
    """One session's temporary folder (made on first use, inside ``parent``) and the
    uploads registered with ``keep``. ``release`` deletes the folder and drops the
    uploads' bytes; afterwards ``folder`` and ``keep`` raise ``RuntimeError``. Thread-safe:
    the release comes from the server's event loop while the session's run may be
    using it."""

    def __init__(self, parent: Path) -> None:
        if not isinstance(parent, Path):
            raise TypeError(f"parent must be a Path, got {type(parent).__name__}")
        self._parent = parent
        self._folder: Path | None = None
        self._uploads: dict[int, KeptUpload] = {}
        self._released = False
        self._lock = threading.Lock()

    @property
    def released(self) -> bool:
        return self._released

    def folder(self) -> Path:
        """The session's private folder (mode 0700), made on the first call."""
        with self._lock:
            self._check()
            if self._folder is None:
                self._parent.mkdir(parents=True, exist_ok=True)
                self._folder = Path(tempfile.mkdtemp(prefix="session-", dir=self._parent))
            return self._folder

    def keep(self, upload: KeptUpload) -> KeptUpload:
        """Register ``upload`` (once; again is harmless) so that ``release`` drops its bytes;
        returns it."""
        if not isinstance(upload, KeptUpload):
            raise TypeError(f"upload must be a KeptUpload, got {type(upload).__name__}")
        with self._lock:
            self._check()
            self._uploads[id(upload)] = upload
        return upload

    @property
    def upload_bytes(self) -> int:
        """The bytes its registered uploads hold now."""
        with self._lock:
            return sum(u.nbytes for u in self._uploads.values())

    def release(self) -> None:
        """Delete the folder with everything in it and drop every registered upload's
        bytes. Idempotent."""
        with self._lock:
            self._released = True
            uploads, self._uploads = list(self._uploads.values()), {}
            folder, self._folder = self._folder, None
        for upload in uploads:
            upload.release()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def _check(self) -> None:
        if self._released:
            raise RuntimeError("this session's files were released (the session has ended)")
