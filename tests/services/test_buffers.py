"""BufferPool: a buffer is handed out again only when nothing else holds it or its memory."""

from __future__ import annotations

import threading

import pytest
import torch

from dashboard.services.explorer import buffers
from dashboard.services.explorer.buffers import BufferPool
from dashboard.services.explorer.explore import explore
from quant_core import Mode, PerGroup, QuantConfig

needs_count = pytest.mark.skipif(buffers._ALONE is None, reason="torch has no storage use count")


def test_a_buffer_is_float32_contiguous_of_the_shape() -> None:
    t = BufferPool().take((3, 5))
    assert t.dtype == torch.float32 and t.shape == (3, 5) and t.is_contiguous()


@needs_count
def test_a_buffer_comes_back_once_its_holder_lets_go() -> None:
    pool = BufferPool()
    first = pool.take((4, 8))
    second = pool.take((4, 8))  # the first is held: a new one
    assert second.data_ptr() != first.data_ptr()
    ptr = first.data_ptr()
    del first
    again = pool.take((4, 8))
    assert again.data_ptr() == ptr
    assert pool.take((4, 8)).data_ptr() not in (ptr, second.data_ptr())


@needs_count
@pytest.mark.parametrize(
    "keep",
    [
        lambda t: t[1:],  # a view
        lambda t: t.view(-1),
        lambda t: t.numpy(),  # an array over the same memory
        lambda t: [t],  # the tensor itself, elsewhere
    ],
    ids=["slice", "view", "numpy", "reference"],
)
def test_a_buffer_whose_memory_is_still_shared_is_not_handed_out(keep) -> None:
    pool = BufferPool()
    t = pool.take((4, 8))
    ptr = t.data_ptr()
    kept = keep(t)
    del t
    assert pool.take((4, 8)).data_ptr() != ptr
    del kept
    assert pool.take((4, 8)).data_ptr() == ptr


@needs_count
def test_free_buffers_of_another_shape_are_let_go() -> None:
    pool = BufferPool()
    pool.take((4, 8))  # dropped at once: free
    assert len(pool) == 1
    held = pool.take((2, 2))
    assert len(pool) == 1 and held.shape == (2, 2)


@needs_count
def test_the_pool_keeps_track_of_at_most_its_limit() -> None:
    pool = BufferPool(limit=2)
    held = [pool.take((2, 2)) for _ in range(5)]
    assert len(pool) == 2
    assert len({t.data_ptr() for t in held}) == 5  # in use: never shared


def test_bad_limit_is_refused() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="limit must be a positive int"):
            BufferPool(limit=bad)


@needs_count
def test_threads_never_get_one_buffer_at_once() -> None:
    """Sessions take buffers from threads of their own: a buffer is only ever in one
    holder's hands (each thread writes its id and finds it there after a pause)."""
    pool = BufferPool(limit=4)
    errors: list[str] = []

    def work(me: int) -> None:
        for _ in range(200):
            t = pool.take((16, 16))
            t.fill_(me)
            threading.Event().wait(0.0001)
            if not bool((t == me).all()):
                errors.append(f"thread {me} saw another's values")
            del t

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_explore_writes_the_dequantized_matrix_into_out() -> None:
    x = torch.randn(32, 64)
    cfg = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(32))
    buf = torch.full((32, 64), float("nan"))
    exp = explore(x, cfg, out=buf)
    assert exp.dequantized is buf
    assert torch.equal(buf, explore(x, cfg).dequantized)
