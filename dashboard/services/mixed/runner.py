"""Where the sensitivity table's tasks run: in this process, in local worker processes, or on
a Ray cluster, with results streamed back as each task finishes. No scheduler of our own:
``concurrent.futures`` hands tasks to local processes, Ray to its workers. A small table
(``small_table``: at most ``IN_PROCESS_MAX_ELEMENTS`` weight elements) runs in this process
whatever the setting: its kernels are warm, a fresh worker's are compiled first.

Warm local workers. A fresh process imports torch and quant_core (about 8 s) and Dynamo
traces each kernel graph the table uses again (tens of seconds: Inductor's compiled code
itself comes from the on-disk cache the server's warm-up filled, shared through the
default ``/tmp/torchinductor_$USER``). So the kept pool's initializer compiles the table's
kernels on small probes (``quant_core.warmup.warm_up_table``) before any task; ``prewarm``
starts the pool in the background (the page calls it when it sees a large folder, before
its calibration), ``pool_ready`` says when a worker is ready.

Ray is optional and off by default. It is used when ``QLAB_RAY_ADDRESS`` (environment) or
``ray_address`` (``.streamlit/secrets.toml``) names a cluster (``host:port``,
``ray://host:port``, or ``auto``), or ``local`` to start a Ray instance on this machine.
``ray`` is imported only then; missing, or a cluster that does not answer within
``CONNECT_TIMEOUT_S``, the work runs in local processes and ``Placement.message`` says why.

Retries and duplicates. A Ray task whose worker process dies is run again by Ray
(``max_retries``): its rows arrive once, from the attempt that finished. The caller's
``TableStore`` keeps the first result per tensor and drops any later one, so no row is
lost or counted twice even if a task ran twice. A local worker that dies breaks the pool
(``BrokenProcessPool``): the tasks not done are reported as failed, never silently lost.
"""

from __future__ import annotations

import contextlib
import enum
import multiprocessing
import os
import socket
import sys
import threading
import time
import types
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from quant_core.kernels import wait_for_warm_up, warm_up_running
from quant_core.mixed import Candidate

from ..display.counts import counted
from .tasks import TableTask, TaskResult, run_task

__all__ = [
    "CONNECT_TIMEOUT_S",
    "IN_PROCESS_MAX_ELEMENTS",
    "RAY_ENV",
    "RAY_SECRET",
    "WAITING_TEXT",
    "WARMING_TEXT",
    "WARM_UP_WAIT_S",
    "Placement",
    "TableStore",
    "TaskFailed",
    "Where",
    "choose_placement",
    "fill_table",
    "pool_ready",
    "prewarm",
    "ray_address_setting",
    "run_tasks",
    "shutdown_pools",
    "small_table",
]

RAY_ENV = "QLAB_RAY_ADDRESS"
RAY_SECRET = "ray_address"
CONNECT_TIMEOUT_S = 20.0
WARM_UP_WAIT_S = 600.0
"""How long a table run in this process waits for the server's kernel warm-up
(``quant_core.kernels.wait_for_warm_up``) before it runs eagerly."""
WAITING_TEXT = (
    "Waiting for the server's kernel warm-up (a minute or two after it starts): the table "
    "then runs compiled, several times faster than it would meanwhile"
)
"""What the page says while ``fill_table`` waits for the warm-up (``on_wait``)."""
WARMING_TEXT = (
    "The worker processes are starting and compiling their kernels (a minute or so on a "
    "busy machine, once per server); the table fills in once they are ready"
)
"""What the page says while the local workers warm up (``prewarm``, ``pool_ready``)."""
RAY_MAX_RETRIES = 3
IN_PROCESS_MAX_ELEMENTS = 32_000_000
"""A table of at most this many weight elements runs in this process whatever the setting
(``small_table``): this process's kernels are warm (the server's warm-up), while a fresh
worker process, local or Ray's, compiles its own before its first weight. Measured on the
shared 2-core machine (``benchmarks/mixed_first_table.py``, the 11 default candidates): a
tiny Llama folder's first table took 187 s in 2 fresh local workers and 0.7 to 4 s here; a
19.5M-element one 5.3 to 51 s here (median 20 s of 6 in two runs; about 1M elements/s).
32M elements is then about 30 s here, a sixth of what the fresh workers' compilation alone
took; a larger table goes to the workers (or Ray), whose pool is kept and whose
compilation is paid once, in the initializer (``prewarm``, started by the page as soon as
it sees the folder). A 38.4M-element table then took 18.8 s in 2 prewarmed workers against
102.5 s in fresh ones and 54.1 s here (2 torch threads), one run; another run gave 145 to
151 s here (``docs/maintainers.md``, December 7, warm local workers)."""
_PROJECT_ROOT = str(Path(__file__).resolve().parents[3])

