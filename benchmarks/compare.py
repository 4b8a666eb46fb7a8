"""Speed of the compare-schemes services, against quant_core doing the same work directly.

Run from anywhere (the project is installed in editable mode): ``python benchmarks/compare.py``.

Targets, each timed as the best of five runs in this process (service and baseline runs
alternate, so load from other processes falls on both):

1. a sweep of 24 schemes on a 1024x1024 tensor (``run_sweep``) completes in under 3 s;
2. the per-layer report over every linear weight of the bundled all-MiniLM-L6-v2 for one
   scheme (``evaluate_safetensors``, reading the file tensor by tensor) in under 5 s;
3. each A/B figure of a 4096x4096 tensor is under 2 MB of plotly JSON;
4. the same 24-scheme grid on the bundled model's ``encoder.layer.0.intermediate.dense``
   weight (1536x384), with held-out output errors: RTN alone in under 3 s, and with GPTQ and
   AWQ added (72 schemes) in under 90 s (one run each; the model load and capture are
   timed apart, the page caches them). It prints each algorithm's share of the time and
   the schemes on one frontier (weight MSE or held-out output MSE) but not the other.
   On a busy machine torch's threads wait on each other: ``OMP_NUM_THREADS=1`` ran the 72
   schemes in 16 s where 2 threads took 80-150 s (2 cores shared with other jobs).

For 1 and 2 the baseline is quant_core alone on the same tensors (``quantize`` +
``dequantize`` + ``error_metrics``; for the model, with the tensors already in memory), and
the ratio service / baseline shows what the service adds (clipping counts, storage
accounting, ids, and for the model the file reads). Exits with status 1 if a target fails.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace

import torch
from safetensors import safe_open

from dashboard.services.activations.layer import layer_inputs
from dashboard.services.compare.ab import compare_ab
from dashboard.services.compare.ab_figures import (
    ab_difference_figure,
    ab_error_figure,
    ab_winner_figure,
)
from dashboard.services.compare.frontier import frontier_difference
from dashboard.services.compare.sweep import SchemeGrid, expand_grid, run_sweep, sweep_table
from dashboard.services.model.embeddings import load_bundled_model
from dashboard.services.model.evaluate import evaluate_safetensors
from dashboard.services.model.files import bundled_model_file, list_linear_weights
from dashboard.services.state.scheme import GranularityKind
from quant_core import (
    Algorithm,
    Mode,
    PerChannel,
    PerGroup,
    QuantConfig,
    clip_stats,
    error_metrics,
    quantize,
)
from quant_core.calibration import (
    CALIBRATION_SENTENCES,
    HELD_OUT_SENTENCES,
    capture_sentence_inputs,
    transformer_of,
)

SWEEP_TARGET_S = 3.0
MODEL_TARGET_S = 5.0
PAYLOAD_TARGET_BYTES = 2_000_000
LAYER = "encoder.layer.0.intermediate.dense"
LAYER_RTN_TARGET_S = 3.0
LAYER_ALL_TARGET_S = 90.0
REPEAT = 5


def best_of_interleaved(
    service: Callable[[], object], direct: Callable[[], object], repeat: int = REPEAT
) -> tuple[float, float]:
    """The fastest of ``repeat`` runs of each, in seconds, alternating the two so that load
    from other processes on a shared machine falls on both alike."""
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for i, fn in enumerate((service, direct)):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best[0], best[1]


def line(label: str, seconds: float, extra: str = "") -> None:
    print(f"    {label:28s} {seconds:7.3f} s  {extra}".rstrip())


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


GRID_24 = SchemeGrid(
    bits=(2, 4, 8),
    modes=(Mode.SYMMETRIC, Mode.ASYMMETRIC),
    kinds=(GranularityKind.TENSOR, GranularityKind.CHANNEL, GranularityKind.GROUP),
    group_sizes=(32, 128),
)


def bench_sweep() -> bool:
    x = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(0))
    configs = expand_grid(GRID_24, x.shape).configs
    assert len(configs) == 24, len(configs)

    def direct() -> None:
        for cfg in configs:
            error_metrics(x, quantize(x, cfg).dequantize())

    def direct_with_clip() -> None:
        for cfg in configs:
            qt = quantize(x, cfg)
            error_metrics(x, qt.dequantize())
            clip_stats(x, qt)

    def service() -> None:
        run_sweep(x, configs)

    direct()  # warm up
    t_service, t_direct = best_of_interleaved(service, direct)
    t_service2, t_clip = best_of_interleaved(service, direct_with_clip)
    t_service = min(t_service, t_service2)
    ok = t_service < SWEEP_TARGET_S
    print(f"[{verdict(ok)}] sweep: 24 schemes on 1024x1024")
    line("run_sweep", t_service, f"(target < {SWEEP_TARGET_S:.0f} s)")
    line("quant_core directly", t_direct, f"ratio {t_service / t_direct:.2f} x")
    line("quant_core + clip_stats", t_clip, f"ratio {t_service / t_clip:.2f} x")
    print("    (the table's clipped/saturated counts need clip_stats; the rest is the service)")
    return ok


def bench_model() -> bool:
    path = bundled_model_file()
    cfg = QuantConfig(bits=4, granularity=PerGroup(32))
    entries = list_linear_weights(path)
    with safe_open(str(path), framework="pt", device="cpu") as f:
        weights = [f.get_tensor(e.name) for e in entries]
    n_elements = sum(w.numel() for w in weights)

    def direct() -> None:
        for w in weights:
            error_metrics(w, quantize(w, cfg).dequantize())

    def direct_from_file() -> None:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for e in entries:
                w = f.get_tensor(e.name)
                error_metrics(w, quantize(w, cfg).dequantize())

    def service() -> None:
        evaluate_safetensors(path, cfg)

    direct()  # warm up
    result = evaluate_safetensors(path, cfg)
    t_service, t_direct = best_of_interleaved(service, direct)
    t_service2, t_file = best_of_interleaved(service, direct_from_file)
    t_service = min(t_service, t_service2)
    ok = t_service < MODEL_TARGET_S and not result.skipped
    print(
        f"[{verdict(ok)}] per-layer report: all-MiniLM-L6-v2, {len(result.layers)} linear "
        f"weights ({n_elements / 1e6:.1f} M elements), {cfg.describe()}"
    )
    line("evaluate_safetensors", t_service, f"(target < {MODEL_TARGET_S:.0f} s)")
    line("quant_core (in memory)", t_direct, f"ratio {t_service / t_direct:.2f} x")
    line("quant_core + file reads", t_file, f"ratio {t_service / t_file:.2f} x")
    return ok


def bench_payload() -> bool:
    x = torch.randn(4096, 4096, generator=torch.Generator().manual_seed(0))
    start = time.perf_counter()
    ab = compare_ab(
        x,
        QuantConfig(bits=4, granularity=PerGroup(32)),
        QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerChannel(0)),
    )
    t_ab = time.perf_counter() - start
    sizes = {}
    start = time.perf_counter()
    for build in (ab_error_figure, ab_difference_figure, ab_winner_figure):
        sizes[build.__name__] = len(build(ab).to_json())
    t_fig = time.perf_counter() - start
    ok = max(sizes.values()) < PAYLOAD_TARGET_BYTES
    print(f"[{verdict(ok)}] A/B figures of a 4096x4096 tensor under 2 MB of JSON each")
    for name, size in sizes.items():
        print(f"    {name:28s} {size / 1e6:7.3f} MB")
    print(f"    compare_ab {t_ab:.2f} s, three figures built and serialised {t_fig:.2f} s")
    return ok


def bench_layer_sweep() -> bool:
    start = time.perf_counter()
    model = load_bundled_model()
    t_load = time.perf_counter() - start
    start = time.perf_counter()
    calibration = capture_sentence_inputs(model, CALIBRATION_SENTENCES)
    held_out = capture_sentence_inputs(model, HELD_OUT_SENTENCES)
    inputs = layer_inputs(transformer_of(model), LAYER, calibration, held_out)
    t_capture = time.perf_counter() - start
    w = inputs.weight
    print(
        f"[....] sweep on {LAYER} {list(w.shape)}: model load {t_load:.1f} s, capture "
        f"{t_capture:.1f} s ({inputs.x_calib.shape[0]} calibration and "
        f"{inputs.x_eval.shape[0]} held-out tokens; the page caches both)"
    )
    # Warm up untimed: the first quantize of each layout compiles its kernels.
    start = time.perf_counter()
    run_sweep(w, expand_grid(GRID_24, w.shape).schemes, inputs=inputs)
    line("warm-up (RTN, untimed)", time.perf_counter() - start)
    times: dict[tuple[Algorithm, ...], float] = {}
    table = None
    for algorithms in (
        (Algorithm.RTN,),
        (Algorithm.RTN, Algorithm.GPTQ),
        (Algorithm.RTN, Algorithm.AWQ),
        (Algorithm.RTN, Algorithm.GPTQ, Algorithm.AWQ),
    ):
        grid = replace(GRID_24, algorithms=algorithms)
        schemes = expand_grid(grid, w.shape, has_calibration=True).schemes
        start = time.perf_counter()
        result = run_sweep(w, schemes, inputs=inputs)
        times[algorithms] = time.perf_counter() - start
        table = sweep_table(result, tensor=f"{LAYER}.weight")
        names = "+".join(a.label for a in algorithms)
        per = table.groupby("algorithm")["seconds"].sum()
        shares = ", ".join(f"{k} {v:.1f} s" for k, v in per.items())
        line(f"{len(schemes)} schemes, {names}", times[algorithms], f"({shares})")
    rtn = times[(Algorithm.RTN,)]
    full = times[(Algorithm.RTN, Algorithm.GPTQ, Algorithm.AWQ)]
    ok = rtn < LAYER_RTN_TARGET_S and full < LAYER_ALL_TARGET_S
    print(
        f"[{verdict(ok)}] targets: RTN < {LAYER_RTN_TARGET_S:.0f} s, "
        f"RTN+GPTQ+AWQ < {LAYER_ALL_TARGET_S:.0f} s"
    )
    assert table is not None
    diff = frontier_difference(table)
    print(f"    frontiers differ: {diff.differ}")
    print(f"    only on the weight-MSE frontier: {', '.join(diff.first_only) or '-'}")
    print(f"    only on the output-MSE frontier: {', '.join(diff.second_only) or '-'}")
    return ok


def main() -> int:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    results = [bench_sweep(), bench_model(), bench_payload(), bench_layer_sweep()]
    print(f"{sum(results)}/{len(results)} targets met")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
