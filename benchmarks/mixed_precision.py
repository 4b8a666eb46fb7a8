"""Mixed precision at scale: the sensitivity table of a 1B-parameter bf16 checkpoint under 6
candidate schemes against a plain ``safe_open`` read of the same tensors, with 1 and 2 local
worker processes and through a local Ray instance; the allocation of 1,000 tensors x 10
schemes; each default candidate's rate on one weight; KL divergence and perplexity on a tiny
causal LM and on a 0.5B-scale one.

The 6 schemes (``SIX``) are int8 per-channel, int4 g128 and four more of the lab's recipe
(NF4 g64, FP8 E4M3 per channel, FP4 g32, int3 g64): the shipped formats' llama.cpp recipes
are slower here (the K-quants 25M to 35M elements per second on one thread, after their
searches moved to tiles; a few million before), so a pass of them over 1B parameters takes
minutes.

Run: ``PYTHONPATH=. python benchmarks/mixed_precision.py`` (about 2 GB of disk in a
temporary folder, removed afterwards; ``--skip-ray`` without Ray, ``--skip-05b`` without the
0.5B model, ``--skip-lm`` without either causal LM, ``--layers 1`` for a 0.20B checkpoint,
``--task-only`` for one table task only; ``--skip-lm --skip-rates`` for the table alone,
about 5 minutes).

The checkpoint is ``checkpoint.py``'s: 5 decoder layers of Llama-7B's shape, bf16, one
shard per layer, 1.01B parameters. Before each timed pass the shards' pages are dropped
from the page cache, so every pass reads from disk; the plain read is timed so (cold) and
again at once (warm, from the page cache), and every table time is printed as a ratio to
both. Each runner's worker processes are
started and their kernels compiled on a small tensor before the clock starts (a process's
first quantize compiles quant_core's kernels, about 20 s here; the page keeps its workers).

Measured on this project's 2-core machine while it was shared (load average 8 to 19), so
absolute times are several times what an idle machine gives. Before ``quant_core.mixed.sums``
(1.01B checkpoint): plain read 10.7 s; the table with 1 local worker 354 s (x33 the read,
17.2M element-schemes/s), 2 local workers 440 s (x41), local Ray with 2 CPUs 305 s (x29):
each cell's float64 column sums cost about twice the quantize and dequantize.

Now each scheme's error sums are one compiled pass over ``W`` and ``Ŵ`` (float32 row sums,
float64 total; ``sums``' docstring bounds the difference), a codebook format's pass decodes
its codes itself (no ``Ŵ`` stored), an integer format's ``Ŵ`` goes into one reused buffer,
and ``W`` is converted once. One task, 4096 x 11008 bf16 x 6 schemes, the versions
alternating in one process (median of 5, load 4.4): original 2.25 s (120M
element-schemes/s), with the one-pass sums 0.98 s (x2.3), with the codebook pass too 0.80 s (336M
element-schemes/s; x1.22 more, x2.8 in all); earlier runs at load 8 to 12 gave x1.3 to x2.3
for the sums alone. The error sums alone, per scheme: x5 to x23 (``task_benchmark``). One
task read + table: x28 to x36 its plain read (a read from the page cache, 0.09 to 0.22 s).
Whole ``--layers 1`` checkpoint (0.20B parameters, 7 weights), 1 local worker: x23 to x26
the read (55M to 128M element-schemes/s) against the original's x18 to x56 in runs minutes
apart; these runs swing by x2 with the machine's other work (a 2-worker run gave x14 one
time and x41 another), so the same-process task figures above are the ones to compare.

Now (``sums.scheme_error_sums``) each scheme is one compiled pass from ``W`` to its two
error sums: the code, its dequantized value and ``D²`` per element, nothing stored, on
block extremes shared by the 6 schemes (one pass at g32; g64, g128 and per channel from
it). The same process, versions alternating (2-core AMD EPYC, load 1.8), one task
4096 x 11008: without the fused pass 2.11 s (x27.6 the warm read, x18.3 the cold one),
with it 1.22 s (x16.0 the warm read; cold read + table 1.26 s = x10.9 the cold read);
x1.73. The whole 1.01B checkpoint (same run): plain read 2.7 s cold (evicted with
``POSIX_FADV_DONTNEED``), 1.9 s warm; 1 local worker 60.9 s (x22 cold, x32 warm), 2 local
workers 76.1 s (x28, x40), local Ray with 2 CPUs 31.2 s (x11.5 cold, x16.2 warm).

Two local workers slower than one: the workers were warmed on 256 x 1024 weights only, and
Dynamo's dynamic kernels kept guards from them (a row of at most 4096 values; 32 blocks of
32 to a row, equal sizes that it merges), so each worker's first real weight compiled again
inside the timed pass (its first task 7 to 9 s against 1.5 s in the next pass, 0.20B
checkpoint). ``warm`` now adds a pass of weights with rows of 11008; both passes then take
the same time. The 1.01B checkpoint after that, quiet machine (load 1.4): plain read
1.5 s cold, 0.9 s warm; 1 local worker 18.0 s (x11.7 cold, x19.1 warm), 2 local workers
13.5 s (x8.8, x14.3), local Ray with 2 CPUs 10.9 s (x7.1, x11.6); one task 0.61 s with a
cold read, x5.9 the cold read (0.102 s).

The target of 3x the read is not met. What remains per task (in-process profile): the
fused passes ~0.63 s, of which the three codebook formats take ~0.5 s (NF4's 15 midpoint
compares to encode and a 15-select tree to decode, FP4's 7 and its bits, FP8's float8
cast: compute, not memory; the integer formats' passes run at ~35 ms, about 2 reads of
``W`` in float32), the per-block parameters ~0.09 s (eager, on 0.7M to 1.4M blocks), the
energy and shared extremes ~0.08 s, and the bf16 -> float32 copy, Python and allocation
the rest. A read is one pass over 2 bytes per element; the table is at least 6 passes of
~10 to 60 vector operations per element, so on 2 cores it is compute-bound. Both scale
with the parameters, so a 70B checkpoint changes the ratio only through the disk: against
this machine's cold read (0.74 GB/s, 370M elements/s) 3x needs ~120M elements/s, 3.7x
Ray's 32M; a disk at ~0.2 GB/s (a 70B checkpoint on a network volume) would put Ray's
rate at ~3x its read.

Allocation of 1,000 x 10: 17 to 75 ms (one run 175 ms at load 19.5), of which solving is
under 1 ms. KL and perplexity: the tiny Llama 0.6 to 4.9 s on 256 tokens; the 0.5B-scale
model 82 s (its float forward 48 s).

The 0.5B-scale model is Qwen2-0.5B's shape (hidden 896, 24 layers, MLP 4864, 14 heads with
2 key-value heads, a 151,936-token vocabulary, tied embeddings: 494M parameters) built by
``transformers`` with random weights (nothing is downloaded), judged on 256 tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from checkpoint import drop_cache, layers, plain_read

from dashboard.services.mixed.runner import Placement, TableStore, Where, fill_table, shutdown_pools
from dashboard.services.mixed.tasks import TableTask, tasks_for
from dashboard.services.model.folder import open_checkpoint
from dashboard.services.model.roots import parse_roots
from dashboard.services.model.shards import write_sharded
from quant_core import Format, Mode, PerChannel, PerGroup, QuantConfig, ScaleDtype
from quant_core.mixed import (
    DEFAULT_CANDIDATES,
    Budget,
    Candidate,
    SensitivityRow,
    allocate,
    build_problem,
    candidate_named,
    measure_tensor,
)
from quant_core.mixed.causal import evaluate_recipe, load_causal_lm, reference
from quant_core.mixed.texts import CALIBRATION_TEXT


def _fp16(name: str, **kw: object) -> Candidate:
    return Candidate(name, QuantConfig(scale_dtype=ScaleDtype.FP16, **kw))  # type: ignore[arg-type]


# The table's 6 schemes: the lab's recipe, whose compiled kernels run at hundreds of millions
# of elements per second on this machine (the shipped formats' llama.cpp recipes at 25M to
# 180M, the K-quants slowest: ``preset_rates`` prints each on one weight; December 6, one
# thread: Q4_K 25M/s, Q5_K 29M/s, Q6_K 35M/s, IQ4_XS 40M/s, Q4_0 118M/s, int8_pc 911M/s).
SIX = (
    candidate_named("int8_pc"),
    candidate_named("int4_g128"),
    _fp16("nf4_g64", format=Format.NF4, granularity=PerGroup(64)),
    _fp16("fp8_pc", format=Format.FP8_E4M3, granularity=PerChannel(0)),
    _fp16("fp4_g32", format=Format.FP4_E2M1, granularity=PerGroup(32)),
    _fp16("int3_g64", bits=3, mode=Mode.ASYMMETRIC, granularity=PerGroup(64)),
)


def preset_rates() -> None:
    """Elements per second of each default candidate on one 4096 x 4096 weight in memory
    (after a first run that compiles), through ``measure_tensor``."""
    w = torch.empty(4096, 4096).normal_(0.0, 0.02)
    parts = []
    for cand in DEFAULT_CANDIDATES:
        measure_tensor("w", w[:256], [cand])
        start = time.perf_counter()
        (r,) = measure_tensor("w", w, [cand])
        took = time.perf_counter() - start
        parts.append(f"{cand.name} {w.numel() / took / 1e6:.1f}M/s" if r.ok else
                     f"{cand.name} skipped ({(r.skipped or '')[:40]})")  # fmt: skip
    print("default candidates on one 4096x4096 weight, measured: " + "; ".join(parts))


def float64_formula(w: torch.Tensor, w_hat: torch.Tensor, a: torch.Tensor) -> float:
    """The table's error sums before ``quant_core.mixed.sums``: float32 squares of the
    whole difference, float64 column sums, then the importance dot product."""
    col = (w_hat - w).square_().sum(dim=0, dtype=torch.float64)
    return float(col.sum()) + float(col @ a)


def task_benchmark(work: Path, reps: int) -> None:
    """One table task on one 4096 x 11008 bf16 weight (Llama-7B's MLP) x ``SIX``, in this
    process: ``measure_tensor`` against a plain ``safe_open`` read of the same tensor from a
    file in the page cache, and each scheme's error sums (``sums.error_sums``) against the
    float64 formula they replaced, on the same dequantized weight (medians of ``reps``)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    from quant_core import quantize
    from quant_core.mixed import config_for
    from quant_core.mixed.sums import error_sums

    w = torch.empty(4096, 11008).normal_(0.0, 0.02).to(torch.bfloat16)
    a = torch.rand(11008, dtype=torch.float64)
    path = work / "task.safetensors"
    save_file({"w": w}, str(path))
    measure_tensor("w", w[:256], SIX, importance=a)  # compile the kernels

    def read() -> torch.Tensor:
        with safe_open(str(path), framework="pt") as handle:
            return handle.get_tensor("w").clone()

    def timed(fn: Callable[..., object], *args: object) -> float:
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def cold(fn: Callable[[], object]) -> float:
        """Median of ``reps`` runs of ``fn``, each after the file's pages are evicted."""
        times = []
        for _ in range(reps):
            drop_cache([path])
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def task() -> object:
        return measure_tensor("w", read(), SIX, importance=a)

    # alternating, so that the machine's other work falls on each alike
    warm_s, cold_s, task_s, task_cold_s, before_s = [], [], [], [], []
    for _ in range(reps):
        warm_s.append(timed(read))
        cold_s.append(cold(read))
        task_s.append(timed(task))
        task_cold_s.append(cold(task))
        with without_fused_pass():
            before_s.append(timed(task))
    warm_r, cold_r, t_warm, t_cold, t_before = (
        statistics.median(x) for x in (warm_s, cold_s, task_s, task_cold_s, before_s)
    )
    n = w.numel()
    print(
        f"one task, 4096x11008 bf16 x {len(SIX)} schemes (medians of {reps}x{reps}): plain "
        f"read {warm_r:.3f} s from the page cache, {cold_r:.3f} s evicted (cold)\n"
        f"  read + table {t_warm:.3f} s = x{t_warm / warm_r:.1f} the warm read "
        f"({n * len(SIX) / t_warm / 1e6:.0f}M element-schemes/s); cold read + table "
        f"{t_cold:.3f} s = x{t_cold / cold_r:.1f} the cold read\n"
        f"  without the fused pass (quantize, dequantize, sums: the path before) "
        f"{t_before:.3f} s = x{t_before / warm_r:.1f} the warm read, "
        f"x{t_before / cold_r:.1f} the cold read; the fused pass x{t_before / t_warm:.2f}"
    )
    w32 = w.to(torch.float32)
    parts = []
    for cand in SIX:
        w_hat = quantize(w32, config_for(cand, tuple(w.shape))).dequantize()
        old = timed(float64_formula, w32, w_hat, a)
        new = timed(error_sums, w32, w_hat, a)
        parts.append(f"{cand.name} {old:.2f} -> {new:.3f} s (x{old / new:.1f})")
    print("  error sums per scheme, float64 formula -> one compiled pass: " + "; ".join(parts))


@contextlib.contextmanager
def without_fused_pass() -> Iterator[None]:
    """``measure_tensor`` as it was before ``sums.scheme_error_sums``: each scheme quantized,
    dequantized (or its codes decoded) and summed, with extremes of its own."""
    from quant_core.mixed import sensitivity, sums

    fused, prepare = sensitivity.scheme_error_sums, sums.RowExtremes.prepare
    sensitivity.scheme_error_sums = lambda *args: None  # type: ignore[assignment]
    sums.RowExtremes.prepare = lambda self, lengths: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        sensitivity.scheme_error_sums = fused
        sums.RowExtremes.prepare = prepare  # type: ignore[method-assign]


def warm(placement: Placement, folder: Path) -> None:
    """Start the placement's workers and compile their kernels before the clock starts: a
    pass of small weights, then one of weights with rows longer than 4096. Dynamo's dynamic
    kernels carry guards from the shapes they first saw (a row of at most 4096 values, as
    many blocks per row as values per block for 1024 = 32 x 32), and the first weight that
    breaks one compiles again: 5 to 9 s more in each worker's first real task when the
    workers were warmed on the small weights alone. Two tasks per worker per pass, so each
    worker takes some of each while the others compile."""
    for i, shape in enumerate(((256, 1024), (64, 11008))):
        small = folder / f"warm{i}"
        small.mkdir(exist_ok=True)
        weights = {f"w{k}.weight": torch.randn(*shape).to(torch.bfloat16)
                   for k in range(2 * placement.workers)}  # fmt: skip
        write_sharded(small, iter([weights]), 1)
        ckpt = open_checkpoint(small, parse_roots(str(folder)))
        tasks = tasks_for(ckpt, SIX, parse_roots(str(folder)))
        fill_table(TableStore(), f"warm{i}", tasks, placement)


def table_pass(label: str, placement: Placement, tasks: tuple[TableTask, ...], paths: list[Path],
               plain_s: float, warm_s: float) -> None:  # fmt: skip
    drop_cache(paths)
    start = time.perf_counter()
    results = fill_table(TableStore(), label, tasks, placement)
    took = time.perf_counter() - start
    elements = sum(t.n_elements for t in tasks)
    read_s = sum(r.read_seconds for r in results.values())
    print(
        f"  {label:26s} {took:7.1f} s = x{took / plain_s:5.1f} the cold read, "
        f"x{took / warm_s:5.1f} the warm read; "
        f"{elements / took / 1e6:6.2f}M elements/s ({elements * len(SIX) / took / 1e6:6.1f}M "
        f"element-schemes/s); reads {read_s:.1f} s of worker time; "
        f"{len({r.worker for r in results.values()})} worker process(es)"
    )


def table_benchmark(work: Path, n_layers: int, skip_ray: bool) -> None:
    folder = work / "model"
    start = time.perf_counter()
    write_sharded(folder, layers(n_layers), n_layers)
    roots = parse_roots(str(work))
    ckpt = open_checkpoint(folder, roots)
    paths = [ckpt.shard_path(s.name) for s in ckpt.shards]
    tasks = tasks_for(ckpt, SIX, roots)
    params = sum(t.info.numel for t in ckpt.tensors)
    print(
        f"checkpoint: {params / 1e9:.3f}B parameters bf16, {ckpt.stored_bytes / 1e9:.2f} GB in "
        f"{len(paths)} shards (written in {time.perf_counter() - start:.0f} s); {len(tasks)} "
        f"weights x {len(SIX)} schemes: {', '.join(c.name for c in SIX)}"
    )
    drop_cache(paths)
    nbytes, elements, plain_s = plain_read(paths)
    # again at once: from the page cache where it holds the checkpoint
    _, _, warm_s = plain_read(paths)
    print(
        f"  plain safe_open read       {plain_s:7.1f} s cold, evicted from the page cache "
        f"({nbytes / 1e9 / plain_s:.2f} GB/s, {elements / plain_s / 1e6:.0f}M elements/s); "
        f"{warm_s:.1f} s warm, read again at once ({nbytes / 1e9 / warm_s:.2f} GB/s)"
    )
    for workers in (1, 2):
        placement = Placement(Where.LOCAL, workers)
        warm(placement, work)
        table_pass(f"{workers} local worker(s)", placement, tasks, paths, plain_s, warm_s)
        shutdown_pools()
    if skip_ray:
        return
    try:
        import ray
    except ImportError:
        print("  Ray: not installed")
        return
    root = str(Path(__file__).resolve().parents[1])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": root}})  # fmt: skip
    try:
        placement = Placement(Where.RAY, 2, "local")
        warm(placement, work)
        table_pass("local Ray (num_cpus=2)", placement, tasks, paths, plain_s, warm_s)
    finally:
        ray.shutdown()


def row(t: int, s: int, n: int, bits: int, err: float) -> SensitivityRow:
    return SensitivityRow(f"t{t}", f"s{s}", (1, n), 16 * n, bits, bits / n, 0.0, 0.0, err, 1.0,
                          False, None, None, 0.0)  # fmt: skip


def allocation_benchmark() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for t in range(1000):
        n = int(rng.integers(1 << 20, 1 << 26))
        for s in range(10):
            bpe = 2 + 0.7 * s + 0.1 * rng.random()
            rows.append(row(t, s, n, int(bpe * n), float(n * np.exp(-bpe) * (0.5 + rng.random()))))
    times = []
    for _ in range(7):
        start = time.perf_counter()
        alloc = allocate(build_problem(rows), Budget(4.5))
        times.append(time.perf_counter() - start)
    build = []
    for _ in range(7):
        start = time.perf_counter()
        problem = build_problem(rows)
        build.append(time.perf_counter() - start)
    solve = []
    for _ in range(7):
        start = time.perf_counter()
        allocate(problem, Budget(4.5))
        solve.append(time.perf_counter() - start)
    print(
        f"allocation, 1,000 tensors x 10 schemes: {statistics.median(times) * 1e3:.1f} ms median "
        f"of 7 (build {statistics.median(build) * 1e3:.1f} ms + solve "
        f"{statistics.median(solve) * 1e3:.2f} ms) = {statistics.median(times) / 0.1:.2f} of the "
        f"100 ms target; {alloc.bits_per_weight:.4f} bits per weight for a 4.5 budget, "
        f"{alloc.fixup_moves} fix-up move(s)"
    )


def write_lm(folder: Path, hidden: int, layers_: int, intermediate: int, heads: int,
             kv_heads: int, vocab: int, tied: bool) -> Path:  # fmt: skip
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([CALIBRATION_TEXT], trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<unk>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))  # fmt: skip
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers_, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, max_position_embeddings=1024,
                         tie_word_embeddings=tied)  # fmt: skip
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    return folder


