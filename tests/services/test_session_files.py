"""A session's kept uploads and temporary folder: released together, once, for good."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dashboard.services.session_files import KeptUpload, SessionFiles


def test_release_drops_the_uploads_bytes_and_deletes_the_folder(tmp_path: Path) -> None:
    files = SessionFiles(tmp_path / "sessions")
    folder = files.folder()
    assert folder.parent == tmp_path / "sessions" and folder.stat().st_mode & 0o777 == 0o700
    assert files.folder() == folder  # one folder a session
    (folder / "model.safetensors").write_bytes(bytes(1000))
    a = files.keep(KeptUpload("id-a", "a.npy", b"x" * 300))
    b = files.keep(KeptUpload("id-b", "b.npy", b"y" * 200))
    files.keep(a)  # again: still counted once
    assert files.upload_bytes == 500 and a.data == b"x" * 300

    files.release()
    assert files.released and not folder.exists()
    assert a.data is None and b.data is None and a.nbytes == 0 and files.upload_bytes == 0
    files.release()  # idempotent
    with pytest.raises(RuntimeError, match="released"):
        files.folder()
    with pytest.raises(RuntimeError, match="released"):
        files.keep(KeptUpload("id-c", "c.npy", b"z"))


def test_an_upload_released_by_hand_and_bad_arguments(tmp_path: Path) -> None:
    up = KeptUpload("id", "f.csv", b"1,2")
    assert "f.csv" in repr(up) and "3 bytes" in repr(up)
    up.release()
    assert up.data is None
    with pytest.raises(TypeError, match="data must be bytes"):
        KeptUpload("id", "f", bytearray(b"1"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="file_id and name"):
        KeptUpload(1, "f", b"")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="parent must be a Path"):
        SessionFiles("/tmp")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="KeptUpload"):
        SessionFiles(tmp_path).keep(b"raw")  # type: ignore[arg-type]


def test_release_from_another_thread_while_uploads_are_kept(tmp_path: Path) -> None:
    """The server's event loop releases a session while its run may still keep uploads:
    every upload kept before the release loses its bytes, and none is kept after."""
    files = SessionFiles(tmp_path)
    kept: list[KeptUpload] = []
    refused = 0

    def run() -> None:
        nonlocal refused
        for i in range(2000):
            try:
                kept.append(files.keep(KeptUpload(f"id-{i}", "f", b"abc")))
            except RuntimeError:
                refused += 1

    thread = threading.Thread(target=run)
    thread.start()
    files.release()
    thread.join()
    assert len(kept) + refused == 2000
    assert all(u.data is None for u in kept)
