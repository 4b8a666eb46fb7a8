"""The streamed per-layer report over a 1B-parameter bf16 checkpoint on disk, against a plain
``safe_open`` read of the same tensors in the same run.

Run: ``python benchmarks/checkpoint.py`` (about 2 GB of disk in a temporary folder, removed
afterwards unless ``--keep``; a few minutes on two cores).

The checkpoint: ``--layers`` (5) decoder layers of Llama-7B's shape, 4096 wide: q, k, v, o
``4096 x 4096`` and gate, up ``11008 x 4096``, down ``4096 x 11008``, bf16, plus two RMSNorm
scales per layer; one shard per layer and ``model.safetensors.index.json``, as Hugging Face
writes them. 5 layers are 1.01B parameters (2.02 GB).

Before each timed pass the shards' pages are dropped from the page cache
(``posix_fadvise(DONTNEED)``, this checkpoint's files only), so both passes read from disk:

(a) reference: one ``safe_open`` per shard, ``get_tensor`` of every 2-D tensor and a copy
    out of the map (what makes the read happen), nothing else;
(b) the report: ``streaming.stream_report`` under int4 asymmetric g128 RTN (a shard opened
    per tensor, the tensor copied out of its map as float32, quantized, dequantized and
    measured).

Printed: where the report's time goes on the largest weight in memory (float32 copy,
quantize, dequantize, error metrics; this also warms up compiled kernels before anything
is timed),
GB/s read and elements/s for (a) and (b), the ratios, and the peak resident-memory growth
during (b) against the largest tensor (``VmHWM`` reset through ``/proc/self/clear_refs``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open

from dashboard.services.model.evaluate import working_copy
from dashboard.services.model.folder import open_checkpoint
from dashboard.services.model.roots import parse_roots
from dashboard.services.model.shards import write_sharded
from dashboard.services.model.streaming import stream_report
from dashboard.services.model.throughput import throughput
from quant_core import Mode, PerGroup, QuantConfig, error_metrics, quantize

HIDDEN, INTERMEDIATE = 4096, 11008
CFG = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(group_size=128))
PROJECTIONS = {
    "self_attn.q_proj": (HIDDEN, HIDDEN),
    "self_attn.k_proj": (HIDDEN, HIDDEN),
    "self_attn.v_proj": (HIDDEN, HIDDEN),
    "self_attn.o_proj": (HIDDEN, HIDDEN),
    "mlp.gate_proj": (INTERMEDIATE, HIDDEN),
    "mlp.up_proj": (INTERMEDIATE, HIDDEN),
    "mlp.down_proj": (HIDDEN, INTERMEDIATE),
}


def layers(n: int, seed: int = 0) -> Iterator[dict[str, torch.Tensor]]:
    """Layer ``i``'s tensors (one shard), weights ~ N(0, 0.02^2) in bf16."""
    g = torch.Generator().manual_seed(seed)
    for i in range(n):
        shard = {}
        for name, shape in PROJECTIONS.items():
            w = torch.empty(shape, dtype=torch.float32).normal_(0.0, 0.02, generator=g)
            shard[f"model.layers.{i}.{name}.weight"] = w.to(torch.bfloat16)
            del w
        for norm in ("input_layernorm", "post_attention_layernorm"):
            shard[f"model.layers.{i}.{norm}.weight"] = torch.ones(HIDDEN, dtype=torch.bfloat16)
        yield shard