def lm_benchmark(label: str, folder: Path, tokens: int) -> None:
    start = time.perf_counter()
    lm = load_causal_lm(folder)
    load_s = time.perf_counter() - start
    ref = reference(lm, max_tokens=tokens)
    names = [n for n, p in lm.model.named_parameters() if p.dim() == 2]
    recipe = dict.fromkeys(names, candidate_named("int4_g128").config)
    ev = evaluate_recipe(lm, ref, {n: c for n, c in recipe.items()})  # warm: kernels
    ev = evaluate_recipe(lm, ref, recipe)
    print(
        f"{label}: {lm.parameters / 1e6:.1f}M parameters, loaded in {load_s:.1f} s; float "
        f"forward on {ref.n_tokens} tokens {ref.seconds:.2f} s; KL and perplexity under int4 "
        f"g128 ({ev.quantized} tensors fake-quantized) {ev.seconds:.2f} s: KL {ev.kl:.4f} "
        f"nats/token, perplexity {ev.perplexity:.1f} (float {ev.float_perplexity:.1f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=5, help="decoder layers (default 5)")
    parser.add_argument("--skip-table", action="store_true")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--skip-05b", action="store_true")
    parser.add_argument("--skip-rates", action="store_true")
    parser.add_argument("--skip-lm", action="store_true", help="without the KL/perplexity runs")
    parser.add_argument(
        "--task-only", action="store_true", help="only one table task (4096x11008 x 6 schemes)"
    )
    parser.add_argument("--reps", type=int, default=3, help="repeats of the task's timings")
    args = parser.parse_args()
    print(f"torch threads: {torch.get_num_threads()}, cores: {os.cpu_count()}, "
          f"load average: {os.getloadavg()[0]:.1f}")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="qlab-mixed-"))
    try:
        task_benchmark(work, args.reps)
        if args.task_only:
            return 0
        allocation_benchmark()
        if not args.skip_rates:
            preset_rates()
        if not args.skip_lm:
            tiny = write_lm(work / "tiny", 128, 2, 256, 4, 2, 320, False)
            lm_benchmark("tiny Llama", tiny, 256)
        if not args.skip_lm and not args.skip_05b:
            big = write_lm(work / "qwen2-0.5b-shape", 896, 24, 4864, 14, 2, 151936, True)
            lm_benchmark("0.5B-scale (Qwen2-0.5B shape, random)", big, 256)
            shutil.rmtree(big, ignore_errors=True)
        if not args.skip_table:
            table_benchmark(work, args.layers, args.skip_ray)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
