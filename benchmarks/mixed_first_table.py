"""The mixed-precision page's first table on a model folder: a tiny Llama (``transformers``
``LlamaConfig`` + ``save_pretrained``, as the tests make it) under the page's default
candidates, timed as a freshly started server meets it.

The process first runs the server's kernel warm-up (``quant_core.warmup.warm_up``, timed;
``--table-warm-up``: only the table's kernels, ``warm_up_table``, a minute less), as
``dashboard/launch.py`` does at start. Then, each with a new ``TableStore`` (nothing kept):

- ``in process``: the table in this (warm) process, once: the reference rows;
- ``local cold, before``: fresh local worker processes fed as before the warmed pool
  (``_before``: no kernel warm-up in the initializer, every task to the workers), what the
  page's first table on a folder paid: each worker starts, imports torch and compiles
  quant_core's kernels on its first weight;
- ``local cold``: ``fill_table`` on fresh workers now: each worker compiles the table's
  kernels in its initializer (``warm_up_table``) before its first task;
- ``prewarm`` then ``local prewarmed``: ``prewarm`` (what the page calls when it sees the
  folder), the seconds until a worker is ready (``pool_ready``), then the table;
- ``local warm``: the same pool again (what every later table pays);
- ``page``: a table of at most ``IN_PROCESS_MAX_ELEMENTS`` elements, the placement the
  page chooses (``small_table``: this process); a larger one's is ``local cold``.

Every path's rows are compared with the in-process ones, bit for bit (``record()`` less
the seconds). Run: ``PYTHONPATH=. python benchmarks/mixed_first_table.py [--workers N]
[--hidden 128 --layers 2] [--repeats 1] [--skip-cold | --in-process-only]
[--table-warm-up]``; ``--hidden 1024 --layers 4`` is 38.4M elements, over
``IN_PROCESS_MAX_ELEMENTS``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import torch

from dashboard.services.mixed import runner
from dashboard.services.mixed.runner import (
    Placement,
    TableStore,
    Where,
    fill_table,
    pool_ready,
    prewarm,
    shutdown_pools,
)
from dashboard.services.mixed.tasks import tasks_for
from dashboard.services.model.folder import open_checkpoint
from dashboard.services.model.roots import parse_roots
from quant_core.mixed import DEFAULT_CANDIDATES


def _rows(results):
    return {k: tuple(r.record() | {"seconds": None} for r in v.rows) for k, v in results.items()}


def _time(tasks, placement: Placement) -> tuple[float, dict]:
    start = time.perf_counter()
    results = fill_table(TableStore(), "k", tasks, placement)
    return time.perf_counter() - start, results


def _before(tasks, workers: int) -> dict:
    """The local workers as they were fed before ``prewarm``: a pool whose initializer
    compiles nothing (``runner._pool`` without candidates), every task submitted to it."""
    pool = runner._pool(workers)
    with runner._plain_main():
        futures = [pool.submit(runner.run_task, t) for t in tasks]
    return {r.tensor: r for r in (f.result() for f in futures)}


def _time_before(tasks, workers: int) -> tuple[float, dict]:
    start = time.perf_counter()
    results = _before(tasks, workers)
    return time.perf_counter() - start, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--skip-cold", action="store_true", help="no cold local worker pass")
    parser.add_argument(
        "--in-process-only", action="store_true", help="no local worker passes at all"
    )
    parser.add_argument(
        "--table-warm-up", action="store_true", help="warm only the table's kernels here"
    )
    args = parser.parse_args()

    from conftest import write_tiny_llama

    from quant_core.warmup import warm_up, warm_up_table

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_tiny_llama(root / "tiny", hidden=args.hidden, layers=args.layers)
        roots = parse_roots(str(root))
        ckpt = open_checkpoint(root / "tiny", roots)
        gen = torch.Generator().manual_seed(0)
        importance = {  # as the page's calibration gives: one positive value per input
            t.name: torch.rand(t.info.shape[1], generator=gen, dtype=torch.float64) + 0.5
            for t in ckpt.tensors
            if len(t.info.shape) == 2 and "embed" not in t.name
        }
        tasks = tasks_for(ckpt, DEFAULT_CANDIDATES, roots, importance)
        n = sum(t.n_elements for t in tasks)
        print(
            f"tiny Llama: {len(tasks)} weights, {n:,} elements x {len(DEFAULT_CANDIDATES)} "
            f"schemes; {args.workers} local workers; torch threads {torch.get_num_threads()}; "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        report = warm_up_table(DEFAULT_CANDIDATES) if args.table_warm_up else warm_up()
        print(f"server warm-up: {report.seconds:.1f} s, {report.graphs} graphs", flush=True)

        local = Placement(Where.LOCAL, args.workers)
        in_process = Placement(Where.IN_PROCESS)
        ref_s, ref = _time(tasks, in_process)
        print(f"in process (first): {ref_s:.2f} s", flush=True)
        want = _rows(ref)
        names = (
            "local cold, before",
            "local cold",
            "prewarm",
            "local prewarmed",
            "local warm",
        )
        times: dict[str, list[float]] = {n: [] for n in names}
        times["in process"] = [ref_s]
        for _ in range(args.repeats):
            for name in names:
                cold = name not in ("local warm", "local prewarmed")
                if (cold and args.skip_cold) or args.in_process_only:
                    continue
                if cold:
                    shutdown_pools()
                if name == "prewarm":
                    start = time.perf_counter()
                    prewarm(args.workers, DEFAULT_CANDIDATES, unweighted=False)
                    while not pool_ready(args.workers):
                        time.sleep(0.1)
                    times[name].append(time.perf_counter() - start)
                    print(f"prewarm: a worker ready after {times[name][-1]:.2f} s", flush=True)
                    continue
                if name == "local cold, before":
                    seconds, results = _time_before(tasks, args.workers)
                else:
                    seconds, results = _time(tasks, local)
                times[name].append(seconds)
                here = sum(r.worker.endswith(f":{os.getpid()}") for r in results.values())
                same = _rows(results) == want
                print(
                    f"{name}: {seconds:.2f} s, rows identical: {same}, "
                    f"{here} of {len(results)} weights in this process",
                    flush=True,
                )
        chosen = getattr(runner, "small_table", None)
        if chosen is not None and not args.in_process_only and chosen(n) is not None:
            shutdown_pools()  # a larger table's page placement is "local cold" above
            page = chosen(n)
            seconds, results = _time(tasks, page)
            print(
                f"page ({page.describe()}): {seconds:.2f} s, rows identical: "
                f"{_rows(results) == want}",
                flush=True,
            )
        shutdown_pools()
        for name, values in times.items():
            if values:
                print(f"median {name}: {statistics.median(values):.2f} s over {len(values)}")
        base = times["local cold, before"]
        for name in ("local cold", "local prewarmed", "local warm", "in process"):
            if base and times[name]:
                ratio = statistics.median(base) / statistics.median(times[name])
                print(f"local cold, before / {name}: x{ratio:.1f}")


if __name__ == "__main__":
    main()
