"""The served process's settings: one core left to the browser unless QLAB_THREADS says,
huge pages for torch's large buffers unless the environment says, the long-lived heap
frozen once the warm-up is done, Nagle's algorithm off on the server's TCP sockets; none of
them outside ``streamlit run``."""

from __future__ import annotations

import gc
import os
import socket
import sys
import threading

import pytest
import torch

from dashboard import served


@pytest.mark.parametrize(
    ("cpus", "setting", "want"),
    [
        (2, None, 1),  # this project's machine: one core for the browser
        (8, None, 7),
        (1, None, 1),
        (None, None, 1),  # unknown count: one thread
        (2, "", 1),
        (2, "2", 2),
        (16, " 4 ", 4),
    ],
)
def test_served_threads(cpus: int | None, setting: str | None, want: int) -> None:
    assert served.served_threads(cpus, setting) == want


@pytest.mark.parametrize("setting", ["0", "-1", "two", "1.5"])
def test_a_bad_setting_is_named(setting: str) -> None:
    with pytest.raises(ValueError, match=f"QLAB_THREADS={setting!r}"):
        served.served_threads(2, setting)


def test_only_a_served_app_changes_torchs_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setattr(served, "_threads_set", False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert served.apply_served_threads() is None  # AppTest, pytest: torch's default kept
    assert torch.get_num_threads() == before
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)  # as under streamlit run
    monkeypatch.setenv("QLAB_THREADS", "nonsense")  # logged; the default is used
    try:
        assert served.apply_served_threads() == served.served_threads(os.cpu_count(), None)
        assert torch.get_num_threads() == served.served_threads(os.cpu_count(), None)
        assert served.apply_served_threads() is None  # once per process
    finally:
        torch.set_num_threads(before)


def test_huge_pages_only_when_served_and_not_over_a_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(served.HUGE_PAGES_ENV, raising=False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert not served.apply_served_huge_pages()  # AppTest, pytest: nothing set
    assert served.HUGE_PAGES_ENV not in os.environ
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)  # as under streamlit run
    assert served.apply_served_huge_pages()
    assert os.environ[served.HUGE_PAGES_ENV] == "1"
    monkeypatch.setenv(served.HUGE_PAGES_ENV, "0")  # the user's setting is kept
    assert not served.apply_served_huge_pages()
    assert os.environ[served.HUGE_PAGES_ENV] == "0"


def test_the_heap_is_frozen_once_warm_and_only_when_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(served, "_frozen", False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert served.freeze_after_warm_up(None) is None  # AppTest, pytest: nothing frozen
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)
    release = threading.Event()
    warming = threading.Thread(target=release.wait, daemon=True)
    warming.start()
    try:
        freezer = served.freeze_after_warm_up(warming)  # returns at once: the run goes on
        assert freezer is not None and freezer.is_alive()
        freezer.join(timeout=0.2)
        assert freezer.is_alive() and gc.get_freeze_count() == 0  # the warm-up still compiling
        assert served.freeze_after_warm_up(warming) is None  # once per process
        release.set()
        freezer.join(timeout=30)
        assert not freezer.is_alive()
        assert gc.get_freeze_count() > 0
    finally:
        release.set()
        gc.unfreeze()


def _nodelay(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def _streamlit_like_listener() -> socket.socket:
    # As Streamlit binds it: protocol number 0, on which asyncio leaves Nagle's algorithm on.
    listener = socket.socket(family=socket.AF_INET)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


def test_nagle_is_turned_off_on_the_listener_and_open_connections() -> None:
    with _streamlit_like_listener() as listener:
        with socket.create_connection(listener.getsockname()) as early:
            accepted, _ = listener.accept()
            with accepted:
                assert listener.proto == 0
                assert (_nodelay(listener), _nodelay(accepted)) == (0, 0)  # the default
                a, b = socket.socketpair()  # Unix sockets: not TCP, left alone
                with a, b:
                    fds = [listener.fileno(), accepted.fileno(), a.fileno(), 0]
                    assert served.set_tcp_nodelay(fds) == 2
                assert (_nodelay(listener), _nodelay(accepted)) == (1, 1)
                assert _nodelay(early) == 0  # the other end's socket was not in the list
                # The descriptors were only borrowed: both sockets still work.
                early.sendall(b"ping")
                assert accepted.recv(4) == b"ping"
        # A connection accepted later inherits the listener's setting (Linux, BSDs).
        with socket.create_connection(listener.getsockname()):
            later, _ = listener.accept()
            with later:
                assert _nodelay(later) == 1


def test_a_closed_descriptor_is_skipped() -> None:
    s = socket.socket(family=socket.AF_INET)
    fd = s.fileno()
    s.close()
    assert served.set_tcp_nodelay([fd]) == 0


def test_nodelay_only_when_served_and_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[None] = []
    monkeypatch.setattr(served, "set_tcp_nodelay", lambda: calls.append(None) or 3)
    monkeypatch.setattr(served, "_nodelay_set", False)
    monkeypatch.delitem(sys.modules, "streamlit.web.bootstrap", raising=False)
    assert served.apply_served_nodelay() is None
    monkeypatch.setitem(sys.modules, "streamlit.web.bootstrap", sys)
    assert served.apply_served_nodelay() == 3
    assert served.apply_served_nodelay() is None
    assert len(calls) == 1


def test_the_process_own_sockets_are_found() -> None:
    with _streamlit_like_listener() as listener:
        assert served.set_tcp_nodelay() >= 1
        assert _nodelay(listener) == 1


def test_nodelay_is_set_once_a_listener_appears() -> None:
    # The launcher's thread starts before the server binds: it waits for the listener.
    holder: dict[str, socket.socket] = {}

    def fds() -> list[int]:
        return [holder["listener"].fileno()] if "listener" in holder else []

    result: list[int] = []
    waiter = threading.Thread(
        target=lambda: result.append(served.set_nodelay_when_listening(30.0, 0.005, fds))
    )
    waiter.start()
    with _streamlit_like_listener() as listener:
        assert _nodelay(listener) == 0
        holder["listener"] = listener
        waiter.join(timeout=30.0)
        assert result == [1]
        assert _nodelay(listener) == 1
        with socket.create_connection(listener.getsockname()):
            accepted, _ = listener.accept()
            with accepted:
                assert _nodelay(accepted) == 1


def test_no_listener_no_change() -> None:
    # A connected socket is not a listener: nothing is set, and the wait ends in time.
    with (
        _streamlit_like_listener() as listener,
        socket.create_connection(listener.getsockname()) as client,
    ):
        accepted, _ = listener.accept()
        with accepted:
            got = served.set_nodelay_when_listening(0.05, 0.01, lambda: [accepted.fileno()])
            assert got == 0
            assert (_nodelay(accepted), _nodelay(client)) == (0, 0)
    assert served.set_nodelay_when_listening(0.02, 0.01, list) == 0


@pytest.mark.parametrize("bad", [0, -1.0, True, "1", float("nan")])
def test_a_bad_wait_is_named(bad: object) -> None:
    with pytest.raises(ValueError, match=r"timeout_s .*" + repr(bad).replace("'", ".")):
        served.set_nodelay_when_listening(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="poll_s"):
        served.set_nodelay_when_listening(1.0, bad)  # type: ignore[arg-type]
