"""quant_core.mixed: candidates, input importance and the sensitivity table's rows, against
``quantize``/``storage_cost``/``error_metrics`` and hand-derived values."""

from __future__ import annotations

import math

import pytest
import torch

from quant_core import (
    Mode,
    PerGroup,
    QuantConfig,
    ScaleDtype,
    capture_linear_inputs,
    error_metrics,
    quantize,
    storage_cost,
)
from quant_core.mixed import (
    DEFAULT_CANDIDATES,
    LAB_CANDIDATES,
    SHIPPED,
    Candidate,
    candidate_named,
    check_candidates,
    config_for,
    gguf_type,
    importance_from_capture,
    input_importance,
    measure_tensor,
    weighted_error,
)

REL = 2.0**-22


def test_importance_is_the_mean_square_of_each_input_column() -> None:
    x = torch.tensor([[1.0, 0.0], [3.0, 0.0]])
    assert input_importance(x).tolist() == [5.0, 0.0]  # the module docstring's example
    with pytest.raises(ValueError, match=r"\[tokens, in\]"):
        input_importance(torch.ones(3))
    with pytest.raises(ValueError, match="NaN or Inf"):
        input_importance(torch.tensor([[math.inf]]))


def test_weighted_error_is_the_output_error_when_inputs_are_uncorrelated(
    gen: torch.Generator,
) -> None:
    """With orthogonal input columns (XᵀX diagonal) the diagonal approximation is exact:
    mean over tokens of |D x|² equals Σ_ij D_ij² a_j."""
    n_in = 8
    q, _ = torch.linalg.qr(torch.randn(64, n_in, generator=gen, dtype=torch.float64))
    x = q * torch.arange(1, n_in + 1, dtype=torch.float64)  # orthogonal, unequal columns
    w = torch.randn(5, n_in, generator=gen, dtype=torch.float64)
    w_hat = w + 0.01 * torch.randn(5, n_in, generator=gen, dtype=torch.float64)
    a = input_importance(x)
    # weighted_error squares float32 differences: its d is d rounded to float32
    d32 = w.float().double() - w_hat.float().double()
    exact = float(((x @ d32.T) ** 2).sum(dim=1).mean())
    assert weighted_error(w, w_hat, a) == pytest.approx(exact, rel=REL)
    assert weighted_error(w, w_hat) == pytest.approx(float((d32**2).sum()), rel=REL)


def test_importance_from_a_capture_is_keyed_by_weight_name(gen: torch.Generator) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    x = torch.randn(10, 4, generator=gen)
    cap = capture_linear_inputs(model, lambda: model(x))
    imp = importance_from_capture(cap)
    assert set(imp) == {"0.weight", "2.weight"}
    assert torch.allclose(imp["0.weight"], (x.double() ** 2).mean(dim=0))


MEASURED = (*LAB_CANDIDATES, *(candidate_named(n) for n in ("Q4_0", "Q8_0", "MXFP4", "NVFP4",
                                                              "NF4_DQ")))  # fmt: skip


def test_rows_match_quantize_storage_cost_and_error_metrics(gen: torch.Generator) -> None:
    w = torch.randn(16, 128, generator=gen)
    a = torch.rand(128, generator=gen, dtype=torch.float64)
    rows = measure_tensor("layer.weight", w, MEASURED, importance=a)
    assert [r.scheme for r in rows] == [c.name for c in MEASURED]
    for cand, r in zip(MEASURED, rows, strict=True):
        assert r.ok, r.skipped
        assert r.stored_as is None and r.gguf_type == cand.config.gguf_type
        w_hat = quantize(w, cand.config).dequantize()
        m = error_metrics(w, w_hat)
        cost = storage_cost(w.shape, cand.config)
        assert r.total_bits == cost.total_bits
        assert r.bits_per_element == cost.bits_per_element
        # The rows square float32 differences (sums in float64): the difference and the
        # square each round once, so every term is within 1.5 * 2^-23 < REL of float64's.
        assert r.mse == pytest.approx(m.mse, rel=REL)
        assert r.sqnr_db == pytest.approx(m.sqnr_db, abs=10 / math.log(10) * REL)
        d2 = (w.double() - w_hat.double()) ** 2
        assert r.weighted_error == pytest.approx(float(d2.sum(0) @ a), rel=REL)
        assert r.energy == pytest.approx(float((w.double() ** 2).sum(0) @ a), rel=REL)
        assert r.weighted and r.stored_bits == 16 * 128 * 32