TaskFn = Callable[[TableTask], TaskResult]


class Where(enum.Enum):
    IN_PROCESS = "in this process"
    LOCAL = "local worker processes"
    RAY = "Ray"


@dataclass(frozen=True)
class Placement:
    """Where the tasks run: ``where``, ``workers`` (processes, or the cluster's CPUs),
    ``address`` (Ray's), ``message``: why it is not where the setting asked (a fallback),
    or ``None``."""

    where: Where
    workers: int = 1
    address: str | None = None
    message: str | None = None
    reason: str | None = None
    """Why the work runs here though the setting says elsewhere (``small_table``: a small
    table), said by ``describe``; ``None`` where it runs as set."""

    def describe(self) -> str:
        if self.where is Where.RAY:
            return f"Ray cluster at {self.address} ({self.workers} CPUs)"
        if self.where is Where.LOCAL:
            return f"this machine, {counted(self.workers, 'worker process', 'worker processes')}"
        text = "this machine, in the app's own process"
        return f"{text} ({self.reason})" if self.reason else text


class TaskFailed(RuntimeError):
    """A task that raised or whose worker died for good; ``tensor`` names it, once: the
    measuring code's messages start with the name already (the page said "a.weight:
    a.weight: the weight holds NaN or Inf values")."""

    def __init__(self, tensor: str, message: str) -> None:
        prefix = f"{tensor}: "
        super().__init__(message if message.startswith(prefix) else prefix + message)
        self.tensor = tensor


def ray_address_setting(env: str | None, secret: object = None) -> str | None:
    """The Ray address the server is set to (the environment over the secret), or
    ``None`` (off)."""
    for value in (env, secret):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _probe(address: str, timeout: float) -> str | None:
    """``None`` when ``host:port`` (``ray://`` stripped) accepts a TCP connection within
    ``timeout`` seconds, else why not."""
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        return f"{address!r} is not host:port"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return f"no answer from {target} ({exc.strerror or exc})"


_CHECK = """
import sys
import ray
ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False)
print(int(ray.cluster_resources().get("CPU", 0)))
"""


def _check_cluster(address: str, timeout: float) -> str | None:
    """Connect to ``address`` from a child process first, ``None`` when it worked: a
    cluster that accepts connections but never completes the handshake makes Ray end the
    process that tried (after 60 s), which must not be the app's server."""
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHECK, address],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": _PROJECT_ROOT},
        )
    except subprocess.TimeoutExpired:  # run() has killed the child
        return f"Ray at {address} did not answer within {timeout:.0f} s"
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        last = lines[-1][:200] if lines else f"exit status {done.returncode}"
        return f"Ray at {address} refused the connection: {last}"
    return None


def _ray_init(address: str) -> str | None:
    """Connect this process to Ray at ``address`` (``local``: start an instance here);
    ``None`` on success, else why not."""
    import ray

    if ray.is_initialized():
        return None
    kwargs: dict[str, object] = {
        "include_dashboard": False,
        "log_to_driver": False,
        # workers find this project even where it is not installed
        "runtime_env": {"env_vars": {"PYTHONPATH": _PROJECT_ROOT}},
    }
    if address != "local":
        kwargs["address"] = address
    try:
        ray.init(**kwargs)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"{type(exc).__name__}: {first}"
    return None