def drop_cache(paths: list[Path]) -> None:
    """Evict these files' pages from the page cache (clean pages: written and synced)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def memory(key: str) -> int:
    """``VmRSS`` or ``VmHWM`` of this process in bytes (0 where /proc is missing)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def plain_read(paths: list[Path]) -> tuple[int, int, float]:
    """(bytes, elements, seconds) of reading every 2-D tensor with one handle per shard."""
    nbytes = elements = 0
    start = time.perf_counter()
    for path in paths:
        with safe_open(str(path), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (a safe_open handle, not a dict)
                if len(handle.get_slice(name).get_shape()) != 2:
                    continue
                t = handle.get_tensor(name).clone()
                nbytes += t.numel() * t.element_size()
                elements += t.numel()
                del t
    return nbytes, elements, time.perf_counter() - start


def split(shape: tuple[int, ...]) -> None:
    """Where the report's time goes on one bf16 weight of ``shape`` in memory (no read):
    run once to warm up (compiled kernels, allocator), then timed; also ``error_metrics``
    on the bf16 weight itself, which is why the report converts each weight first."""
    w = torch.empty(shape, dtype=torch.float32).normal_(0.0, 0.02).to(torch.bfloat16)
    times: dict[str, float] = {}
    for _ in range(2):  # the first run warms up
        start = time.perf_counter()
        w32 = working_copy(w)
        times["to float32"] = time.perf_counter() - start
        start = time.perf_counter()
        qt = quantize(w32, CFG)
        times["quantize"] = time.perf_counter() - start
        start = time.perf_counter()
        w_hat = qt.dequantize()
        times["dequantize"] = time.perf_counter() - start
        start = time.perf_counter()
        error_metrics(w32, w_hat)
        times["error_metrics"] = time.perf_counter() - start
    start = time.perf_counter()
    error_metrics(w, w_hat)
    bf16_s = time.perf_counter() - start
    n = w.numel() / 1e6
    parts = ", ".join(f"{k} {v:.2f} s ({n / v:.0f}M/s)" for k, v in times.items())
    print(
        f"largest weight in memory: {parts}; error_metrics of the bf16 weight itself "
        f"{bf16_s:.2f} s ({n / bf16_s:.0f}M/s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=5, help="decoder layers (default 5)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint afterwards")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="qlab-ckpt-", dir=args.dir))
    try:
        return run(work, args.layers)
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(work: Path, n_layers: int) -> int:
    folder = work / "model"
    start = time.perf_counter()
    write_sharded(folder, layers(n_layers), n_layers)
    checkpoint = open_checkpoint(folder, parse_roots(str(work)))
    paths = [checkpoint.shard_path(s.name) for s in checkpoint.shards]
    weights = checkpoint.linear_weights
    params = sum(t.info.numel for t in checkpoint.tensors)
    largest = checkpoint.largest_weight
    assert largest is not None
    print(
        f"checkpoint: {n_layers} layers, {len(paths)} shards, {params / 1e9:.3f}B parameters, "
        f"{checkpoint.stored_bytes / 1e9:.2f} GB bf16, written in "
        f"{time.perf_counter() - start:.0f} s; {len(weights)} linear weights, the largest "
        f"{largest.name} {list(largest.info.shape)} ({largest.stored_bytes / 1e6:.0f} MB)"
    )
    print(f"scheme: {CFG.describe()}, RTN; torch threads: {torch.get_num_threads()}")
    split(largest.info.shape)

    drop_cache(paths)
    nbytes, elements, plain_s = plain_read(paths)
    print(
        f"(a) plain safe_open read: {nbytes / 1e9:.2f} GB in {plain_s:.2f} s = "
        f"{nbytes / 1e9 / plain_s:.2f} GB/s ({elements / plain_s / 1e6:.0f}M elements/s)"
    )

    drop_cache(paths)
    peak_known = reset_peak()
    before = memory("VmRSS")
    start = time.perf_counter()
    rows = []
    live = sys.stdout.isatty()
    for row in stream_report(checkpoint, CFG):
        rows.append(row)
        if live:
            print(
                f"  {row.done:3d}/{row.total} {row.tensor.name:40s} {row.seconds:6.2f} s", end="\r"
            )
    report_s = time.perf_counter() - start
    growth = memory("VmHWM") - before
    if live:
        print(" " * 70, end="\r")
    total = throughput(rows)
    read_rate = total.bytes_read / 1e9 / total.read_seconds
    print(
        f"(b) per-layer report: {total.weights} weights, {total.elements / 1e9:.3f}B elements in "
        f"{report_s:.1f} s = {total.elements / report_s / 1e6:.2f}M elements/s quantized and "
        f"measured, {total.bytes_read / 1e9 / report_s:.3f} GB/s overall; its reads: "
        f"{total.bytes_read / 1e9:.2f} GB in {total.read_seconds:.2f} s = {read_rate:.2f} GB/s"
    )
    print(
        f"ratios (report / plain read): time x{report_s / plain_s:.1f}; overall GB/s "
        f"{total.bytes_read / report_s / (nbytes / plain_s):.3f}; read GB/s within the report "
        f"{read_rate / (nbytes / 1e9 / plain_s):.2f}"
    )

    if peak_known:
        stored = largest.stored_bytes or 0
        print(
            f"peak RSS growth during (b): {growth / 1e6:.0f} MB = {growth / stored:.1f} x the "
            f"largest tensor as stored ({stored / 1e6:.0f} MB), {growth / (2 * stored):.1f} x "
            f"in float32; the model is {checkpoint.stored_bytes / 1e9:.2f} GB "
            f"({checkpoint.stored_bytes / growth:.0f} x the growth)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