def test_held_out_output_error(gen: torch.Generator) -> None:
    w = torch.randn(8, 64, generator=gen)
    x = torch.randn(20, 64, generator=gen)
    cand = candidate_named("int4_g128")
    cfg = QuantConfig(bits=4, mode=Mode.ASYMMETRIC, granularity=PerGroup(64),
                      scale_dtype=ScaleDtype.FP16)  # fmt: skip
    (r,) = measure_tensor("t", w, [Candidate("int4_g64", cfg)], held_out=x)
    w_hat = quantize(w, cfg).dequantize()
    assert r.output_mse == pytest.approx(float(((x @ (w - w_hat).T) ** 2).mean()), rel=1e-5)
    (skip,) = measure_tensor("t", w, [cand])  # 128 does not divide 64
    assert not skip.ok and "group size 128" in (skip.skipped or "")
    assert math.isnan(skip.weighted_error) and skip.total_bits == 0


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="2-D"):
        measure_tensor("t", torch.ones(4), DEFAULT_CANDIDATES)
    with pytest.raises(ValueError, match=r"importance must have shape \[4\]"):
        measure_tensor("t", torch.ones(2, 4), DEFAULT_CANDIDATES, importance=torch.ones(3))
    # a weight with NaN or Inf values is no error: a skipped row per scheme (kept as stored)
    rows = measure_tensor("t", torch.tensor([[math.nan, 1.0]]), DEFAULT_CANDIDATES)
    assert [r.scheme for r in rows] == [c.name for c in DEFAULT_CANDIDATES]
    assert all(r.skipped == "the weight holds 1 NaN and 0 Inf values of 2" for r in rows)
    assert all(r.total_bits == 0 and r.stored_bits == 64 for r in rows)
    with pytest.raises(ValueError, match="at least one"):
        check_candidates([])
    with pytest.raises(ValueError, match="given twice"):
        check_candidates([DEFAULT_CANDIDATES[0]] * 2)
    with pytest.raises(ValueError, match="unknown scheme 'q9'"):
        candidate_named("q9")
    with pytest.raises(ValueError, match="letters, digits"):
        Candidate("a b", QuantConfig())


def test_gguf_types_and_llama_quantizes_fallback(gen: torch.Generator) -> None:
    assert gguf_type(candidate_named("Q8_0").config) == "Q8_0"
    assert gguf_type(candidate_named("int4_g128").config) is None
    assert [c.name for c in DEFAULT_CANDIDATES] == [*SHIPPED, "int4_g128", "int8_pc"]
    # Q4_K's 256-value super-blocks do not divide 384-wide rows: llama-quantize stores
    # such a tensor as Q5_0, and the table measures that
    w = torch.randn(8, 384, generator=gen)
    (r,) = measure_tensor("t", w, [candidate_named("Q4_K")])
    q5_0 = QuantConfig.from_name("Q5_0")
    assert config_for(candidate_named("Q4_K"), (8, 384)) == q5_0
    assert r.ok and r.stored_as == "Q5_0" and r.gguf_type == "Q5_0"
    assert r.total_bits == storage_cost(w.shape, q5_0).total_bits == 8 * 384 * 11 // 2
    assert r.mse == pytest.approx(error_metrics(w, quantize(w, q5_0).dequantize()).mse, rel=REL)
    # rows of 48 values divide neither Q4_K's blocks nor Q5_0's: F16 in llama.cpp, no cell
    (r,) = measure_tensor("t", torch.randn(8, 48, generator=gen), [candidate_named("Q4_K")])
    assert not r.ok and "keeps such a tensor in F16" in (r.skipped or "")