def choose_placement(
    ray_address: str | None, local_workers: int, timeout: float = CONNECT_TIMEOUT_S
) -> Placement:
    """Ray at ``ray_address`` when it is set and answers; else ``local_workers`` local
    processes (0: this process), with the reason in ``message`` when Ray was asked for."""
    if isinstance(local_workers, bool) or not isinstance(local_workers, int) or local_workers < 0:
        raise ValueError(f"local_workers must be an int >= 0, got {local_workers!r}")
    local = Placement(Where.LOCAL, local_workers) if local_workers else Placement(Where.IN_PROCESS)
    if ray_address is None:
        return local
    try:
        import ray
    except ImportError:
        return _fallback(
            local, f"{RAY_ENV} is set but ray is not installed (pip install ray==2.60.0)"
        )
    if ray_address != "local" and not ray.is_initialized():
        problem = None if ray_address == "auto" else _probe(ray_address, min(timeout, 5.0))
        problem = problem or _check_cluster(ray_address, timeout)
        if problem is not None:
            return _fallback(local, f"Ray: {problem}")
    problem = _ray_init(ray_address)
    if problem is not None:
        return _fallback(local, f"Ray: {problem}")
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return Placement(Where.RAY, cpus, ray_address)


def small_table(n_elements: int, max_elements: int | None = None) -> Placement | None:
    """This process, with the reason in ``Placement.reason``, for a table whose weights
    hold ``n_elements`` elements in all (``sum(t.n_elements for t in tasks)``), at most
    ``max_elements`` (``None``: ``IN_PROCESS_MAX_ELEMENTS``, read at the call; this
    process's kernels are warm, a fresh worker's are compiled before its first weight);
    ``None`` for a larger table, which goes where the server is set to
    (``choose_placement``). The rows are the same bits either way: every placement runs
    ``run_task``."""
    if max_elements is None:
        max_elements = IN_PROCESS_MAX_ELEMENTS
    for name, value in (("n_elements", n_elements), ("max_elements", max_elements)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if n_elements > max_elements:
        return None
    reason = (
        f"a small model, {n_elements:,} weight elements: faster here, where the kernels are "
        "compiled already, than in worker processes that compile their own first"
    )
    return Placement(Where.IN_PROCESS, reason=reason)


def _fallback(local: Placement, why: str) -> Placement:
    return Placement(
        local.where, local.workers, None, f"{why}; running on {local.describe()} instead"
    )


def _init_worker(threads: int, candidates: tuple[Candidate, ...], unweighted: bool) -> None:
    """A new worker process: ``threads`` torch threads, then the table's kernels for
    ``candidates`` compiled, with input importance and, if ``unweighted``, without
    (``quant_core.warmup.warm_up_table``; no candidates: nothing): Dynamo
    traces them again in every process, while Inductor's code comes from the on-disk cache
    the server's warm-up filled. Its first task then runs as fast as its later ones.
    Nothing to compile under ``QLAB_COMPILE=0``."""
    import torch

    torch.set_num_threads(threads)
    if candidates:
        from quant_core.warmup import warm_up_table

        warm_up_table(candidates, unweighted)


def _ready() -> int:
    """A worker's first job from ``prewarm``: nothing (its initializer has run); its pid."""
    return os.getpid()


def run_tasks(
    tasks: Sequence[TableTask], placement: Placement, task_fn: TaskFn = run_task
) -> Iterator[TaskResult]:
    """Each task's result as it finishes (any order), on ``placement``. ``task_fn`` runs
    one task (``run_task``, or ``functools.partial(measure_task, reader)``): picklable for
    a worker process; Ray's ``ray.remote`` takes only a function (``run_task``).
    ``TaskFailed`` for a task that raised (or whose worker died, past Ray's retries);
    closing the iterator early (a page's rerun) cancels the tasks not started."""
    if not isinstance(placement, Placement):
        raise TypeError(f"placement must be a Placement, got {type(placement).__name__}")
    if not tasks:
        return
    if placement.where is Where.IN_PROCESS:
        for task in tasks:
            yield _call(task_fn, task)
    elif placement.where is Where.LOCAL:
        yield from _run_local(tasks, placement.workers, task_fn)
    else:
        yield from _run_ray(tasks, task_fn)


def _call(task_fn: TaskFn, task: TableTask) -> TaskResult:
    try:
        return task_fn(task)
    except (ValueError, OSError, RuntimeError) as exc:
        raise TaskFailed(task.tensor, str(exc)) from exc


_POOLS: dict[int, ProcessPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()
_WARMING: dict[int, list[Future[int]]] = {}
"""``prewarm``'s jobs by pool size: one done means a worker has compiled its kernels."""


def _pool(
    workers: int, candidates: Sequence[Candidate] = (), unweighted: bool = True
) -> ProcessPoolExecutor:
    """The process-wide pool of ``workers`` processes, made on first use and kept: a new
    process pays torch's import and the kernel compilation for ``candidates`` (and
    ``unweighted``: also without input importance; its
    initializer, ``_init_worker``; tens of seconds) once, not at every table. The pool
    made first keeps its candidates; a later table's other schemes compile on first use.
    A pool broken by a dead worker is replaced."""
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None or getattr(pool, "_broken", False):
            _WARMING.pop(workers, None)
            threads = max(1, (os.cpu_count() or 1) // workers)
            # spawn: a forked child would inherit the server's threads and torch's state
            pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(threads, tuple(candidates), unweighted),
            )
            _POOLS[workers] = pool
        return pool


def prewarm(workers: int, candidates: Sequence[Candidate] = (), unweighted: bool = True) -> None:
    """Start the pool of ``workers`` local processes now, in the background, so that each
    imports torch and compiles the kernels of ``candidates`` (the table's schemes), with
    input importance and, if ``unweighted``, without (``_init_worker``, tens of seconds)
    before the table needs them; returns at once. Once
    per pool: later calls, and calls once the pool is warm, do nothing (a broken pool is
    replaced and warmed again). The page calls it as soon as it sees a folder whose table
    goes to local workers."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    pool = _pool(workers, candidates, unweighted)
    with _plain_main():  # holds _POOLS_LOCK: one caller submits
        if workers not in _WARMING:
            # one job per worker: the executor starts a process per job it cannot give
            # to an idle one, up to ``workers``
            _WARMING[workers] = [pool.submit(_ready) for _ in range(workers)]


def pool_ready(workers: int) -> bool:
    """Whether a worker of the ``workers`` pool has started and compiled its kernels
    (``prewarm``'s first job is done); ``False`` before ``prewarm``."""
    with _POOLS_LOCK:
        jobs = _WARMING.get(workers, ())
        return any(j.done() and j.exception() is None for j in jobs)


def shutdown_pools() -> None:
    """Stop the kept worker processes (a benchmark or a test between its runs)."""
    with _POOLS_LOCK:
        for pool in _POOLS.values():
            pool.shutdown(wait=True, cancel_futures=True)
        _POOLS.clear()
        _WARMING.clear()


@contextlib.contextmanager
def _plain_main() -> Iterator[None]:
    """``__main__`` is a bare module while worker processes start. A spawned process runs
    its parent's ``__main__`` file again before its first task, and under Streamlit that
    file is the page's script (Streamlit runs each script as ``__main__``): a worker would
    run the page. Processes start inside ``submit``, so submitting happens in here."""
    with _POOLS_LOCK:
        saved = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            sys.modules["__main__"] = saved


def _run_local(tasks: Sequence[TableTask], workers: int, task_fn: TaskFn) -> Iterator[TaskResult]:
    """The tasks on the ``workers`` pool (``prewarm``ed with the tasks' candidates, if the
    page has not done it yet: each worker compiles the table's kernels before its first
    task). Nothing runs in this process meanwhile: on the shared 2-core machine this
    process measured the 38.4M-element table in 151 s, the 2 warm workers in 11 s, and
    this process taking the smallest tasks until a worker was ready made the first table
    118 s against 71 s without (``docs/maintainers.md``, December 7)."""
    prewarm(workers, tasks[0].candidates, any(t.importance is None for t in tasks))
    pool = _pool(workers)
    with _plain_main():
        futures: dict[Future[TaskResult], TableTask] = {pool.submit(task_fn, t): t for t in tasks}
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                task = futures[fut]
                try:
                    yield fut.result()
                except (ValueError, OSError, RuntimeError) as exc:
                    raise TaskFailed(task.tensor, f"{type(exc).__name__}: {exc}") from exc
    finally:
        for fut in pending:
            fut.cancel()


def _run_ray(tasks: Sequence[TableTask], task_fn: TaskFn) -> Iterator[TaskResult]:
    import ray
    from ray.exceptions import RayError

    remote = ray.remote(num_cpus=1, max_retries=RAY_MAX_RETRIES)(task_fn)
    refs = {remote.remote(t): t for t in tasks}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for ref in done:
                try:
                    yield ray.get(ref)
                except RayError as exc:
                    raise TaskFailed(refs[ref].tensor, str(exc).splitlines()[0]) from exc
    finally:
        for ref in pending:
            ray.cancel(ref)


@dataclass
class _Table:
    results: dict[str, TaskResult] = field(default_factory=dict)


class TableStore:
    """Task results by table key (the model's content, the candidates, the importance),
    the first result per tensor kept and later ones dropped, for at most ``max_tables``
    keys (least recently used first out). Thread-safe: sessions filling one key share it,
    and a rerun resumes where the last run stopped."""

    def __init__(self, max_tables: int = 8) -> None:
        if isinstance(max_tables, bool) or not isinstance(max_tables, int) or max_tables < 1:
            raise ValueError(f"max_tables must be a positive int, got {max_tables!r}")
        self.max_tables = max_tables
        self._tables: OrderedDict[str, _Table] = OrderedDict()
        self._lock = threading.Lock()

    def _table(self, key: str) -> _Table:
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _Table()
        self._tables.move_to_end(key)
        while len(self._tables) > self.max_tables:
            self._tables.popitem(last=False)
        return table

    def results(self, key: str) -> dict[str, TaskResult]:
        """A copy of ``key``'s results so far, by tensor."""
        with self._lock:
            return dict(self._table(key).results)

    def add(self, key: str, result: TaskResult) -> bool:
        """Keep ``result`` unless its tensor already has one; whether it was kept."""
        if not isinstance(result, TaskResult):
            raise TypeError(f"result must be a TaskResult, got {type(result).__name__}")
        with self._lock:
            table = self._table(key)
            if result.tensor in table.results:
                return False
            table.results[result.tensor] = result
            return True


def fill_table(
    store: TableStore,
    key: str,
    tasks: Sequence[TableTask],
    placement: Placement,
    *,
    on_progress: Callable[[dict[str, TaskResult], int], None] | None = None,
    on_wait: Callable[[], None] | None = None,
    every_s: float = 0.5,
    task_fn: TaskFn = run_task,
) -> dict[str, TaskResult]:
    """Every task's result in ``store`` under ``key``: the ones missing are run on
    ``placement`` and added as they finish. ``on_progress(results, total)`` before the
    first, at most every ``every_s`` seconds and after the last; an exception it raises
    (Streamlit stopping the script) stops the run, the results so far kept.

    In this process, a table with work left first waits for a kernel warm-up running in
    another thread (at most ``WARM_UP_WAIT_S``): the eager path it would take meanwhile
    is slower than the warm-up's remaining seconds (``wait_for_warm_up``). ``on_wait()``
    first, so the page can say why nothing moves."""
    have = store.results(key)
    todo = [t for t in tasks if t.tensor not in have]
    total = len(tasks)
    if on_progress is not None:
        on_progress(have, total)
    if todo and placement.where is Where.IN_PROCESS and warm_up_running():
        if on_wait is not None:
            on_wait()
        wait_for_warm_up(WARM_UP_WAIT_S)
    last = time.monotonic()
    runner = run_tasks(todo, placement, task_fn)
    try:
        for result in runner:
            store.add(key, result)
            now = time.monotonic()
            if on_progress is not None and now - last >= every_s:
                on_progress(store.results(key), total)
                last = now
    finally:
        runner.close()
    results = store.results(key)
    if on_progress is not None:
        on_progress(results, total)
    return results
