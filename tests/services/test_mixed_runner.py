"""dashboard.services.mixed: the sensitivity table's tasks on a generated sharded checkpoint,
run in this process, in local worker processes and on a local Ray instance (ray.init with
num_cpus=2): the same rows everywhere, including when a Ray worker is killed mid-task; the
allowed roots checked on the worker; an address that does not answer falls back at once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from dashboard.services.mixed.runner import (
    Placement,
    TableStore,
    TaskFailed,
    Where,
    choose_placement,
    fill_table,
    pool_ready,
    prewarm,
    run_tasks,
    shutdown_pools,
    small_table,
)
from dashboard.services.mixed.tasks import (
    TableTask,
    TaskResult,
    lookup_importance,
    run_task,
    tasks_for,
)
from dashboard.services.model.folder import open_checkpoint
from dashboard.services.model.roots import PathRefused, parse_roots
from dashboard.services.model.shards import write_sharded
from quant_core.mixed import candidate_named

pytestmark = pytest.mark.slow

CANDIDATES = tuple(candidate_named(n) for n in ("int8_pc", "int4_g128", "MXFP4"))
KILL_MARK = "QLAB_TEST_KILL_MARK"


def _t(*shape: int, seed: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def shards():
    for i in range(3):
        yield {
            f"model.layers.{i}.self_attn.q_proj.weight": _t(128, 128, seed=3 * i),
            f"model.layers.{i}.mlp.up_proj.weight": _t(256, 128, seed=3 * i + 1),
            f"model.layers.{i}.mlp.down_proj.weight": _t(
                128, 256, seed=3 * i + 2, dtype=torch.float32
            ),
            f"model.layers.{i}.input_layernorm.weight": torch.ones(128),
        }
    yield {
        "model.embed_tokens.weight": _t(300, 128, seed=99),
        "lm_head.weight": _t(300, 128, seed=98),
    }


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("roots")
    write_sharded(root / "model", shards(), 4)
    roots = parse_roots(str(root))
    return open_checkpoint(root / "model", roots), roots


@pytest.fixture(scope="module")
def reference_rows(checkpoint):
    ckpt, roots = checkpoint
    tasks = tasks_for(ckpt, CANDIDATES, roots)
    return {r.tensor: r.rows for r in run_tasks(tasks, Placement(Where.IN_PROCESS))}


SUMS = ("mse", "sqnr_db", "weighted_error", "energy")


def rows_only(rows):
    """The rows without their timings (``seconds`` differs from run to run) and without the
    error sums, which ``same`` compares on their own."""
    return tuple(r.record() | {"seconds": None} | dict.fromkeys(SUMS) for r in rows)


def same(results, reference) -> None:
    """The same rows, but for the error sums: quantize gives the same codes on either
    backend, and the sums (``quant_core.mixed.sums``) are float32 row sums where compiled
    (in this process's thread count) and float64 column sums where eager (the workers
    below), within ``(in + 2) 2^-24`` of each other (plus float64's ``n 2^-53``)."""
    assert set(results) == set(reference)
    for tensor, rows in reference.items():
        assert rows_only(results[tensor]) == rows_only(rows), tensor
        for got, want in zip(results[tensor], rows, strict=True):
            rel = (want.shape[1] + 2) * 2.0**-24 + want.n_elements * 2.0**-53
            for field in ("mse", "weighted_error", "energy"):
                assert getattr(got, field) == pytest.approx(getattr(want, field), rel=rel), (
                    tensor,
                    field,
                )
            # 10 log10(E / sse): each relative error moves it by at most 10/ln(10) * rel
            assert got.sqnr_db == pytest.approx(want.sqnr_db, abs=2 * 10 / 2.302585 * rel)


def test_tasks_cover_every_2d_weight_but_norms(checkpoint, reference_rows) -> None:
    ckpt, roots = checkpoint
    tasks = tasks_for(ckpt, CANDIDATES, roots)
    assert len(tasks) == 11  # 3 x (q, up, down) + embed_tokens + lm_head
    assert all(not t.tensor.endswith("layernorm.weight") for t in tasks)
    embed = next(t for t in tasks if t.tensor == "model.embed_tokens.weight")
    assert torch.equal(embed.importance, torch.full((128,), 1 / 300, dtype=torch.float64))
    assert next(t for t in tasks if t.tensor == "lm_head.weight").importance is None
    rows = reference_rows["model.layers.0.mlp.up_proj.weight"]
    assert [r.scheme for r in rows] == ["int8_pc", "int4_g128", "MXFP4"]
    assert all(r.ok and r.stored_bits == 256 * 128 * 16 for r in rows)
    assert lookup_importance(ckpt.tensor("lm_head.weight").info) is None


def _wait_ready(workers: int, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not pool_ready(workers):
        assert time.monotonic() < deadline, "the workers did not warm up"
        time.sleep(0.2)


def test_local_worker_processes_give_the_same_rows(
    checkpoint, reference_rows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warmed pool (``prewarm``, once: a second call starts nothing) runs every task in
    its workers. They run quant_core's eager kernels (the same codes bit for bit, the same
    error sums within their bound: see ``same``): compiling them in each new process costs
    tens of seconds, and ``QLAB_COMPILE=0`` is the fallback kept working here."""
    from dashboard.services.mixed import runner

    monkeypatch.setenv("QLAB_COMPILE", "0")
    shutdown_pools()
    ckpt, roots = checkpoint
    tasks = tasks_for(ckpt, CANDIDATES, roots)
    try:
        assert not pool_ready(2)
        prewarm(2)
        pool, jobs = runner._pool(2), runner._WARMING[2]
        prewarm(2)  # idempotent: the same pool, no new jobs
        assert runner._pool(2) is pool and runner._WARMING[2] is jobs and len(jobs) == 2
        _wait_ready(2)
        results = {r.tensor: r for r in run_tasks(tasks, Placement(Where.LOCAL, 2))}
    finally:
        shutdown_pools()
    assert not pool_ready(2)
    same({t: r.rows for t, r in results.items()}, reference_rows)
    assert all(r.worker.split(":")[1] != str(os.getpid()) for r in results.values())
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="workers must be an int >= 1"):
            prewarm(bad)


def test_a_broken_pool_is_replaced_and_warmed_again(
    checkpoint, reference_rows, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dashboard.services.mixed import runner

    monkeypatch.setenv("QLAB_COMPILE", "0")
    shutdown_pools()
    ckpt, roots = checkpoint
    tasks = tasks_for(ckpt, CANDIDATES, roots)
    try:
        prewarm(2)
        _wait_ready(2)
        old = runner._pool(2)
        pid = next(j.result() for j in runner._WARMING[2] if j.done())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while runner._pool(2) is old:  # the executor marks itself broken
            assert time.monotonic() < deadline, "the dead worker's pool was kept"
            time.sleep(0.2)
        assert not pool_ready(2)  # the new pool's jobs are not there yet
        prewarm(2)
        _wait_ready(2)
        results = {r.tensor: r for r in run_tasks(tasks, Placement(Where.LOCAL, 2))}
    finally:
        shutdown_pools()
    same({t: r.rows for t, r in results.items()}, reference_rows)
    assert all(r.worker.split(":")[1] not in (str(os.getpid()), str(pid)) for r in results.values())


def test_the_worker_checks_the_roots_again(checkpoint, tmp_path: Path) -> None:
    ckpt, roots = checkpoint
    task = tasks_for(ckpt, CANDIDATES, roots)[0]
    elsewhere = TableTask(**{**task.__dict__, "roots": (str(tmp_path),)})
    with pytest.raises(PathRefused, match="outside the allowed folders"):
        run_task(elsewhere)
    with pytest.raises(TaskFailed, match="outside the allowed folders"):
        list(run_tasks([elsewhere], Placement(Where.IN_PROCESS)))


def test_an_address_that_does_not_answer_falls_back_at_once() -> None:
    start = time.monotonic()
    placement = choose_placement("127.0.0.1:9", 2, timeout=5)  # discard port: refused
    assert time.monotonic() - start < 5
    assert placement.where is Where.LOCAL and placement.workers == 2
    assert "no answer from 127.0.0.1:9" in (placement.message or "")
    assert "running on this machine, 2 worker processes instead" in (placement.message or "")
    assert choose_placement(None, 0) == Placement(Where.IN_PROCESS)


def test_a_small_table_runs_in_this_process_and_says_why(
    checkpoint, reference_rows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most ``IN_PROCESS_MAX_ELEMENTS`` weight elements: this process (its kernels are
    warm), the reason in ``describe``; one element more: ``None`` (the server's setting)."""
    from dashboard.services.mixed import runner

    ckpt, roots = checkpoint
    tasks = tasks_for(ckpt, CANDIDATES, roots)
    n = sum(t.n_elements for t in tasks)
    placement = small_table(n, n)
    assert placement is not None and placement.where is Where.IN_PROCESS
    assert placement.message is None
    assert placement.describe() == (
        f"this machine, in the app's own process (a small model, {n:,} weight elements: "
        "faster here, where the kernels are compiled already, than in worker processes "
        "that compile their own first)"
    )
    assert small_table(n, n - 1) is None
    assert small_table(0, 0) is not None
    monkeypatch.setattr(runner, "IN_PROCESS_MAX_ELEMENTS", n - 1)  # read at the call
    assert small_table(n) is None
    monkeypatch.setattr(runner, "IN_PROCESS_MAX_ELEMENTS", n)
    assert small_table(n) == placement
    for bad in (-1, 1.5, True, "8"):
        with pytest.raises(ValueError, match="max_elements must be an int >= 0"):
            small_table(n, bad)
        with pytest.raises(ValueError, match="n_elements must be an int >= 0"):
            small_table(bad)
    # the rows are the in-process rows of every other placement's comparison
    results = fill_table(TableStore(), "k", tasks, placement)
    exact = {t: tuple(r.record() | {"seconds": None} for r in rows) for t, rows in
             reference_rows.items()}  # fmt: skip
    assert {
        t: tuple(r.record() | {"seconds": None} for r in res.rows) for t, res in results.items()
    } == exact
    assert Placement(Where.IN_PROCESS).describe() == "this machine, in the app's own process"


def test_the_store_keeps_one_result_per_tensor(checkpoint) -> None:
    ckpt, roots = checkpoint
    tasks = tasks_for(ckpt, CANDIDATES, roots)
    store = TableStore()
    seen: list[int] = []
    results = fill_table(store, "k", tasks[:4], Placement(Where.IN_PROCESS),
                         on_progress=lambda r, total: seen.append(len(r)), every_s=0)  # fmt: skip
    assert len(results) == 4 and seen[0] == 0 and seen[-1] == 4
    again = run_task(tasks[0])
    assert not store.add("k", again)  # a second result for a tensor is dropped
    assert store.results("k")[tasks[0].tensor] is results[tasks[0].tensor]
    # a rerun resumes: only the tasks missing are run
    more = fill_table(store, "k", tasks[:6], Placement(Where.IN_PROCESS))
    assert len(more) == 6 and more[tasks[0].tensor] is results[tasks[0].tensor]


def test_a_table_in_this_process_waits_for_the_kernel_warm_up(checkpoint, monkeypatch) -> None:
    """While a warm-up runs in another thread every kernel runs eagerly, which for the
    K-quants' searches is slower than waiting for it: the table's tasks start after it."""
    from quant_core.kernels import switch

    ckpt, roots = checkpoint
    tasks = tasks_for(ckpt, CANDIDATES, roots)[:2]
    monkeypatch.setattr(switch, "_warming", threading.Thread(target=lambda: None))
    threading.Timer(0.3, lambda: setattr(switch, "_warming", None)).start()
    warming_at_run: list[bool] = []

    def task_fn(task: TableTask) -> TaskResult:
        warming_at_run.append(switch._warming is not None)
        return run_task(task)

    waits: list[bool] = []
    results = fill_table(
        TableStore(),
        "k",
        tasks,
        Placement(Where.IN_PROCESS),
        task_fn=task_fn,
        on_wait=lambda: waits.append(switch._warming is not None),
    )
    assert len(results) == 2 and warming_at_run == [False, False]
    assert waits == [True]  # the page is told once, before the wait
    # no warm-up running: no wait and nothing said
    fill_table(
        TableStore(), "k", tasks, Placement(Where.IN_PROCESS), on_wait=lambda: waits.append(False)
    )
    assert waits == [True]


def kill_once(task: TableTask) -> TaskResult:
    """Run the task, but first kill this worker process (SIGKILL: no clean-up, as an
    out-of-memory kill) the first time the marked tensor is attempted."""
    mark = Path(os.environ[KILL_MARK])
    if task.tensor == "model.layers.1.mlp.up_proj.weight" and not mark.exists():
        mark.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return run_task(task)


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory):
    ray = pytest.importorskip("ray")
    mark = tmp_path_factory.mktemp("kill") / "killed"
    os.environ[KILL_MARK] = str(mark)
    root = str(Path(__file__).resolve().parents[2])
    env = {
        "PYTHONPATH": os.pathsep.join([root, str(Path(__file__).parent)]),
        KILL_MARK: str(mark),
        "QLAB_COMPILE": "0",  # as the local workers above
    }
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})  # fmt: skip
    try:
        yield mark
    finally:
        ray.shutdown()
        os.environ.pop(KILL_MARK, None)


def test_local_ray_gives_the_same_rows_even_when_a_worker_dies(
    local_ray: Path, checkpoint, reference_rows
) -> None:
    ckpt, roots = checkpoint
    placement = choose_placement("auto", 2)  # the instance this process already runs
    assert placement.where is Where.RAY and placement.message is None
    tasks = tasks_for(ckpt, CANDIDATES, roots)
    store = TableStore()
    results = fill_table(store, "ray", tasks, placement, task_fn=kill_once)
    assert local_ray.exists()  # a worker was killed mid-run, and Ray ran its task again
    killed = int(local_ray.read_text())
    retried = results["model.layers.1.mlp.up_proj.weight"]
    assert retried.worker.split(":")[1] != str(killed)
    same({t: r.rows for t, r in results.items()}, reference_rows)
    assert sum(len(r.rows) for r in results.values()) == len(tasks) * len(CANDIDATES)
